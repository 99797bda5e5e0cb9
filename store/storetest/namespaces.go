package storetest

import (
	"errors"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
)

func namespaceCases() []testCase {
	return []testCase{
		{"Isolation", testNamespaceIsolation},
		{"LimiterIsolation", testNamespaceLimiterIsolation},
	}
}

// populate writes the same entities, configs, buckets and audit events in
// the env's namespace.
func (e *env) populate() {
	e.createEntity(model.Entity{ID: "org", Metadata: map[string]string{"ns": e.ns}})
	e.createEntity(model.Entity{ID: "key", ParentID: "org", Cascade: true})
	e.putConfig(model.SystemScope(), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}, OnUnavailable: model.Allow})
	e.putConfig(model.ResourceScope("api"), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 2)}})
	e.putConfig(model.EntityScope("org", ""), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 3)}})
	e.putConfig(model.EntityScope("key", "api"), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 4)}})
	e.grant(T0, breq(key("key", "api"), checked("a", rate(10_000, 1, 1), 1_000)), breq(key("org", "api"), checked("a", rate(10_000, 1, 1), 1_000)))
}

func testNamespaceIsolation(t *testing.T, e1 *env) {
	e2 := &env{t: t, ctx: e1.ctx, s: e1.s, ns: newNamespace(t), clk: e1.clk, eventSeq: 1000}
	e1.populate()

	// Nothing of e1 is visible in e2.
	for _, id := range []string{"org", "key"} {
		if _, err := e2.s.GetEntity(e2.ctx, e2.ns, id); !errors.Is(err, model.ErrEntityNotFound) {
			t.Errorf("ns2 GetEntity(%s) = %v, want ErrEntityNotFound", id, err)
		}
	}
	if kids := e2.children("org"); len(kids) != 0 {
		t.Errorf("ns2 ListChildren(org) = %v", entityIDs(kids))
	}
	for i, c := range e2.getConfigs(model.SystemScope(), model.ResourceScope("api"), model.EntityScope("org", ""), model.EntityScope("key", "api")) {
		if c != nil {
			t.Errorf("ns2 config %d = %+v, want nil", i, c)
		}
	}
	for i, r := range e2.read(key("key", "api"), key("org", "api")) {
		if r != nil {
			t.Errorf("ns2 bucket %d = %+v, want nil", i, r)
		}
	}
	for _, id := range []string{"", "org", "key"} {
		if evs := e2.audit(id); len(evs) != 0 {
			t.Errorf("ns2 ListAudit(%q) = %v", id, eventIDs(evs))
		}
	}
	if err := e2.s.DeleteConfig(e2.ctx, e2.ns, model.ResourceScope("api"), e2.event(model.ActionConfigDelete, "", "api")); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("ns2 DeleteConfig of ns1's config = %v, want ErrNotFound", err)
	}
	if err := e2.s.DeleteEntity(e2.ctx, e2.ns, "org", e2.event(model.ActionEntityDelete, "org", "")); !errors.Is(err, model.ErrEntityNotFound) {
		t.Errorf("ns2 DeleteEntity of ns1's entity = %v, want ErrEntityNotFound", err)
	}
	if err := e2.s.PutConfig(e2.ctx, e2.ns, model.EntityScope("org", ""), model.Config{}, e2.event(model.ActionConfigSet, "org", "")); !errors.Is(err, model.ErrEntityNotFound) {
		t.Errorf("ns2 PutConfig for ns1's entity = %v, want ErrEntityNotFound", err)
	}
	// Deltas in ns2 do not reach ns1's buckets.
	e2.deltas(delta(key("key", "api"), "a", 5_000))

	// The same ids can be used in e2 independently, and a delete there does
	// not touch e1.
	e2.populate()
	e2.grant(T0, breq(key("key", "api"), checked("a", rate(10_000, 1, 1), 5_000)))
	e2.deleteEntity("key")
	e2.deleteEntity("org")

	e1.wantStored(key("key", "api"), "a", bucket.State{Tokens: 9_000})
	e1.wantStored(key("org", "api"), "a", bucket.State{Tokens: 9_000})
	if got := e1.getEntity("org"); got.Metadata["ns"] != e1.ns {
		t.Errorf("ns1 org = %+v", got)
	}
	if kids := e1.children("org"); len(kids) != 1 || kids[0].ID != "key" {
		t.Errorf("ns1 children = %v", entityIDs(kids))
	}
	for i, c := range e1.getConfigs(model.SystemScope(), model.ResourceScope("api"), model.EntityScope("org", ""), model.EntityScope("key", "api")) {
		if c == nil || c.Limits[0].Capacity != int64(i+1) {
			t.Errorf("ns1 config %d = %+v", i, c)
		}
	}
	if n := len(e1.audit("org")); n != 2 {
		t.Errorf("ns1 audit of org has %d events, want 2", n)
	}
	if n := len(e1.audit("")); n != 2 {
		t.Errorf("ns1 system audit has %d events, want 2", n)
	}
	if n := len(e2.audit("org")); n != 3 {
		t.Errorf("ns2 audit of org has %d events, want 3", n)
	}
}

// Two limiters on one store in different namespaces share nothing.
func testNamespaceLimiterIsolation(t *testing.T, e *env) {
	other := &env{t: t, ctx: e.ctx, s: e.s, ns: newNamespace(t), clk: e.clk}
	l1, l2 := e.limiter(), other.limiter()
	if _, err := l1.CreateEntity(e.ctx, tollgate.Entity{ID: "org"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l2.CreateEntity(e.ctx, tollgate.Entity{ID: "org"}); err != nil {
		t.Fatalf("the same entity id in another namespace: %v", err)
	}
	if err := l1.SetConfig(e.ctx, tollgate.ResourceScope("api"), tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 5)}}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		e.commit(e.acquire(l1, "org", "api", tollgate.Consume{"rpm": 1}))
	}
	e.denied(l1, "org", "api", tollgate.Consume{"rpm": 1})
	// l2 has no limits at all.
	if _, err := l2.Acquire(e.ctx, "org", "api", tollgate.Consume{"rpm": 1}); !errors.Is(err, tollgate.ErrInvalid) {
		t.Errorf("Acquire in a namespace without limits = %v, want ErrInvalid", err)
	}
	// With the same explicit limits, l2's bucket is full.
	opt := tollgate.WithLimits(tollgate.PerMinute("rpm", 5))
	other.wantAvailable(l2, "org", "api", "rpm", 5, opt)
	other.commit(other.acquire(l2, "org", "api", tollgate.Consume{"rpm": 5}, opt))
	e.wantAvailable(l1, "org", "api", "rpm", 0)
}
