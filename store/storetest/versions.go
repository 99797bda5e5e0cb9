package storetest

import (
	"errors"
	"sync"
	"testing"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Versions of configs and entities (optimistic locking, store.Precondition):
// every change writes the next version, a change on a precondition that
// does not hold writes nothing (no audit event either), and of concurrent
// changes on the same precondition exactly one wins.

func configVersionCases() []testCase {
	return []testCase{
		{"Versions", testConfigVersions},
		{"StaleVersion", testConfigStaleVersion},
		{"ConcurrentVersions", testConfigConcurrentVersions},
	}
}

func entityVersionCases() []testCase {
	return []testCase{
		{"Versions", testEntityVersions},
		{"StaleVersion", testEntityStaleVersion},
		{"ConcurrentVersions", testEntityConcurrentVersions},
	}
}

// configVersion reads the version of the config at sc (0: none).
func (e *Env) configVersion(sc model.Scope) int64 {
	e.t.Helper()
	if c := e.getConfigs(sc)[0]; c != nil {
		return c.Version
	}
	return 0
}

// putConfigIf is PutConfig on a precondition, returning its error.
func (e *Env) putConfigIf(sc model.Scope, cfg model.Config, pre ...store.Precondition) error {
	return e.s.PutConfig(e.ctx, e.ns, sc, cfg, e.event(model.ActionConfigSet, sc.Entity, sc.Resource), pre...)
}

// events returns n events (made up front: Env.event is not safe for
// concurrent use).
func (e *Env) events(n int, action, entity, resource string) []model.AuditEvent {
	evs := make([]model.AuditEvent, n)
	for i := range evs {
		evs[i] = e.event(action, entity, resource)
	}
	return evs
}

// wantPrecondition fails the test unless err matches
// model.ErrPreconditionFailed (and so model.ErrDomain).
func wantPrecondition(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, model.ErrPreconditionFailed) || !errors.Is(err, model.ErrDomain) {
		t.Errorf("%s = %v, want ErrPreconditionFailed", what, err)
	}
}

func testConfigVersions(t *testing.T, e *Env) {
	e.createEntity(model.Entity{ID: "org-1"})
	cfg := model.Config{Limits: []model.Limit{model.PerMinute("rpm", 10)}, Version: 42} // a put ignores Version
	for _, sc := range []model.Scope{model.SystemScope(), model.ResourceScope("api"), model.EntityScope("org-1", ""), model.EntityScope("org-1", "api")} {
		for want := int64(1); want <= 3; want++ {
			e.putConfig(sc, cfg)
			if got := e.configVersion(sc); got != want {
				t.Fatalf("%+v after %d puts: version %d, want %d", sc, want, got, want)
			}
		}
		// On the version read, and listed with it.
		if err := e.putConfigIf(sc, cfg, store.IfVersion(3)); err != nil {
			t.Fatalf("PutConfig(%+v) on version 3: %v", sc, err)
		}
		list, err := e.s.ListConfigs(e.ctx, e.ns, nil, store.MaxConfigPage)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list {
			if c.Scope == sc && c.Config.Version != 4 {
				t.Errorf("ListConfigs: %+v at version %d, want 4", sc, c.Config.Version)
			}
		}
		// Deleted, then stored again: it starts again at 1.
		ev := e.event(model.ActionConfigDelete, sc.Entity, sc.Resource)
		if err := e.s.DeleteConfig(e.ctx, e.ns, sc, ev, store.IfVersion(4)); err != nil {
			t.Fatalf("DeleteConfig(%+v) on version 4: %v", sc, err)
		}
		if err := e.putConfigIf(sc, cfg, store.IfVersion(0)); err != nil {
			t.Fatalf("PutConfig(%+v) where none is, on none: %v", sc, err)
		}
		if got := e.configVersion(sc); got != 1 {
			t.Errorf("%+v stored again: version %d, want 1", sc, got)
		}
	}
}

func testConfigStaleVersion(t *testing.T, e *Env) {
	sc := model.ResourceScope("api")
	old := model.Config{Limits: []model.Limit{model.PerMinute("rpm", 10)}}
	e.putConfig(sc, old)
	e.putConfig(sc, old) // version 2
	events := len(e.audit(""))
	stale := model.Config{Limits: []model.Limit{model.PerMinute("rpm", 99)}}
	wantPrecondition(t, "PutConfig on version 1 of a config at 2", e.putConfigIf(sc, stale, store.IfVersion(1)))
	wantPrecondition(t, "PutConfig on none of a config at 2", e.putConfigIf(sc, stale, store.IfVersion(0)))
	wantPrecondition(t, "DeleteConfig on version 3 of a config at 2",
		e.s.DeleteConfig(e.ctx, e.ns, sc, e.event(model.ActionConfigDelete, "", sc.Resource), store.IfVersion(3)))
	if got := e.getConfigs(sc)[0]; got == nil || !sameConfig(*got, old) || got.Version != 2 {
		t.Errorf("after refused changes: %+v, want %+v at version 2", got, old)
	}
	// A put on a version where none is stored creates nothing; a delete
	// of none is not found, whatever it expects.
	other := model.ResourceScope("other")
	wantPrecondition(t, "PutConfig on version 1 where none is", e.putConfigIf(other, stale, store.IfVersion(1)))
	if got := e.getConfigs(other)[0]; got != nil {
		t.Errorf("a refused put stored %+v", got)
	}
	if err := e.s.DeleteConfig(e.ctx, e.ns, other, e.event(model.ActionConfigDelete, "", other.Resource), store.IfVersion(1)); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("DeleteConfig of none on version 1 = %v, want ErrNotFound", err)
	}
	if got := len(e.audit("")); got != events {
		t.Errorf("refused changes appended %d audit events", got-events)
	}
}

// race runs f(i) for i in 0..n-1 at once and counts those that return nil;
// every other must fail with ErrPreconditionFailed.
func race(t *testing.T, n int, f func(i int) error) int {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = f(i)
		}()
	}
	close(start)
	wg.Wait()
	wins := 0
	for i, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, model.ErrPreconditionFailed):
			t.Errorf("writer %d: %v, want nil or ErrPreconditionFailed", i, err)
		}
	}
	return wins
}

const racers = 6

func testConfigConcurrentVersions(t *testing.T, e *Env) {
	sc := model.ResourceScope("api")
	e.putConfig(sc, model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}})
	events := len(e.audit(""))
	evs := e.events(racers, model.ActionConfigSet, "", sc.Resource)
	wins := race(t, racers, func(i int) error {
		cfg := model.Config{Limits: []model.Limit{model.PerMinute("rpm", int64(100+i))}}
		return e.s.PutConfig(e.ctx, e.ns, sc, cfg, evs[i], store.IfVersion(1))
	})
	if wins != 1 {
		t.Fatalf("%d of %d puts on version 1 won, want 1", wins, racers)
	}
	if got := len(e.audit("")) - events; got != 1 {
		t.Errorf("%d audit events for one win", got)
	}
	if v := e.configVersion(sc); v != 2 {
		t.Errorf("version %d after one win, want 2", v)
	}
	// Unconditional puts all win, each at a version of its own.
	evs = e.events(racers, model.ActionConfigSet, "", sc.Resource)
	if wins := race(t, racers, func(i int) error { return e.s.PutConfig(e.ctx, e.ns, sc, model.Config{}, evs[i]) }); wins != racers {
		t.Errorf("%d of %d unconditional puts won", wins, racers)
	}
	if v := e.configVersion(sc); v != 2+racers {
		t.Errorf("version %d after %d more puts, want %d", v, racers, 2+racers)
	}
}

func testEntityVersions(t *testing.T, e *Env) {
	e.createEntity(model.Entity{ID: "org-1", Version: 42}) // a write ignores Version
	e.createEntity(model.Entity{ID: "key-1", ParentID: "org-1"})
	if v := e.getEntity("org-1").Version; v != 1 {
		t.Fatalf("created: version %d, want 1", v)
	}
	e.updateEntity(model.Entity{ID: "key-1", ParentID: "org-1", Name: "two", Version: 9})
	ev := e.event(model.ActionEntityUpdate, "key-1", "")
	if err := e.s.UpdateEntity(e.ctx, e.ns, model.Entity{ID: "key-1", ParentID: "org-1", Name: "three"}, ev, store.IfVersion(2)); err != nil {
		t.Fatalf("UpdateEntity on version 2: %v", err)
	}
	if got := e.getEntity("key-1"); got.Version != 3 || got.Name != "three" {
		t.Errorf("after two updates: %+v, want version 3", got)
	}
	if kids := e.children("org-1"); len(kids) != 1 || kids[0].Version != 3 {
		t.Errorf("ListChildren: %+v, want key-1 at version 3", kids)
	}
	list, err := e.s.ListEntities(e.ctx, e.ns, "", store.MaxEntityPage)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range list {
		if want := map[string]int64{"org-1": 1, "key-1": 3}[ent.ID]; ent.Version != want {
			t.Errorf("ListEntities: %s at version %d, want %d", ent.ID, ent.Version, want)
		}
	}
	if err := e.s.DeleteEntity(e.ctx, e.ns, "key-1", e.event(model.ActionEntityDelete, "key-1", ""), store.IfVersion(3)); err != nil {
		t.Fatalf("DeleteEntity on version 3: %v", err)
	}
}

func testEntityStaleVersion(t *testing.T, e *Env) {
	e.createEntity(model.Entity{ID: "org-1", Name: "one"})
	e.updateEntity(model.Entity{ID: "org-1", Name: "two"}) // version 2
	e.putConfig(model.EntityScope("org-1", ""), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 5)}})
	events := len(e.audit("org-1"))
	stale := e.event(model.ActionEntityUpdate, "org-1", "")
	wantPrecondition(t, "UpdateEntity on version 1 of an entity at 2",
		e.s.UpdateEntity(e.ctx, e.ns, model.Entity{ID: "org-1", Name: "stale"}, stale, store.IfVersion(1)))
	wantPrecondition(t, "DeleteEntity on version 3 of an entity at 2",
		e.s.DeleteEntity(e.ctx, e.ns, "org-1", e.event(model.ActionEntityDelete, "org-1", ""), store.IfVersion(3)))
	if got := e.getEntity("org-1"); got.Name != "two" || got.Version != 2 {
		t.Errorf("after refused changes: %+v, want name two at version 2", got)
	}
	if got := e.getConfigs(model.EntityScope("org-1", ""))[0]; got == nil {
		t.Error("a refused DeleteEntity deleted the entity's config")
	}
	if got := len(e.audit("org-1")); got != events {
		t.Errorf("refused changes appended %d audit events", got-events)
	}
	// A missing entity is not found, whatever the precondition.
	if err := e.s.UpdateEntity(e.ctx, e.ns, model.Entity{ID: "nope"}, e.event(model.ActionEntityUpdate, "nope", ""), store.IfVersion(1)); !errors.Is(err, model.ErrEntityNotFound) {
		t.Errorf("UpdateEntity of a missing entity on version 1 = %v, want ErrEntityNotFound", err)
	}
	if err := e.s.DeleteEntity(e.ctx, e.ns, "nope", e.event(model.ActionEntityDelete, "nope", ""), store.IfVersion(1)); !errors.Is(err, model.ErrEntityNotFound) {
		t.Errorf("DeleteEntity of a missing entity on version 1 = %v, want ErrEntityNotFound", err)
	}
}

func testEntityConcurrentVersions(t *testing.T, e *Env) {
	e.createEntity(model.Entity{ID: "org-1"})
	events := len(e.audit("org-1"))
	evs := e.events(racers, model.ActionEntityUpdate, "org-1", "")
	wins := race(t, racers, func(i int) error {
		return e.s.UpdateEntity(e.ctx, e.ns, model.Entity{ID: "org-1", Name: "writer-" + itoa(int64(i))}, evs[i], store.IfVersion(1))
	})
	if wins != 1 {
		t.Fatalf("%d of %d updates on version 1 won, want 1", wins, racers)
	}
	if got := len(e.audit("org-1")) - events; got != 1 {
		t.Errorf("%d audit events for one win", got)
	}
	if got := e.getEntity("org-1"); got.Version != 2 {
		t.Errorf("after one win: %+v, want version 2", got)
	}
	evs = e.events(racers, model.ActionEntityUpdate, "org-1", "")
	if wins := race(t, racers, func(i int) error {
		return e.s.UpdateEntity(e.ctx, e.ns, model.Entity{ID: "org-1"}, evs[i])
	}); wins != racers {
		t.Errorf("%d of %d unconditional updates won", wins, racers)
	}
	if v := e.getEntity("org-1").Version; v != 2+racers {
		t.Errorf("version %d after %d more updates, want %d", v, racers, 2+racers)
	}
}
