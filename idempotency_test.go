package tollgate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/reconcile"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// An acquire retried with its idempotency key gets the same lease back
// and debits once; the key with another request is a conflict.
func TestIdempotentAcquire(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	rpm := tollgate.WithLimits(tollgate.PerMinute("rpm", 100))
	key := tollgate.WithIdempotencyKey("order-42")
	first := mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 10}, rpm, key)
	if first.Replayed() || first.ID() != model.IdempotentLeaseID("order-42") {
		t.Fatalf("first: replayed %v, id %s", first.Replayed(), first.ID())
	}
	again := mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 10}, rpm, key)
	if !again.Replayed() || again.ID() != first.ID() || again.Consumed()["rpm"] != 10 || again.Statuses() != nil {
		t.Errorf("retry: replayed %v, id %s, consumed %v", again.Replayed(), again.ID(), again.Consumed())
	}
	if got := availableOf(t, lim, "k", "api", "rpm", rpm); got != 90 {
		t.Errorf("rpm = %d, want 90: debited once", got)
	}
	for _, c := range []struct {
		entity string
		c      tollgate.Consume
	}{{"k", tollgate.Consume{"rpm": 11}}, {"other", tollgate.Consume{"rpm": 10}}, {"k", tollgate.Consume{"rpm": 10, "tpm": 1}}} {
		_, err := lim.Acquire(ctx, c.entity, "api", c.c, tollgate.WithLimits(tollgate.PerMinute("rpm", 100), tollgate.PerMinute("tpm", 100)), key)
		if !errors.Is(err, tollgate.ErrIdempotencyConflict) {
			t.Errorf("%s %v with the same key: %v, want ErrIdempotencyConflict", c.entity, c.c, err)
		}
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := lim.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 10}, rpm, key)
	wantEndedAs(t, err, model.EndedCommitted)
	if got := availableOf(t, lim, "k", "api", "rpm", rpm); got != 90 {
		t.Errorf("rpm = %d, want 90 still", got)
	}
}

// A recycled lease state forgets the key of the acquire before: an
// acquire without a key after one with is an acquire of its own.
func TestIdempotencyKeyNotInheritedByTheNextAcquire(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	rpm := tollgate.WithLimits(tollgate.PerMinute("rpm", 100))
	for range 20 { // the pool hands states back in no particular order
		if _, err := lim.AcquireAndCommit(ctx, "k", "api", tollgate.Consume{"rpm": 1}, rpm, tollgate.WithIdempotencyKey("same")); err != nil {
			t.Fatal(err)
		}
		g, err := lim.AcquireAndCommit(ctx, "other", "api", tollgate.Consume{"rpm": 2}, rpm)
		if err != nil || g.Replayed {
			t.Fatalf("an acquire without a key after one with: %+v, %v", g, err)
		}
	}
	if got := availableOf(t, lim, "other", "api", "rpm", rpm); got != 60 {
		t.Errorf("other's rpm = %d, want 60: each keyless acquire debited", got)
	}
}

// AcquireAndCommit with a key grants, commits and remembers in one store
// step for a rate-only lease (its record born committed), in two for one
// holding a slot; a retry replays the grant, debiting nothing.
func TestIdempotentAcquireAndCommit(t *testing.T) {
	ctx := context.Background()
	st := newFaultStore()
	lim, _ := newLim(t, st)
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 100), tollgate.ConcurrencyLimit("slots", 2))
	for _, c := range []struct {
		name    string
		consume tollgate.Consume
		ends    int // EndLease calls of the first grant
	}{
		{"rate only", tollgate.Consume{"rpm": 5}, 0},
		{"with a slot", tollgate.Consume{"rpm": 5, "slots": 1}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := tollgate.WithIdempotencyKey("commit-" + c.name)
			before := availableOf(t, lim, "k", "api", "rpm", limits)
			st.resetCounts()
			g, err := lim.AcquireAndCommit(ctx, "k", "api", c.consume, limits, key)
			if err != nil || g.Replayed || g.Consumed["rpm"] != 5 {
				t.Fatalf("first: %+v, %v", g, err)
			}
			if n := st.count(mEndLease); n != c.ends {
				t.Errorf("EndLease calls = %d, want %d", n, c.ends)
			}
			again, err := lim.AcquireAndCommit(ctx, "k", "api", c.consume, limits, key)
			if err != nil || !again.Replayed || again.Consumed["rpm"] != 5 || len(again.Statuses) != 0 {
				t.Fatalf("retry: %+v, %v; want the grant replayed", again, err)
			}
			if got := availableOf(t, lim, "k", "api", "rpm", limits); got != before-5 {
				t.Errorf("rpm = %d, want %d: debited once", got, before-5)
			}
			if got := availableOf(t, lim, "k", "api", "slots", limits); got != 2 {
				t.Errorf("slots = %d, want 2: given back", got)
			}
		})
	}
}

// A key is remembered for model.TombstoneKeep after its lease ended (and
// until the lease's expiry): after that it is a new request.
func TestIdempotencyKeyForgottenAfterTombstoneKeep(t *testing.T) {
	ctx := context.Background()
	lim, clk := newLim(t, memory.New())
	rpm := tollgate.WithLimits(tollgate.PerDay("rpm", 100)) // refills under a token in the time
	key := tollgate.WithIdempotencyKey("k-1")
	if _, err := lim.AcquireAndCommit(ctx, "k", "api", tollgate.Consume{"rpm": 1}, rpm, key); err != nil {
		t.Fatal(err)
	}
	clk.Advance(model.TombstoneKeep - time.Millisecond)
	if g, err := lim.AcquireAndCommit(ctx, "k", "api", tollgate.Consume{"rpm": 1}, rpm, key); err != nil || !g.Replayed {
		t.Fatalf("within TombstoneKeep: %+v, %v; want replayed", g, err)
	}
	clk.Advance(time.Millisecond)
	if g, err := lim.AcquireAndCommit(ctx, "k", "api", tollgate.Consume{"rpm": 1}, rpm, key); err != nil || g.Replayed {
		t.Fatalf("after TombstoneKeep: %+v, %v; want a new grant", g, err)
	}
	if got := availableOf(t, lim, "k", "api", "rpm", rpm); got != 98 {
		t.Errorf("rpm = %d, want 98", got)
	}
}

// A holder coming back after the reconciler ended its lease learns that it
// expired, and so does one resuming it; the slot came back once.
func TestExpiredLeaseSaysSo(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	lim, clk := newLim(t, st)
	slot := tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", 1))
	le := mustAcquire(t, lim, "k", "jobs", tollgate.Consume{"slots": 1}, slot, tollgate.WithLeaseTTL(time.Minute))
	clk.Advance(2 * time.Minute)
	r, err := reconcile.New(st, reconcile.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.Once(ctx); err != nil || n != 1 {
		t.Fatalf("reconcile: %d, %v", n, err)
	}
	_, err = lim.ResumeLease(ctx, le.ID())
	wantEndedAs(t, err, model.EndedExpired)
	wantEndedAs(t, le.Commit(ctx), model.EndedExpired)
	if got := availableOf(t, lim, "k", "jobs", "slots", slot); got != 1 {
		t.Errorf("slots = %d, want 1", got)
	}
}
