package storetest

import (
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/model"
)

// The change generation (store.Changes) moves with every change of the
// control plane. Other cases may share the store and raise it too, so a
// case can only check that it grows, never what it is.
func changeCases() []testCase {
	return []testCase{
		{"EveryChange", testChangesEveryChange},
		{"Namespaces", testChangesNamespaces},
	}
}

// generation reads the generation; an error is fatal.
func (e *Env) generation() uint64 {
	e.t.Helper()
	g, err := e.s.Generation(e.ctx)
	if err != nil {
		e.t.Fatalf("Generation: %v", err)
	}
	return g
}

// wantGrows runs change and checks that the generation grew across it.
func (e *Env) wantGrows(what string, change func()) {
	e.t.Helper()
	before := e.generation()
	change()
	if after := e.generation(); after <= before {
		e.t.Errorf("Generation after %s = %d, want more than %d", what, after, before)
	}
}

func testChangesEveryChange(t *testing.T, e *Env) {
	cfg := model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}}
	e.wantGrows("PutConfig", func() { e.putConfig(model.ResourceScope("api"), cfg) })
	e.wantGrows("DeleteConfig", func() {
		if err := e.s.DeleteConfig(e.ctx, e.ns, model.ResourceScope("api"), e.event(model.ActionConfigDelete, "", "api")); err != nil {
			t.Fatal(err)
		}
	})
	e.wantGrows("CreateEntity", func() { e.createEntity(model.Entity{ID: "org"}) })
	e.wantGrows("UpdateEntity", func() { e.updateEntity(model.Entity{ID: "org", Name: "Org"}) })
	e.wantGrows("DeleteEntity", func() { e.deleteEntity("org") })
	e.wantGrows("CreateKey", func() { e.createKey(e.newKey("ci")) })
	e.wantGrows("DeleteKey", func() { e.deleteKey("ci") })
}

func testChangesNamespaces(t *testing.T, e *Env) {
	n := model.Namespace{Name: e.ns, ID: e.ns, CreatedAt: time.UnixMilli(T0).UTC()}
	e.wantGrows("CreateNamespace", func() {
		if err := e.s.CreateNamespace(e.ctx, n); err != nil {
			t.Fatal(err)
		}
	})
	e.createEntity(model.Entity{ID: "org"})
	e.wantGrows("SetNamespaceDeleted", func() {
		if err := e.s.SetNamespaceDeleted(e.ctx, n.Name, time.UnixMilli(T0+1)); err != nil {
			t.Fatal(err)
		}
	})
	e.wantGrows("SetNamespaceDeleted (recover)", func() {
		if err := e.s.SetNamespaceDeleted(e.ctx, n.Name, time.Time{}); err != nil {
			t.Fatal(err)
		}
	})
	if err := e.s.SetNamespaceDeleted(e.ctx, n.Name, time.UnixMilli(T0+2)); err != nil {
		t.Fatal(err)
	}
	e.wantGrows("PurgeNamespace", func() {
		if err := e.s.PurgeNamespace(e.ctx, n.Name, nil); err != nil {
			t.Fatal(err)
		}
	})
}
