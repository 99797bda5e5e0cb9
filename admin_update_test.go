package tollgate_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/memory"
)

func TestListEntities(t *testing.T) {
	ctx := context.Background()
	adm, _ := newAdmin(t, memory.New())
	for _, id := range []string{"org", "b", "a", "c"} {
		mustCreate(t, adm, tollgate.Entity{ID: id})
	}
	cases := []struct {
		after string
		limit int
		want  []string
		field string
	}{
		{"", 0, []string{"a", "b", "c", "org"}, ""},
		{"", 2, []string{"a", "b"}, ""},
		{"b", 2, []string{"c", "org"}, ""},
		{"org", 5, nil, ""},
		{"", -1, nil, "limit"},
		{"", tollgate.MaxEntityPage + 1, nil, "limit"},
	}
	for _, c := range cases {
		es, err := adm.ListEntities(ctx, c.after, c.limit)
		var ve *tollgate.ValidationError
		switch {
		case c.field != "":
			if !errors.As(err, &ve) || ve.Field != c.field {
				t.Errorf("ListEntities(%q, %d) = %v, want a validation error of %s", c.after, c.limit, err, c.field)
			}
		case err != nil:
			t.Errorf("ListEntities(%q, %d): %v", c.after, c.limit, err)
		default:
			var ids []string
			for _, e := range es {
				ids = append(ids, e.ID)
			}
			if !slices.Equal(ids, c.want) {
				t.Errorf("ListEntities(%q, %d) = %v, want %v", c.after, c.limit, ids, c.want)
			}
		}
	}
}

func TestUpdateEntity(t *testing.T) {
	ctx := context.Background()
	adm, _ := newAdmin(t, memory.New())
	created := mustCreate(t, adm, tollgate.Entity{ID: "org"})
	mustCreate(t, adm, tollgate.Entity{ID: "key", ParentID: "org", Cascade: true})
	cases := []struct {
		name string
		e    tollgate.Entity
		want error
	}{
		{"rename", tollgate.Entity{ID: "org", Name: "Acme", Metadata: map[string]string{"plan": "pro"}}, nil},
		{"missing", tollgate.Entity{ID: "ghost"}, tollgate.ErrEntityNotFound},
		{"missing parent", tollgate.Entity{ID: "key", ParentID: "ghost"}, tollgate.ErrEntityNotFound},
		{"cycle", tollgate.Entity{ID: "org", ParentID: "key"}, tollgate.ErrInvalid},
		{"own parent", tollgate.Entity{ID: "org", ParentID: "org"}, tollgate.ErrInvalid},
		{"cascade without parent", tollgate.Entity{ID: "key", Cascade: true}, tollgate.ErrInvalid},
		{"bad id", tollgate.Entity{ID: "no spaces"}, tollgate.ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := adm.UpdateEntity(ctx, c.e, tollgate.WithPrincipal("alice"))
			if !errors.Is(err, c.want) {
				t.Fatalf("UpdateEntity = %v, want %v", err, c.want)
			}
			if c.want == nil && (got.Name != c.e.Name || got.Metadata["plan"] != "pro" || !got.CreatedAt.Equal(created.CreatedAt)) {
				t.Errorf("UpdateEntity returned %+v", got)
			}
		})
	}
	evs := auditOf(t, adm, "org")
	last := evs[len(evs)-1]
	if len(evs) != 2 || last.Action != model.ActionEntityUpdate || last.Principal != "alice" || last.Details["name"] != "Acme" {
		t.Errorf("audit of org = %+v, want the create and one entity.update by alice", evs)
	}
}

// TestUpdateEntityCascadeSeenAtOnce: the limiter's cache of entities
// follows an update, so the next acquire cascades (or not) as the entity
// now says.
func TestUpdateEntityCascadeSeenAtOnce(t *testing.T) {
	ctx := context.Background()
	lim, adm, _ := newPair(t, memory.New())
	mustCreate(t, adm, tollgate.Entity{ID: "org-a"})
	mustCreate(t, adm, tollgate.Entity{ID: "org-b"})
	mustCreate(t, adm, tollgate.Entity{ID: "key", ParentID: "org-a", Cascade: true})
	setLimits(t, adm, tollgate.SystemScope(), tollgate.PerMinute("rpm", 100))
	entitiesOf := func() []string {
		t.Helper()
		le := mustAcquire(t, lim, "key", "api", tollgate.Consume{"rpm": 1})
		var out []string
		for _, s := range le.Statuses() {
			out = append(out, s.Entity)
		}
		return out
	}
	steps := []struct {
		update tollgate.Entity
		want   []string
	}{
		{tollgate.Entity{ID: "key", ParentID: "org-a", Cascade: true}, []string{"key", "org-a"}},
		{tollgate.Entity{ID: "key", ParentID: "org-b", Cascade: true}, []string{"key", "org-b"}},
		{tollgate.Entity{ID: "key", ParentID: "org-b"}, []string{"key"}},
		{tollgate.Entity{ID: "key"}, []string{"key"}},
		{tollgate.Entity{ID: "key", ParentID: "org-a", Cascade: true}, []string{"key", "org-a"}},
	}
	_ = entitiesOf() // fills the cache
	for _, st := range steps {
		if _, err := adm.UpdateEntity(ctx, st.update); err != nil {
			t.Fatal(err)
		}
		if got := entitiesOf(); !slices.Equal(got, st.want) {
			t.Errorf("after %+v: acquire debited %v, want %v", st.update, got, st.want)
		}
	}
}

func TestListLimits(t *testing.T) {
	ctx := context.Background()
	adm, _ := newAdmin(t, memory.New())
	mustCreate(t, adm, tollgate.Entity{ID: "org"})
	scopes := []tollgate.Scope{
		tollgate.SystemScope(), tollgate.ResourceScope("api"), tollgate.ResourceScope("openai/gpt-4o"),
		tollgate.EntityScope("org", ""), tollgate.EntityScope("org", "api"),
	}
	for _, sc := range slices.Backward(scopes) {
		setLimits(t, adm, sc, tollgate.PerMinute("rpm", 10))
	}
	var got []tollgate.Scope
	var after *tollgate.Scope
	for {
		page, err := adm.ListLimits(ctx, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page {
			got = append(got, c.Scope)
		}
		if len(page) < 2 {
			break
		}
		after = &page[len(page)-1].Scope
	}
	want := slices.SortedFunc(slices.Values(scopes), model.CompareScopes)
	if !slices.Equal(got, want) {
		t.Errorf("ListLimits pages = %v, want %v", got, want)
	}
	if _, err := adm.ListLimits(ctx, nil, tollgate.MaxConfigPage+1); !errors.Is(err, tollgate.ErrInvalid) {
		t.Errorf("ListLimits(limit too big) = %v, want ErrInvalid", err)
	}
}
