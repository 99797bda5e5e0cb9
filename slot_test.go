package tollgate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

var oneSlot = tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", 1))

func slotsFree(t *testing.T, lim *tollgate.Limiter) int64 {
	t.Helper()
	sts, err := lim.Available(context.Background(), "job", "emr", oneSlot)
	if err != nil {
		t.Fatal(err)
	}
	return sts[0].Available
}

// A call longer than the lease's expiry keeps its slot: the lease is
// extended every half expiry while the function runs, and ended after.
func TestWithSlotExtendsWhileRunning(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	lim, clk := newLim(t, st)
	var id string
	var expiries []time.Time
	err := lim.WithSlot(ctx, "job", "emr", tollgate.Consume{"slots": 1}, 0, func(fctx context.Context) error {
		recs, _, err := st.ListLeases(ctx, nsID(t, st, tollgate.DefaultNamespace), store.LeaseQuery{Limit: 10})
		if err != nil || len(recs) != 1 {
			t.Fatalf("records while running: %d, %v", len(recs), err)
		}
		id = recs[0].ID
		for range 3 { // three half-expiries: 15 s of a 10 s lease
			clk.BlockUntilWaiters(1, nil) // the extender waits for the next half
			clk.Advance(5 * time.Second)
			clk.BlockUntilWaiters(1, nil) // it has extended, and waits again
			rec, err := st.GetLease(ctx, nsID(t, st, tollgate.DefaultNamespace), id)
			if err != nil {
				t.Fatal(err)
			}
			expiries = append(expiries, time.UnixMilli(rec.Expires).UTC())
		}
		if fctx.Err() != nil {
			t.Errorf("fn's context ended: %v", context.Cause(fctx))
		}
		if got := slotsFree(t, lim); got != 0 {
			t.Errorf("free slots while running = %d, want 0", got)
		}
		return nil
	}, oneSlot, tollgate.WithLeaseTTL(10*time.Second))
	if err != nil {
		t.Fatalf("WithSlot: %v", err)
	}
	for i, e := range expiries {
		if want := tgEpoch.Add(time.Duration(5*(i+1)+10) * time.Second); !e.Equal(want) {
			t.Errorf("expiry after extension %d = %v, want %v", i+1, e, want)
		}
	}
	if got := slotsFree(t, lim); got != 1 {
		t.Errorf("free slots after = %d, want 1", got)
	}
	if rec, err := st.GetLease(ctx, nsID(t, st, tollgate.DefaultNamespace), id); err != nil || !rec.Ended() || rec.EndedAs != store.Commit {
		t.Errorf("record after = %+v, %v; want its tombstone, committed", rec, err)
	}
}

// A lease ended elsewhere while the function runs cancels its context with
// ErrSlotLost; the slot is given back once.
func TestWithSlotLost(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	lim, clk := newLim(t, st)
	err := lim.WithSlot(ctx, "job", "emr", tollgate.Consume{"slots": 1}, 0, func(fctx context.Context) error {
		recs, _, _ := st.ListLeases(ctx, nsID(t, st, tollgate.DefaultNamespace), store.LeaseQuery{Limit: 1})
		rec := recs[0]
		if err := st.EndLease(ctx, nsID(t, st, tollgate.DefaultNamespace), store.LeaseEnding{ID: rec.ID, Version: rec.Version, Deltas: rec.EndDeltas(store.Expire)}); err != nil {
			t.Fatal(err) // a reconciler took it
		}
		clk.BlockUntilWaiters(1, nil)
		clk.Advance(5 * time.Second)
		<-fctx.Done()
		if !errors.Is(context.Cause(fctx), tollgate.ErrSlotLost) {
			t.Errorf("cause = %v, want ErrSlotLost", context.Cause(fctx))
		}
		return context.Cause(fctx)
	}, oneSlot, tollgate.WithLeaseTTL(10*time.Second))
	if !errors.Is(err, tollgate.ErrSlotLost) {
		t.Errorf("WithSlot = %v, want ErrSlotLost", err)
	}
	if got := slotsFree(t, lim); got != 1 {
		t.Errorf("free slots after = %d, want 1 (given back once)", got)
	}
}

// Without a free slot and no wait, WithSlot is refused at once and fn does
// not run; an error of fn rolls back, a panic too.
func TestWithSlotRefusedAndEndings(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	held, err := lim.Acquire(ctx, "job", "emr", tollgate.Consume{"slots": 1}, oneSlot)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	err = lim.WithSlot(ctx, "job", "emr", tollgate.Consume{"slots": 1}, 0, func(context.Context) error { ran = true; return nil }, oneSlot)
	var ex *tollgate.RateLimitExceeded
	if !errors.As(err, &ex) || ran {
		t.Errorf("WithSlot with every slot taken = %v (ran %v), want *RateLimitExceeded without running", err, ran)
	}
	if err := held.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := lim.WithSlot(ctx, "job", "emr", tollgate.Consume{"slots": 1}, time.Second, func(context.Context) error { return boom }, oneSlot); !errors.Is(err, boom) {
		t.Errorf("WithSlot = %v, want fn's error", err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = lim.WithSlot(ctx, "job", "emr", tollgate.Consume{"slots": 1}, 0, func(context.Context) error { panic("fn") }, oneSlot)
	}()
	if got := slotsFree(t, lim); got != 1 {
		t.Errorf("free slots after an error and a panic = %d, want 1", got)
	}
}
