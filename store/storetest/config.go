package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/model"
)

func configCases() []testCase {
	cases := []testCase{
		{"GetPutReplace", testConfigGetPutReplace},
		{"Delete", testConfigDelete},
		{"EntityScopeNeedsEntity", testConfigEntityScopeNeedsEntity},
		{"Copies", testConfigCopies},
	}
	cases = append(cases, configVersionCases()...)
	return append(cases, configListCases()...)
}

func testConfigGetPutReplace(t *testing.T, e *Env) {
	sys, res := model.SystemScope(), model.ResourceScope("openai/gpt-4o")
	ent, entDef := model.EntityScope("org-1", "openai/gpt-4o"), model.EntityScope("org-1", "")
	other := model.EntityScope("org-1", "other")

	// Nothing stored yet, not even the namespace.
	for i, c := range e.getConfigs(sys, res, ent, entDef) {
		if c != nil {
			t.Errorf("GetConfigs[%d] in an empty namespace = %+v, want nil", i, c)
		}
	}
	if cfgs := e.getConfigs(); len(cfgs) != 0 {
		t.Errorf("GetConfigs() = %v, want empty", cfgs)
	}

	e.createEntity(model.Entity{ID: "org-1"})
	want := map[model.Scope]model.Config{
		sys: {Limits: []model.Limit{model.PerMinute("rpm", 10)}, OnUnavailable: model.Allow},
		res: {Limits: []model.Limit{model.PerMinute("rpm", 20), model.PerMinute("tpm", 20_000).WithBurst(30_000)}, Shadow: []string{"tpm"}, AlertAt: []float64{0.8, 1}},
		ent: {Limits: []model.Limit{model.ConcurrencyLimit("inflight", 3), model.PerSecond("rps", 40), model.ReservedLimit("clusters", 2)},
			Shadow: []string{"rps", "inflight"}, AlertAt: []float64{0.125, 0.5, 0.9, 0.999}},
		entDef: {Limits: []model.Limit{model.PerDay("rpd", 50), model.PerHour("rph", 5), model.RateLimit("odd", 7, 1500*time.Millisecond)}},
	}
	for sc, cfg := range want {
		e.putConfig(sc, cfg)
	}
	scopes := []model.Scope{other, ent, sys, model.ResourceScope("nope"), entDef, res, model.EntityScope("org-2", "")}
	got := e.getConfigs(scopes...)
	for i, sc := range scopes {
		w, ok := want[sc]
		switch {
		case !ok && got[i] != nil:
			t.Errorf("GetConfigs %+v = %+v, want nil", sc, got[i])
		case ok && got[i] == nil:
			t.Errorf("GetConfigs %+v = nil, want %+v", sc, w)
		case ok && !sameConfig(*got[i], w):
			t.Errorf("GetConfigs %+v = %+v, want %+v", sc, *got[i], w)
		}
	}

	// Put replaces (it does not merge), at every level.
	repl := map[model.Scope]model.Config{
		sys:    {OnUnavailable: model.Block},
		res:    {Limits: []model.Limit{model.PerSecond("rps", 2)}},
		ent:    {Limits: []model.Limit{model.PerMinute("tpm", 1)}},
		entDef: {Limits: nil},
	}
	for sc, cfg := range repl {
		e.putConfig(sc, cfg)
	}
	got = e.getConfigs(sys, res, ent, entDef)
	for i, sc := range []model.Scope{sys, res, ent, entDef} {
		if got[i] == nil {
			t.Errorf("GetConfigs %+v = nil after replace", sc)
		} else if !sameConfig(*got[i], repl[sc]) {
			t.Errorf("GetConfigs %+v = %+v after replace, want %+v", sc, *got[i], repl[sc])
		}
	}
}

func testConfigDelete(t *testing.T, e *Env) {
	res := model.ResourceScope("api")
	ent := model.EntityScope("e1", "api")
	e.createEntity(model.Entity{ID: "e1"})
	e.putConfig(res, model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}})
	e.putConfig(ent, model.Config{Limits: []model.Limit{model.PerMinute("rpm", 2)}})
	sysEvents, entEvents := len(e.audit("")), len(e.audit("e1"))

	if err := e.s.DeleteConfig(e.ctx, e.ns, res, e.event(model.ActionConfigDelete, "", "api")); err != nil {
		t.Fatalf("DeleteConfig(resource): %v", err)
	}
	got := e.getConfigs(res, ent)
	if got[0] != nil {
		t.Errorf("resource config after delete = %+v, want nil", got[0])
	}
	if got[1] == nil || got[1].Limits[0].Capacity != 2 {
		t.Errorf("deleting the resource config changed the entity config: %+v", got[1])
	}

	for _, sc := range []model.Scope{res, model.SystemScope(), model.EntityScope("e1", ""), model.EntityScope("e1", "other"), model.EntityScope("ghost", "api")} {
		err := e.s.DeleteConfig(e.ctx, e.ns, sc, e.event(model.ActionConfigDelete, sc.Entity, sc.Resource))
		if !errors.Is(err, model.ErrNotFound) {
			t.Errorf("DeleteConfig(%+v) of a missing config = %v, want ErrNotFound", sc, err)
		}
	}
	// Failed deletes appended nothing; the successful one appended one event.
	if n := len(e.audit("")); n != sysEvents+1 {
		t.Errorf("system audit has %d events, want %d", n, sysEvents+1)
	}
	if n := len(e.audit("e1")); n != entEvents {
		t.Errorf("entity audit has %d events, want %d", n, entEvents)
	}
	if n := len(e.audit("ghost")); n != 0 {
		t.Errorf("audit of ghost has %d events, want 0", n)
	}

	// Put again after delete works.
	e.putConfig(res, model.Config{Limits: []model.Limit{model.PerMinute("rpm", 3)}})
	if got := e.getConfigs(res)[0]; got == nil || got.Limits[0].Capacity != 3 {
		t.Errorf("resource config after re-put = %+v", got)
	}
}

func testConfigEntityScopeNeedsEntity(t *testing.T, e *Env) {
	for _, sc := range []model.Scope{model.EntityScope("ghost", "api"), model.EntityScope("ghost", "")} {
		err := e.s.PutConfig(e.ctx, e.ns, sc, model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}},
			e.event(model.ActionConfigSet, sc.Entity, sc.Resource))
		if !errors.Is(err, model.ErrEntityNotFound) {
			t.Errorf("PutConfig(%+v) for a missing entity = %v, want ErrEntityNotFound", sc, err)
		}
	}
	for i, c := range e.getConfigs(model.EntityScope("ghost", "api"), model.EntityScope("ghost", "")) {
		if c != nil {
			t.Errorf("failed PutConfig stored config %d: %+v", i, c)
		}
	}
	if evs := e.audit("ghost"); len(evs) != 0 {
		t.Errorf("failed PutConfig appended audit events: %+v", evs)
	}
	// System and resource scopes need no entity.
	e.putConfig(model.ResourceScope("api"), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}})
	e.putConfig(model.SystemScope(), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}})
}

func testConfigCopies(t *testing.T, e *Env) {
	sc := model.ResourceScope("api")
	in := model.Config{Limits: []model.Limit{model.PerMinute("rpm", 100), model.PerMinute("tpm", 1000)}, Shadow: []string{"tpm"}, AlertAt: []float64{0.8}}
	e.putConfig(sc, in)
	// Mutating the config passed to PutConfig does not change the stored one.
	in.Limits[0].Capacity = 1
	in.Limits[1].Name = "changed"
	in.Shadow[0] = "rpm"
	in.AlertAt[0] = 0.5

	want := model.Config{Limits: []model.Limit{model.PerMinute("rpm", 100), model.PerMinute("tpm", 1000)}, Shadow: []string{"tpm"}, AlertAt: []float64{0.8}}
	got := e.getConfigs(sc)[0]
	if got == nil || !sameConfig(*got, want) {
		t.Fatalf("stored config = %+v, want %+v", got, want)
	}
	// Neither does mutating the config GetConfigs returned.
	got.Limits[0].Capacity = 7
	got.Limits[1] = model.PerSecond("x", 1)
	got.Limits = append(got.Limits, model.PerSecond("y", 1))
	got.Shadow[0] = "rpm"
	got.AlertAt[0] = 0.25
	got.OnUnavailable = model.Allow
	if again := e.getConfigs(sc)[0]; again == nil || !sameConfig(*again, want) {
		t.Fatalf("stored config after mutating a returned copy = %+v, want %+v", again, want)
	}
}
