package tollgate_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// errLostAnswer is what lossyStore answers a durable acquire: no answer,
// as when the store's call timed out.
var errLostAnswer = errors.New("lossy store: no answer")

// lossyStore is a memory store whose answers to durable acquires (a
// Consume with a lease record) are lost: the acquire is written and
// errLostAnswer returned (lost), or errLostAnswer returned and the write
// kept for land to apply later (late), or not written at all (never).
// Its GetLease may fail with errLostAnswer too (failLooks).
type lossyStore struct {
	*memory.Store

	mu        sync.Mutex
	mode      string // "lost", "late", "never"; "" passes
	held      []heldConsume
	failLooks bool
	looks     int
}

type heldConsume struct {
	ns  string
	req store.ConsumeRequest
}

func (s *lossyStore) set(mode string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mode = mode
}

func (s *lossyStore) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	s.mu.Lock()
	mode := s.mode
	if req.Lease == nil {
		mode = ""
	}
	if mode == "late" {
		// The limiter recycles req once Consume returns: keep a copy.
		c := *req
		c.Buckets = slices.Clone(req.Buckets)
		for i := range c.Buckets {
			c.Buckets[i].Limits = slices.Clone(c.Buckets[i].Limits)
			c.Buckets[i].Hint = nil
		}
		s.held = append(s.held, heldConsume{ns, c})
	}
	s.mu.Unlock()
	switch mode {
	case "lost":
		if _, err := s.Store.Consume(ctx, ns, req); err != nil {
			return false, err
		}
		return false, errLostAnswer
	case "late", "never":
		return false, errLostAnswer
	}
	return s.Store.Consume(ctx, ns, req)
}

// land applies the writes held in late mode, as a request that reaches
// the store after its caller gave up on it.
func (s *lossyStore) land(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	held := s.held
	s.held = nil
	s.mu.Unlock()
	for _, h := range held {
		if granted, err := s.Store.Consume(context.Background(), h.ns, &h.req); err != nil || !granted {
			t.Fatalf("the late write: granted %v, %v", granted, err)
		}
	}
}

func (s *lossyStore) GetLease(ctx context.Context, ns, id string) (store.LeaseRecord, error) {
	s.mu.Lock()
	s.looks++
	fail := s.failLooks
	s.mu.Unlock()
	if fail {
		return store.LeaseRecord{}, errLostAnswer
	}
	return s.Store.GetLease(ctx, ns, id)
}

// abandonEnv is a limiter over a lossyStore whose one entity may hold one
// concurrency slot, and the abandonments it reports.
type abandonEnv struct {
	ctx       context.Context
	s         *lossyStore
	lim       *tollgate.Limiter
	clk       interface{ Advance(time.Duration) }
	waiters   func(n int) bool
	abandoned chan tollgate.Abandoned
	slot      tollgate.AcquireOption
}

func newAbandonEnv(t *testing.T, opts ...tollgate.Option) *abandonEnv {
	e := &abandonEnv{ctx: context.Background(), s: &lossyStore{Store: memory.New()},
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
func (e *abandonEnv) acquireLost(t *testing.T, mode string, opts ...tollgate.AcquireOption) error {
	t.Helper()
	e.s.set(mode)
	defer e.s.set("")
	le, err := e.lim.Acquire(e.ctx, "k", "db", tollgate.Consume{"conns": 1}, append([]tollgate.AcquireOption{e.slot}, opts...)...)
	if err == nil && !le.Degraded() {
		t.Fatalf("Acquire in %s mode granted", mode)
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
			if err := e.acquireLost(t, "lost", tollgate.WithOnUnavailable(mode)); mode == tollgate.Block && err == nil {
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
	if err := e.acquireLost(t, "late"); err == nil {
		t.Fatal("Acquire answered no error")
	}
	if !e.waiters(1) { // the first look found nothing, and waits 1 s
		t.Fatal("the abandonment did not wait for a second look")
	}
	e.s.land(t)
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
		t.Run(c.want.String(), func(t *testing.T) {
			e := newAbandonEnv(t)
			e.s.failLooks = c.failLooks
			if err := e.acquireLost(t, "never"); err == nil {
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
			if e.s.looks != 4 {
				t.Fatalf("%d looks, want 4", e.s.looks)
			}
			if st := e.lim.Stats().Abandoned; st.NotFound+st.Failed != 1 || st.Ended != 0 {
				t.Fatalf("Stats().Abandoned = %+v", st)
			}
		})
	}
}
