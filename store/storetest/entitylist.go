package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Listing and updating entities (issue 15, item 6).

func entityUpdateCases() []testCase {
	return []testCase{
		{"ListEntities", testEntityList},
		{"ListEntitiesEmpty", testEntityListEmpty},
		{"ListEntitiesBadLimit", testEntityListBadLimit},
		{"Update", testEntityUpdate},
		{"UpdateMoves", testEntityUpdateMoves},
		{"UpdateRefused", testEntityUpdateRefused},
	}
}

// listEntities pages through ListEntities with pages of size, checking
// every page is full but the last.
func (e *Env) listEntities(size int) []model.Entity {
	e.t.Helper()
	var out []model.Entity
	after := ""
	for range 1000 {
		page, err := e.s.ListEntities(e.ctx, e.ns, after, size)
		if err != nil {
			e.t.Fatalf("ListEntities(%q, %d): %v", after, size, err)
		}
		if len(page) > size {
			e.t.Fatalf("ListEntities(%q, %d) returned %d", after, size, len(page))
		}
		out = append(out, page...)
		if len(page) < size {
			return out
		}
		after = page[len(page)-1].ID
	}
	e.t.Fatal("ListEntities never ended")
	return nil
}

func (e *Env) updateEntity(ent model.Entity) model.AuditEvent {
	e.t.Helper()
	ev := e.event(model.ActionEntityUpdate, ent.ID, "")
	if err := e.s.UpdateEntity(e.ctx, e.ns, ent, ev); err != nil {
		e.t.Fatalf("UpdateEntity(%s): %v", ent.ID, err)
	}
	return ev
}

func testEntityList(t *testing.T, e *Env) {
	ids := []string{"org", "c3", "c1", "c10", "C0", "c2", "0c", "a.b", "a-b", "a"}
	e.createEntity(model.Entity{ID: "org", Name: "Org", Metadata: map[string]string{"plan": "pro"}})
	for _, id := range ids[1:] {
		e.createEntity(model.Entity{ID: id, ParentID: "org", Cascade: id != "c2", Name: "name-" + id})
	}
	// Other items of the namespace (configs, buckets, audit events) are
	// not entities.
	e.putConfig(model.EntityScope("c1", ""), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}})
	e.putConfig(model.ResourceScope("api"), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}})
	e.grant(T0, breq(Key("c1", "api"), checked("a", rate(10, 1, 1000), 1)))
	// Another namespace's entities are not listed.
	other := newNamespace(t)
	if err := e.s.CreateEntity(e.ctx, other, model.Entity{ID: "b-other"}, e.event(model.ActionEntityCreate, "b-other", "")); err != nil {
		t.Fatal(err)
	}

	want := slices.Sorted(slices.Values(ids))
	for _, size := range []int{1, 3, len(ids), store.MaxEntityPage} {
		got := e.listEntities(size)
		if !slices.Equal(entityIDs(got), want) {
			t.Fatalf("pages of %d: %v, want %v", size, entityIDs(got), want)
		}
		for _, g := range got {
			if g.ID != "org" && (g.ParentID != "org" || g.Name != "name-"+g.ID || g.Cascade != (g.ID != "c2")) {
				t.Errorf("listed %+v lost its fields", g)
			}
		}
	}
	// A cursor that is not an id lists what sorts after it.
	page, err := e.s.ListEntities(e.ctx, e.ns, "b", 2)
	if err != nil || !slices.Equal(entityIDs(page), []string{"c1", "c10"}) {
		t.Errorf("ListEntities(after b, 2) = %v, %v; want [c1 c10]", entityIDs(page), err)
	}
	// The listing is a copy.
	got := e.listEntities(store.MaxEntityPage)
	i := slices.IndexFunc(got, func(x model.Entity) bool { return x.ID == "org" })
	got[i].Metadata["plan"] = "mutated"
	if again := e.getEntity("org"); again.Metadata["plan"] != "pro" {
		t.Errorf("mutating a listed entity's metadata changed the store: %v", again.Metadata)
	}
	// A deleted entity is no longer listed.
	e.deleteEntity("c10")
	want = slices.DeleteFunc(want, func(s string) bool { return s == "c10" })
	if got := entityIDs(e.listEntities(4)); !slices.Equal(got, want) {
		t.Errorf("after deleting c10: %v, want %v", got, want)
	}
}

func testEntityListEmpty(t *testing.T, e *Env) {
	page, err := e.s.ListEntities(e.ctx, e.ns, "", 10)
	if err != nil || len(page) != 0 {
		t.Errorf("ListEntities of an empty namespace = %v, %v", entityIDs(page), err)
	}
	e.createEntity(model.Entity{ID: "only"})
	page, err = e.s.ListEntities(e.ctx, e.ns, "only", 10)
	if err != nil || len(page) != 0 {
		t.Errorf("ListEntities after the last = %v, %v", entityIDs(page), err)
	}
}

func testEntityListBadLimit(t *testing.T, e *Env) {
	for _, limit := range []int{-1, 0, store.MaxEntityPage + 1} {
		_, err := e.s.ListEntities(e.ctx, e.ns, "", limit)
		var ve *model.ValidationError
		if !errors.As(err, &ve) || ve.Field != "limit" {
			t.Errorf("ListEntities(limit %d) = %v, want a validation error of limit", limit, err)
		}
	}
}

func testEntityUpdate(t *testing.T, e *Env) {
	created := time.UnixMilli(T0 + 5).UTC()
	e.createEntity(model.Entity{ID: "org"})
	e.createEntity(model.Entity{ID: "key", ParentID: "org", Cascade: true, Name: "old", Metadata: map[string]string{"a": "1"}, CreatedAt: created})
	md := map[string]string{"b": "2"}
	upd := model.Entity{ID: "key", ParentID: "org", Name: "new", Metadata: md, CreatedAt: created.Add(time.Hour)}
	ev := e.updateEntity(upd)
	md["b"] = "mutated"

	want := model.Entity{ID: "key", ParentID: "org", Name: "new", Metadata: map[string]string{"b": "2"}, CreatedAt: created}
	if got := e.getEntity("key"); !sameEntity(got, want) {
		t.Errorf("after update: %+v, want %+v (CreatedAt kept, metadata copied)", got, want)
	}
	if kids := e.children("org"); len(kids) != 1 || !sameEntity(kids[0], want) {
		t.Errorf("ListChildren(org) = %+v, want the updated entity", kids)
	}
	if evs := e.audit("key"); len(evs) != 2 || !sameEvent(evs[1], ev) {
		t.Errorf("audit of key = %+v, want the create then the update", evs)
	}
	// Removing the parent (and so the cascade) and the metadata.
	e.updateEntity(model.Entity{ID: "key"})
	want = model.Entity{ID: "key", CreatedAt: created}
	if got := e.getEntity("key"); !sameEntity(got, want) {
		t.Errorf("after removing the parent: %+v, want %+v", got, want)
	}
	if kids := e.children("org"); len(kids) != 0 {
		t.Errorf("ListChildren(org) after removing the parent = %v", entityIDs(kids))
	}
	if got := entityIDs(e.listEntities(10)); !slices.Equal(got, []string{"key", "org"}) {
		t.Errorf("ListEntities after updates = %v", got)
	}
	// A parent deleted since, left as it is, is not checked.
	e.createEntity(model.Entity{ID: "orphan", ParentID: "key"})
	e.deleteEntity("key")
	e.updateEntity(model.Entity{ID: "orphan", ParentID: "key", Name: "still"})
	if got := e.getEntity("orphan"); got.Name != "still" || got.ParentID != "key" {
		t.Errorf("updating an entity whose parent was deleted: %+v", got)
	}
}

func testEntityUpdateMoves(t *testing.T, e *Env) {
	for _, ent := range []model.Entity{
		{ID: "org-a"}, {ID: "org-b"},
		{ID: "proj", ParentID: "org-a", Cascade: true},
		{ID: "key", ParentID: "proj", Cascade: true},
		{ID: "sib", ParentID: "org-a"},
	} {
		e.createEntity(ent)
	}
	e.putConfig(model.EntityScope("proj", "api"), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 5)}})
	e.grant(T0, breq(Key("proj", "api"), checked("a", rate(10_000, 1_000, 1_000), 1_000)))

	e.updateEntity(model.Entity{ID: "proj", ParentID: "org-b", Cascade: true, Name: "moved"})
	if got := entityIDs(e.children("org-a")); !slices.Equal(got, []string{"sib"}) {
		t.Errorf("ListChildren(org-a) after the move = %v, want [sib]", got)
	}
	if got := entityIDs(e.children("org-b")); !slices.Equal(got, []string{"proj"}) {
		t.Errorf("ListChildren(org-b) after the move = %v, want [proj]", got)
	}
	if got := entityIDs(e.children("proj")); !slices.Equal(got, []string{"key"}) {
		t.Errorf("the moved entity's children = %v, want [key]", got)
	}
	// Its configs and buckets stay.
	if c := e.getConfigs(model.EntityScope("proj", "api"))[0]; c == nil {
		t.Error("the move deleted the entity's config")
	}
	e.WantStored(Key("proj", "api"), "a", bucket.State{Tokens: 9_000})
	// Moving back, to a parent deeper in another branch.
	e.updateEntity(model.Entity{ID: "proj", ParentID: "sib"})
	if got := entityIDs(e.children("sib")); !slices.Equal(got, []string{"proj"}) {
		t.Errorf("ListChildren(sib) = %v, want [proj]", got)
	}
	if got := entityIDs(e.children("org-b")); len(got) != 0 {
		t.Errorf("ListChildren(org-b) = %v, want none", got)
	}
}

func testEntityUpdateRefused(t *testing.T, e *Env) {
	for _, ent := range []model.Entity{
		{ID: "org"},
		{ID: "proj", ParentID: "org", Cascade: true, Name: "p"},
		{ID: "key", ParentID: "proj", Cascade: true},
		{ID: "deep", ParentID: "key"},
	} {
		e.createEntity(ent)
	}
	before := e.listEntities(10)
	cases := []struct {
		name  string
		e     model.Entity
		want  error
		field string
	}{
		{"missing entity", model.Entity{ID: "ghost", Name: "x"}, model.ErrEntityNotFound, ""},
		{"missing parent", model.Entity{ID: "proj", ParentID: "nobody"}, model.ErrEntityNotFound, ""},
		{"its own parent", model.Entity{ID: "proj", ParentID: "proj"}, model.ErrInvalid, "parent_id"},
		{"its child", model.Entity{ID: "proj", ParentID: "key"}, model.ErrInvalid, "parent_id"},
		{"a descendant two down", model.Entity{ID: "org", ParentID: "deep"}, model.ErrInvalid, "parent_id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := len(e.audit(c.e.ID))
			err := e.s.UpdateEntity(e.ctx, e.ns, c.e, e.event(model.ActionEntityUpdate, c.e.ID, ""))
			if !errors.Is(err, c.want) {
				t.Fatalf("UpdateEntity = %v, want %v", err, c.want)
			}
			var ve *model.ValidationError
			if c.field != "" && (!errors.As(err, &ve) || ve.Field != c.field) {
				t.Errorf("UpdateEntity = %v, want a validation error of %s", err, c.field)
			}
			if got := len(e.audit(c.e.ID)); got != n {
				t.Errorf("a refused update appended audit events: %d, want %d", got, n)
			}
		})
	}
	after := e.listEntities(10)
	if !slices.EqualFunc(before, after, sameEntity) {
		t.Errorf("refused updates changed entities: %+v, want %+v", after, before)
	}
	if got := entityIDs(e.children("org")); !slices.Equal(got, []string{"proj"}) {
		t.Errorf("refused updates changed the children of org: %v", got)
	}
}
