package limitertest

import (
	"context"
	"errors"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/storetest"
)

func setConfig(t *testing.T, adm *tollgate.Admin, sc tollgate.Scope, limits ...tollgate.Limit) {
	t.Helper()
	if err := adm.SetLimits(t.Context(), sc, tollgate.Config{Limits: limits}); err != nil {
		t.Fatalf("SetLimits(%+v): %v", sc, err)
	}
}

func deleteConfig(t *testing.T, adm *tollgate.Admin, sc tollgate.Scope) {
	t.Helper()
	if err := adm.DeleteLimits(t.Context(), sc); err != nil {
		t.Fatalf("DeleteLimits(%+v): %v", sc, err)
	}
}

// capacityOf returns the capacity of limit name in effect for entity and
// resource, as Available reports it.
func (e *env) capacityOf(lim *tollgate.Limiter, entity, resource, name string) int64 {
	e.t.Helper()
	st, err := lim.Available(e.ctx, entity, resource)
	if err != nil {
		e.t.Fatalf("Available(%s/%s): %v", entity, resource, err)
	}
	return status(e.t, st, entity, name).Capacity
}

func testLimiterResolution(t *testing.T, e *env) {
	lim := e.limiter(tollgate.WithCacheTTL(0))
	if _, err := e.admin().CreateEntity(e.ctx, tollgate.Entity{ID: "e1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := lim.Acquire(e.ctx, "e1", "api", tollgate.Consume{"rpm": 1}); !errors.Is(err, tollgate.ErrInvalid) {
		t.Fatalf("Acquire with nothing configured = %v, want ErrInvalid", err)
	}
	setConfig(t, e.admin(), tollgate.SystemScope(), tollgate.PerMinute("rpm", 10))
	setConfig(t, e.admin(), tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 20))
	setConfig(t, e.admin(), tollgate.EntityScope("e1", ""), tollgate.PerMinute("rpm", 30))
	setConfig(t, e.admin(), tollgate.EntityScope("e1", "api"), tollgate.PerMinute("rpm", 40))
	// An empty config is skipped by resolution.
	if _, err := e.admin().CreateEntity(e.ctx, tollgate.Entity{ID: "e2"}); err != nil {
		t.Fatal(err)
	}
	if err := e.admin().SetLimits(e.ctx, tollgate.EntityScope("e2", "api"), tollgate.Config{}); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		entity, resource string
		want             int64
		source           string // the level that supplied the limit (Status.Source)
	}{
		{"e1", "api", 40, "entity"}, {"e1", "other", 30, "entity-default"}, {"e2", "api", 20, "resource"}, {"e2", "other", 10, "system"},
		{"unknown", "api", 20, "resource"}, {"unknown", "other", 10, "system"},
	} {
		if got := e.capacityOf(lim, c.entity, c.resource, "rpm"); got != c.want {
			t.Errorf("capacity for %s/%s = %d, want %d", c.entity, c.resource, got, c.want)
		}
		le := e.acquire(lim, c.entity, c.resource, tollgate.Consume{"rpm": c.want})
		if s := status(t, le.Statuses(), c.entity, "rpm"); s.Source != c.source {
			t.Errorf("source of %s/%s's rpm = %q, want %q", c.entity, c.resource, s.Source, c.source)
		}
		e.commit(le)
		e.denied(lim, c.entity, c.resource, tollgate.Consume{"rpm": 1})
	}

	// Peel the levels off one by one.
	deleteConfig(t, e.admin(), tollgate.EntityScope("e1", "api"))
	if got := e.capacityOf(lim, "e1", "api", "rpm"); got != 30 {
		t.Errorf("without entity+resource: capacity %d, want 30", got)
	}
	deleteConfig(t, e.admin(), tollgate.EntityScope("e1", ""))
	if got := e.capacityOf(lim, "e1", "api", "rpm"); got != 20 {
		t.Errorf("without entity default: capacity %d, want 20", got)
	}
	deleteConfig(t, e.admin(), tollgate.ResourceScope("api"))
	if got := e.capacityOf(lim, "e1", "api", "rpm"); got != 10 {
		t.Errorf("without resource: capacity %d, want 10", got)
	}
	deleteConfig(t, e.admin(), tollgate.SystemScope())
	_, err := lim.Acquire(e.ctx, "e1", "api", tollgate.Consume{"rpm": 1})
	var ve *tollgate.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Acquire with nothing configured = %v, want *ValidationError", err)
	}
	// Explicit limits still work, and override stored ones; the drained
	// bucket adopts the larger capacity without gaining tokens.
	setConfig(t, e.admin(), tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 20))
	st, err := lim.Available(e.ctx, "e2", "api", tollgate.WithLimits(tollgate.PerMinute("rpm", 1_000)))
	if err != nil {
		t.Fatal(err)
	}
	if s := status(t, st, "e2", "rpm"); s.Capacity != 1_000 || s.Available != 0 {
		t.Errorf("explicit limit over stored: %+v, want capacity 1000 available 0", s)
	}
	e.wantAvailable(lim, "e3", "api", "rpm", 1_000, tollgate.WithLimits(tollgate.PerMinute("rpm", 1_000)))
	e.wantAvailable(lim, "e3", "api", "rpm", 20)
}

// frozenGeneration is a store whose change generation never moves: a
// limiter over it is told of no change made elsewhere, and learns of them
// when its cache TTL passes or its process restarts, as a process does
// when it cannot read the generation.
type frozenGeneration struct{ store.Store }

func (frozenGeneration) Generation(context.Context) (uint64, error) { return 0, nil }

func (frozenGeneration) LocalGeneration() bool { return false }

func testLimiterLimitChanges(t *testing.T, e *env) {
	lim := e.limiter() // default cache TTL: the admin's writes reach it through the shared watch
	remote := e.limiterOver(frozenGeneration{e.s})
	if _, err := e.admin().CreateEntity(e.ctx, tollgate.Entity{ID: "e1"}); err != nil {
		t.Fatal(err)
	}
	setConfig(t, e.admin(), tollgate.EntityScope("e1", "api"), tollgate.PerMinute("rpm", 40), tollgate.ConcurrencyLimit("inflight", 5))
	e.commit(e.acquire(lim, "e1", "api", tollgate.Consume{"rpm": 5}))
	held := e.acquire(lim, "e1", "api", tollgate.Consume{"inflight": 2})
	e.wantAvailable(remote, "e1", "api", "rpm", 35) // remote caches this resolution
	e.wantAvailable(remote, "e1", "api", "inflight", 3)

	// Shrink: the balance is clamped at the next acquire, the in-flight
	// slots stay in use.
	setConfig(t, e.admin(), tollgate.EntityScope("e1", "api"), tollgate.PerMinute("rpm", 20), tollgate.ConcurrencyLimit("inflight", 3))
	e.commit(e.acquire(lim, "e1", "api", tollgate.Consume{"rpm": 1}))
	e.wantAvailable(lim, "e1", "api", "rpm", 19)
	e.wantAvailable(lim, "e1", "api", "inflight", 1)
	l, _ := e.Limit(storetest.Key("e1", "api"), "rpm")
	if l.Params.Capacity != 20_000 || l.State.Tokens != 19_000 {
		t.Errorf("stored rpm after shrink = %+v", l)
	}

	// The remote limiter still uses its cached limits (capacity 40), until
	// its process restarts (or its TTL passes, below).
	if got := e.capacityOf(remote, "e1", "api", "rpm"); got != 40 {
		t.Errorf("remote capacity within TTL = %d, want the cached 40", got)
	}
	remote = e.limiterOver(frozenGeneration{e.s})
	if got := e.capacityOf(remote, "e1", "api", "rpm"); got != 20 {
		t.Errorf("remote capacity after a restart = %d, want 20", got)
	}

	// Grow: no tokens appear, the freed capacity is for slots.
	setConfig(t, e.admin(), tollgate.EntityScope("e1", "api"), tollgate.PerMinute("rpm", 100), tollgate.ConcurrencyLimit("inflight", 10))
	e.commit(e.acquire(lim, "e1", "api", tollgate.Consume{"rpm": 19, "inflight": 8}))
	e.denied(lim, "e1", "api", tollgate.Consume{"rpm": 1})
	e.rollback(held)
	e.wantAvailable(lim, "e1", "api", "inflight", 10)
	e.wantAvailable(lim, "e1", "api", "rpm", 0)

	// A rate change applies from the first acquire that sees it: until then
	// the bucket refills at the old rate (100/min), after at the new one.
	setConfig(t, e.admin(), tollgate.EntityScope("e1", "api"), tollgate.PerMinute("rpm", 200).WithBurst(100))
	e.Advance(30_000)
	e.wantAvailable(lim, "e1", "api", "rpm", 50)
	e.commit(e.acquire(lim, "e1", "api", tollgate.Consume{"rpm": 0}))
	e.Advance(12_000)
	e.wantAvailable(lim, "e1", "api", "rpm", 90)
	if got := e.capacityOf(remote, "e1", "api", "rpm"); got != 20 {
		t.Errorf("remote capacity within its TTL = %d, want the cached 20", got)
	}
	// The remote limiter learns of the change when its TTL (60s) expires.
	e.Advance(18_000)
	if got := e.capacityOf(remote, "e1", "api", "rpm"); got != 100 {
		t.Errorf("remote capacity after the TTL = %d, want 100", got)
	}
	e.wantAvailable(remote, "e1", "api", "rpm", 100)
}
