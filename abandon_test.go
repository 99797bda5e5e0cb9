package tollgate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/internal/lossystore"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// abandonEnv is a limiter over a lossystore.Store whose one entity may hold one
// concurrency slot, and the abandonments it reports.
type abandonEnv struct {
	ctx       context.Context
	s         *lossystore.Store
	lim       *tollgate.Limiter
	clk       interface{ Advance(time.Duration) }
	waiters   func(n int) bool
	abandoned chan tollgate.Abandoned
	slot      tollgate.AcquireOption
}

func newAbandonEnv(t *testing.T, opts ...tollgate.Option) *abandonEnv {
	e := &abandonEnv{ctx: context.Background(), s: lossystore.New(memory.New()),
		abandoned: make(chan tollgate.Abandoned, tollgate.MaxAbandoning+1),
		slot:      tollgate.WithLimits(tollgate.ConcurrencyLimit("conns", 1))}
	lim, clk := newLim(t, e.s, append([]tollgate.Option{tollgate.WithOnAbandon(func(a tollgate.Abandoned) { e.abandoned <- a })}, opts...)...)
	e.lim, e.clk = lim, clk
	e.waiters = func(n int) bool { // false if not within 10 s
		give := make(chan struct{})
		defer time.AfterFunc(10*time.Second, func() { close(give) }).Stop()
		return clk.BlockUntilWaiters(n, give)
	}
	return e
}

// acquireLost makes a durable acquire of the slot whose answer is lost in
// mode, and returns its error.
func (e *abandonEnv) acquireLost(t *testing.T, mode lossystore.Mode, opts ...tollgate.AcquireOption) error {
	t.Helper()
	e.s.Set(mode)
	defer e.s.Set(lossystore.Pass)
	le, err := e.lim.Acquire(e.ctx, "k", "db", tollgate.Consume{"conns": 1}, append([]tollgate.AcquireOption{e.slot}, opts...)...)
	if err == nil && !le.Degraded() {
		t.Fatalf("Acquire in mode %d granted", mode)
	}
	return err
}

// next returns the next abandonment reported.
func (e *abandonEnv) next(t *testing.T) tollgate.Abandoned {
	t.Helper()
	select {
	case a := <-e.abandoned:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no abandonment reported within 10 s")
		return tollgate.Abandoned{}
	}
}

// slotFree reports whether the slot can be acquired (and gives it back).
func (e *abandonEnv) slotFree(t *testing.T) bool {
	t.Helper()
	le, err := e.lim.Acquire(e.ctx, "k", "db", tollgate.Consume{"conns": 1}, e.slot)
	switch {
	case errors.Is(err, tollgate.ErrRateLimited):
		return false
	case err != nil:
		t.Fatalf("Acquire: %v", err)
	}
	if err := le.Commit(e.ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return true
}

// A durable acquire written by the store whose answer was lost holds its
// slot for nobody; the limiter finds its record at once and rolls it
// back, leaving the tombstone of a rollback.
func TestAbandonLostAnswer(t *testing.T) {
	for _, mode := range []tollgate.OnUnavailable{tollgate.Block, tollgate.Allow} {
		t.Run(string(mode), func(t *testing.T) {
			e := newAbandonEnv(t)
			if err := e.acquireLost(t, lossystore.Lost, tollgate.WithOnUnavailable(mode)); mode == tollgate.Block && err == nil {
				t.Fatal("Acquire in block mode answered no error")
			}
			a := e.next(t)
			if a.Outcome != tollgate.AbandonEnded || a.Entity != "k" || a.Resource != "db" || a.Err != nil {
				t.Fatalf("abandoned %+v, want ended k/db", a)
			}
			rec, err := e.s.Store.GetLease(e.ctx, a.Namespace, a.LeaseID)
			if err != nil || rec.EndedAs != store.Rollback {
				t.Fatalf("record %+v, %v: want a rollback's tombstone", rec, err)
			}
			if !e.slotFree(t) {
				t.Fatal("the slot is still held")
			}
			if st := e.lim.Stats().Abandoned; st != (tollgate.AbandonStats{Ended: 1}) {
				t.Fatalf("Stats().Abandoned = %+v", st)
			}
		})
	}
}

// A write that lands after its caller gave up (and after the first look
// found nothing) is found by a later look.
func TestAbandonLateWrite(t *testing.T) {
	e := newAbandonEnv(t)
	if err := e.acquireLost(t, lossystore.Late); err == nil {
		t.Fatal("Acquire answered no error")
	}
	if !e.waiters(1) { // the first look found nothing, and waits 1 s
		t.Fatal("the abandonment did not wait for a second look")
	}
	if err := e.s.Land(e.ctx); err != nil {
		t.Fatal(err)
	}
	if e.slotFree(t) {
		t.Fatal("the late write took no slot")
	}
	e.clk.Advance(time.Second)
	if a := e.next(t); a.Outcome != tollgate.AbandonEnded {
		t.Fatalf("abandoned %+v, want ended", a)
	}
	if !e.slotFree(t) {
		t.Fatal("the slot is still held")
	}
}

// An acquire never written is looked for four times over 30 s, then
// reported not found; one whose looks all fail, failed with the last
// look's error.
func TestAbandonNotFoundAndFailed(t *testing.T) {
	for _, c := range []struct {
		failLooks bool
		want      tollgate.AbandonOutcome
	}{{false, tollgate.AbandonNotFound}, {true, tollgate.AbandonFailed}} {
		t.Run(string(c.want), func(t *testing.T) {
			e := newAbandonEnv(t)
			e.s.FailLooks(c.failLooks)
			if err := e.acquireLost(t, lossystore.Never); err == nil {
				t.Fatal("Acquire answered no error")
			}
			for _, d := range []time.Duration{time.Second, 4 * time.Second, 25 * time.Second} {
				if !e.waiters(1) {
					t.Fatal("the abandonment did not wait for another look")
				}
				e.clk.Advance(d)
			}
			a := e.next(t)
			if a.Outcome != c.want || (a.Err != nil) != c.failLooks {
				t.Fatalf("abandoned %+v, want %v", a, c.want)
			}
			if n := e.s.Looks(); n != 4 {
				t.Fatalf("%d looks, want 4", n)
			}
			if st := e.lim.Stats().Abandoned; st.NotFound+st.Failed != 1 || st.Ended != 0 {
				t.Fatalf("Stats().Abandoned = %+v", st)
			}
		})
	}
}
