package limitertest

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/internal/lossystore"
	"github.com/tollgate-rl/tollgate/store"
)

// Durable acquires of unknown outcome are abandoned (docs/semantics.md 8):
// written by the store, their answers lost, they hold nothing once the
// limiter has found their records and rolled them back: every slot and
// token of the entity and of its parent comes back, each record is a
// rollback's tombstone, and Stats count them. An acquire with an
// idempotency key is left for its caller's retry, which replays it.
func testLimiterAbandonedAcquires(t *testing.T, e *env) {
	abandoned := make(chan tollgate.Abandoned, 8)
	ls := lossystore.New(e.s)
	ls.Set(lossystore.Lost)
	lossy := e.limiterOver(ls, tollgate.WithChangeWatch(e.watch),
		tollgate.WithOnAbandon(func(a tollgate.Abandoned) { abandoned <- a }))
	lim := e.limiter()
	adm := e.admin()
	if _, err := adm.CreateEntity(e.ctx, tollgate.Entity{ID: "org"}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateEntity(e.ctx, tollgate.Entity{ID: "k", ParentID: "org", Cascade: true}); err != nil {
		t.Fatal(err)
	}
	limits := tollgate.WithLimits(tollgate.PerHour("rph", 10), tollgate.ConcurrencyLimit("slots", 3))
	for range 3 {
		if _, err := lossy.Acquire(e.ctx, "k", "api", tollgate.Consume{"rph": 2, "slots": 1}, limits); !errors.Is(err, lossystore.ErrLost) {
			t.Fatalf("Acquire through lost answers: %v, want its error", err)
		}
	}
	for range 3 {
		select {
		case a := <-abandoned:
			if a.Outcome != tollgate.AbandonEnded {
				t.Fatalf("abandoned %+v, want ended", a)
			}
			rec, err := e.s.GetLease(e.ctx, a.Namespace, a.LeaseID)
			if err != nil || rec.EndedAs != store.Rollback {
				t.Errorf("record %s: %+v, %v; want a rollback's tombstone", a.LeaseID, rec, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("fewer than 3 abandonments reported within 30 s")
		}
	}
	for _, entity := range []string{"k", "org"} {
		if got := e.available(lim, "k", "api", entity, "slots", limits); got != 3 {
			t.Errorf("%s's slots: %d available, want 3", entity, got)
		}
		if got := e.available(lim, "k", "api", entity, "rph", limits); got != 10 {
			t.Errorf("%s's rph: %d available, want 10", entity, got)
		}
	}
	if st := lossy.Stats().Abandoned; st != (tollgate.AbandonStats{Ended: 3}) {
		t.Errorf("Stats().Abandoned = %+v, want 3 ended", st)
	}

	key := tollgate.WithIdempotencyKey("job-1")
	if _, err := lossy.Acquire(e.ctx, "k", "api", tollgate.Consume{"rph": 2, "slots": 1}, limits, key); !errors.Is(err, lossystore.ErrLost) {
		t.Fatalf("Acquire through lost answers: %v, want its error", err)
	}
	le := e.acquire(lim, "k", "api", tollgate.Consume{"rph": 2, "slots": 1}, limits, key)
	if !le.Replayed() {
		t.Error("the retry with the idempotency key did not replay the first call's lease")
	}
	e.wantAvailable(lim, "k", "api", "slots", 2, limits)
	if st := lossy.Stats().Abandoned; st != (tollgate.AbandonStats{Ended: 3}) {
		t.Errorf("Stats().Abandoned = %+v after an acquire with a key, want 3 ended", st)
	}
}
