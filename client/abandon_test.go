package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/internal/lossystore"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// abandonEnv is a server over a lossystore.Store and a client on a fake
// clock of its own, whose abandonments it reports.
type abandonEnv struct {
	ctx       context.Context
	st        *lossystore.Store
	c         *client.Client
	clk       *clock.Fake
	abandoned chan client.Abandoned
	slot      client.AcquireOption
}

func newAbandonEnv(t *testing.T) *abandonEnv {
	e := &abandonEnv{ctx: context.Background(), st: lossystore.New(memory.New()), clk: clock.NewFake(epoch),
		abandoned: make(chan client.Abandoned, 4), slot: client.WithLimits(tollgate.ConcurrencyLimit("conns", 1))}
	env := startEnvOver(t, e.st, nil)
	e.c = env.client(t, client.WithClock(e.clk), client.WithOnAbandon(func(a client.Abandoned) { e.abandoned <- a }))
	return e
}

func (e *abandonEnv) acquire(mode lossystore.Mode, opts ...client.AcquireOption) (*client.Lease, error) {
	e.st.Set(mode)
	defer e.st.Set(lossystore.Pass)
	return e.c.Acquire(e.ctx, "k", "db", model.Consume{"conns": 1}, append([]client.AcquireOption{e.slot}, opts...)...)
}

func (e *abandonEnv) next(t *testing.T) client.Abandoned {
	t.Helper()
	select {
	case a := <-e.abandoned:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no abandonment reported within 10 s")
		return client.Abandoned{}
	}
}

// slotFree reports whether the slot can be acquired (and gives it back).
func (e *abandonEnv) slotFree(t *testing.T) bool {
	t.Helper()
	le, err := e.acquire(lossystore.Pass)
	switch {
	case errors.Is(err, model.ErrRateLimited):
		return false
	case err != nil:
		t.Fatalf("Acquire: %v", err)
	}
	if err := le.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	return true
}

// An acquire the server granted, whose grant its store's failure hid (a
// 503, or a degraded grant in mode allow), holds a slot for nobody: the
// client, which made the acquire's idempotency key up, rolls the lease
// back, and the slot is free again.
func TestAbandonUnknownOutcome(t *testing.T) {
	for _, mode := range []model.OnUnavailable{model.Block, model.Allow} {
		t.Run(string(mode), func(t *testing.T) {
			e := newAbandonEnv(t)
			le, err := e.acquire(lossystore.Lost, client.WithOnUnavailable(mode))
			switch {
			case mode == model.Block && !errors.Is(err, model.ErrUnavailable):
				t.Fatalf("Acquire: %v, want unavailable", err)
			case mode == model.Allow && (err != nil || !le.Degraded()):
				t.Fatalf("Acquire: %v, %v; want a degraded grant", le, err)
			}
			if a := e.next(t); a.Outcome != client.AbandonEnded || a.Entity != "k" || a.Resource != "db" || len(a.LeaseID) != model.LeaseIDLen {
				t.Fatalf("abandoned %+v, want k/db ended", a)
			}
			if !e.slotFree(t) {
				t.Fatal("the slot is still held")
			}
		})
	}
}

// A write that lands after the first rollback found no lease is rolled
// back by the next, on the client's clock.
func TestAbandonLateWrite(t *testing.T) {
	e := newAbandonEnv(t)
	if _, err := e.acquire(lossystore.Late); !errors.Is(err, model.ErrUnavailable) {
		t.Fatalf("Acquire: %v, want unavailable", err)
	}
	if !e.clk.BlockUntilWaiters(1, timeout(10*time.Second)) {
		t.Fatal("the abandonment did not wait to roll back again")
	}
	if err := e.st.Land(e.ctx); err != nil {
		t.Fatal(err)
	}
	if e.slotFree(t) {
		t.Fatal("the late write took no slot")
	}
	e.clk.Advance(time.Second)
	if a := e.next(t); a.Outcome != client.AbandonEnded {
		t.Fatalf("abandoned %+v, want ended", a)
	}
	if !e.slotFree(t) {
		t.Fatal("the slot is still held")
	}
}

// An acquire with the caller's own idempotency key is not abandoned: the
// caller may send the key again, and must find the first grant. One with
// the client's key is, from before Acquire returns.
func TestAbandonOnlyTheClientsKeys(t *testing.T) {
	e := newAbandonEnv(t)
	e.st.FailLooks(true) // the rollbacks fail, and wait on the clock
	if _, err := e.acquire(lossystore.Lost, tollgate.WithIdempotencyKey("job-1")); !errors.Is(err, model.ErrUnavailable) {
		t.Fatalf("Acquire: %v, want unavailable", err)
	}
	if n := client.Abandoning(e.c); n != 0 {
		t.Fatalf("%d abandonments of an acquire with the caller's key", n)
	}
	e.st.FailLooks(false)
	le, err := e.acquire(lossystore.Pass, tollgate.WithIdempotencyKey("job-1"))
	if err != nil || !le.Replayed() {
		t.Fatalf("the retry: %v, %v; want the first grant replayed", le, err)
	}
	must(t, "Commit", le.Commit(e.ctx))
	e.st.FailLooks(true)
	if _, err := e.acquire(lossystore.Lost); !errors.Is(err, model.ErrUnavailable) {
		t.Fatalf("Acquire: %v, want unavailable", err)
	}
	if n := client.Abandoning(e.c); n != 1 {
		t.Fatalf("%d abandonments of an acquire with the client's key, want 1", n)
	}
}

// timeout returns a channel closed after d.
func timeout(d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	time.AfterFunc(d, func() { close(ch) })
	return ch
}
