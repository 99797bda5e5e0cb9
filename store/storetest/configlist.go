package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Listing configs (issue 15, item 6: limits export).

func configListCases() []testCase {
	return []testCase{
		{"ListConfigs", testConfigList},
		{"ListConfigsEmpty", testConfigListEmpty},
		{"ListConfigsBadLimit", testConfigListBadLimit},
	}
}

// listConfigs pages through ListConfigs with pages of size.
func (e *Env) listConfigs(size int) []model.ScopedConfig {
	e.t.Helper()
	var out []model.ScopedConfig
	var after *model.Scope
	for range 1000 {
		page, err := e.s.ListConfigs(e.ctx, e.ns, after, size)
		if err != nil {
			e.t.Fatalf("ListConfigs(%v, %d): %v", after, size, err)
		}
		if len(page) > size {
			e.t.Fatalf("ListConfigs(%v, %d) returned %d", after, size, len(page))
		}
		out = append(out, page...)
		if len(page) < size {
			return out
		}
		last := page[len(page)-1].Scope
		after = &last
	}
	e.t.Fatal("ListConfigs never ended")
	return nil
}

func scopesOf(cs []model.ScopedConfig) []model.Scope {
	out := make([]model.Scope, len(cs))
	for i, c := range cs {
		out[i] = c.Scope
	}
	return out
}

func testConfigList(t *testing.T, e *Env) {
	for _, id := range []string{"org-1", "org-10", "a", "b"} {
		e.createEntity(model.Entity{ID: id})
	}
	rpm := func(n int64) model.Config { return model.Config{Limits: []model.Limit{model.PerMinute("rpm", n)}} }
	stored := map[model.Scope]model.Config{
		model.SystemScope():                           {Limits: []model.Limit{model.PerMinute("rpm", 1)}, OnUnavailable: model.Allow},
		model.ResourceScope("openai/gpt-4o"):          {Limits: []model.Limit{model.PerMinute("tpm", 2).WithBurst(3), model.ConcurrencyLimit("inflight", 2)}},
		model.ResourceScope("openai"):                 rpm(3),
		model.ResourceScope("api"):                    rpm(4),
		model.EntityScope("org-1", ""):                rpm(5),
		model.EntityScope("org-1", "api"):             rpm(6),
		model.EntityScope("org-1", "openai/x"):        {Limits: []model.Limit{model.ReservedLimit("clusters", 2)}},
		model.EntityScope("org-10", "api"):            rpm(7),
		model.EntityScope("a", "Zeta"):                rpm(8),
		model.EntityScope("a", model.DefaultResource): rpm(9),
	}
	for sc, c := range stored {
		e.putConfig(sc, c)
	}
	e.putConfig(model.EntityScope("b", "api"), rpm(10))
	if err := e.s.DeleteConfig(e.ctx, e.ns, model.EntityScope("b", "api"), e.event(model.ActionConfigDelete, "b", "api")); err != nil {
		t.Fatal(err)
	}
	// Buckets, audit events and entities without configs are not listed.
	e.grant(T0, breq(Key("org-1", "api"), checked("a", rate(10, 1, 1000), 1)))

	want := slices.SortedFunc(func(yield func(model.Scope) bool) {
		for sc := range stored {
			if !yield(sc) {
				return
			}
		}
	}, model.CompareScopes)
	if want[0] != model.SystemScope() {
		t.Fatalf("the system scope does not sort first: %v", want)
	}
	for _, size := range []int{1, 2, 3, len(stored), store.MaxConfigPage} {
		got := e.listConfigs(size)
		if !slices.Equal(scopesOf(got), want) {
			t.Fatalf("pages of %d: %v, want %v", size, scopesOf(got), want)
		}
		for _, g := range got {
			if !sameConfig(g.Config, stored[g.Scope]) {
				t.Errorf("pages of %d: %v = %+v, want %+v", size, g.Scope, g.Config, stored[g.Scope])
			}
		}
	}
	// A cursor in the middle of an entity's configs.
	after := model.EntityScope("org-1", "api")
	page, err := e.s.ListConfigs(e.ctx, e.ns, &after, 2)
	wantPage := []model.Scope{model.EntityScope("org-1", "openai/x"), model.EntityScope("org-10", "api")}
	if err != nil || !slices.Equal(scopesOf(page), wantPage) {
		t.Errorf("ListConfigs(after %v, 2) = %v, %v; want %v", after, scopesOf(page), err, wantPage)
	}
	// Deleting an entity removes its configs from the listing.
	e.deleteEntity("org-1")
	got := scopesOf(e.listConfigs(4))
	want = slices.DeleteFunc(want, func(s model.Scope) bool { return s.Entity == "org-1" })
	if !slices.Equal(got, want) {
		t.Errorf("after deleting org-1: %v, want %v", got, want)
	}
}

func testConfigListEmpty(t *testing.T, e *Env) {
	page, err := e.s.ListConfigs(e.ctx, e.ns, nil, 10)
	if err != nil || len(page) != 0 {
		t.Errorf("ListConfigs of an empty namespace = %v, %v", page, err)
	}
	e.putConfig(model.SystemScope(), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}})
	sys := model.SystemScope()
	page, err = e.s.ListConfigs(e.ctx, e.ns, &sys, 10)
	if err != nil || len(page) != 0 {
		t.Errorf("ListConfigs after the system scope = %v, %v; want none", page, err)
	}
	page, err = e.s.ListConfigs(e.ctx, e.ns, nil, 10)
	if err != nil || len(page) != 1 || page[0].Scope != sys {
		t.Errorf("ListConfigs = %v, %v; want the system config", page, err)
	}
}

func testConfigListBadLimit(t *testing.T, e *Env) {
	for _, limit := range []int{-1, 0, store.MaxConfigPage + 1} {
		_, err := e.s.ListConfigs(e.ctx, e.ns, nil, limit)
		var ve *model.ValidationError
		if !errors.As(err, &ve) || ve.Field != "limit" {
			t.Errorf("ListConfigs(limit %d) = %v, want a validation error of limit", limit, err)
		}
	}
}
