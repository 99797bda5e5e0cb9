package limitertest

import (
	"errors"
	"testing"

	"github.com/tollgate-rl/tollgate"
)

func namespaceCases() []testCase {
	return []testCase{
		{"LimiterIsolation", testNamespaceLimiterIsolation},
		{"LimiterLifecycle", testNamespaceLimiterLifecycle},
		{"AuditRetention", testNamespaceAuditRetention},
	}
}

// Two limiters on one store in different namespaces share nothing.
func testNamespaceLimiterIsolation(t *testing.T, e *env) {
	other := newEnv(t, e.s, e.OtherNamespace())
	l1, l2 := e.limiter(), other.limiter()
	if _, err := e.admin().CreateEntity(e.ctx, tollgate.Entity{ID: "org"}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.admin().CreateEntity(e.ctx, tollgate.Entity{ID: "org"}); err != nil {
		t.Fatalf("the same entity id in another namespace: %v", err)
	}
	if err := e.admin().SetLimits(e.ctx, tollgate.ResourceScope("api"), tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 5)}}); err != nil {
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

// Through an Admin and a limiter: a deleted namespace refuses work until
// recovered, and only a deleted one can be purged.
func testNamespaceLimiterLifecycle(t *testing.T, e *env) {
	reg := e.admin()
	name := "t" + e.ns
	if _, err := reg.RegisterNamespace(e.ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.RegisterNamespace(e.ctx, name); !errors.Is(err, tollgate.ErrNamespaceExists) {
		t.Errorf("registering twice: %v, want ErrNamespaceExists", err)
	}
	lim, err := tollgate.New(e.s, tollgate.WithNamespace(name), tollgate.WithClock(e.clk), tollgate.WithChangeWatch(e.watch))
	if err != nil {
		t.Fatal(err)
	}
	opt := tollgate.WithLimits(tollgate.PerMinute("rpm", 5))
	e.commit(e.acquire(lim, "k", "api", tollgate.Consume{"rpm": 2}, opt))
	if err := reg.PurgeNamespace(e.ctx, name, nil); !errors.Is(err, tollgate.ErrInvalid) {
		t.Errorf("purging a live namespace: %v, want ErrInvalid", err)
	}
	if err := reg.DeleteNamespace(e.ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := lim.Acquire(e.ctx, "k", "api", tollgate.Consume{"rpm": 1}, opt); !errors.Is(err, tollgate.ErrNamespaceDeleted) {
		t.Errorf("acquire in a deleted namespace: %v, want ErrNamespaceDeleted", err)
	}
	if err := reg.RecoverNamespace(e.ctx, name); err != nil {
		t.Fatal(err)
	}
	// Recovered with its data: 3 of 5 left.
	e.wantAvailable(lim, "k", "api", "rpm", 3, opt)
	if err := reg.DeleteNamespace(e.ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := reg.PurgeNamespace(e.ctx, name, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := lim.Acquire(e.ctx, "k", "api", tollgate.Consume{"rpm": 1}, opt); !errors.Is(err, tollgate.ErrNamespaceNotFound) {
		t.Errorf("acquire in a purged namespace: %v, want ErrNamespaceNotFound", err)
	}
	// Re-registering the name gives a fresh, empty namespace.
	if _, err := reg.RegisterNamespace(e.ctx, name); err != nil {
		t.Fatal(err)
	}
	e.wantAvailable(lim, "k", "api", "rpm", 5, opt)
}
