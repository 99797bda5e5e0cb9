package limitertest

import (
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
)

// Changes propagate (docs/semantics.md 14, issue 21 item 3): a stored
// limit and an entity changed through one process's Admin are in force in
// another process over the same store (a limiter with a change watch of
// its own, at the default refresh interval) at its next call on a store
// whose generation is local (memory, embedded), and within the refresh
// interval (a second; at most 2 s here) on a shared one (DynamoDB, Redis),
// however long the cache TTL. The time is the wall clock's: the watch
// polls in real time.
func testLimiterChangesReachAnotherProcess(t *testing.T, e *env) {
	remote := e.limiterOver(e.s, tollgate.WithCacheTTL(time.Hour))
	local := e.s.LocalGeneration()
	inForce := func(what string, ok func() bool) {
		t.Helper()
		start := time.Now()
		for !ok() {
			if local {
				t.Errorf("%s: not in force at the other process's next call over a local store", what)
				return
			}
			if time.Since(start) > 3*time.Second {
				t.Errorf("%s: not in force at the other process after %v", what, time.Since(start))
				return
			}
			time.Sleep(10 * time.Millisecond) // polling the other process's answers, not a race fix
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s: in force at the other process after %v, want at most 2 s", what, took)
		} else {
			t.Logf("%s: in force at the other process after %v", what, took)
		}
	}

	// A stored limit, changed twice.
	setConfig(t, e.admin(), tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 10))
	if got := e.capacityOf(remote, "kid", "api", "rpm"); got != 10 {
		t.Fatalf("capacity = %d, want 10", got)
	}
	for _, want := range []int64{11, 12} {
		setConfig(t, e.admin(), tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", want))
		inForce("a stored limit", func() bool { return e.capacityOf(remote, "kid", "api", "rpm") == want })
	}

	// An entity: kid starts cascading to boss, whose limit then applies.
	if _, err := e.admin().CreateEntity(e.ctx, tollgate.Entity{ID: "boss"}); err != nil {
		t.Fatal(err)
	}
	setConfig(t, e.admin(), tollgate.EntityScope("boss", ""), tollgate.PerMinute("rpm", 3))
	kid, err := e.admin().CreateEntity(e.ctx, tollgate.Entity{ID: "kid", ParentID: "boss"})
	if err != nil {
		t.Fatal(err)
	}
	cascades := func() bool {
		st, err := remote.Available(e.ctx, "kid", "api")
		if err != nil {
			t.Fatalf("Available: %v", err)
		}
		for _, s := range st {
			if s.Entity == "boss" {
				return true
			}
		}
		return false
	}
	if cascades() {
		t.Fatal("kid cascades before the change")
	}
	kid.Cascade = true
	if _, err := e.admin().UpdateEntity(e.ctx, kid); err != nil {
		t.Fatalf("UpdateEntity: %v", err)
	}
	inForce("an entity's change", cascades)
}
