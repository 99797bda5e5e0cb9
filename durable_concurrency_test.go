package tollgate_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/reconcile"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// 16 goroutines take slots of a 4-slot limit, commit most and abandon some,
// while a reconciler on a fake clock reclaims the abandoned ones: never
// more than 4 held, every lease ended exactly once, every slot back.
func TestDurableLeasesBoundUnderReconcile(t *testing.T) {
	const (
		workers = 16
		rounds  = 40
		slotCap = 4
	)
	ctx := context.Background()
	st := memory.New()
	lim, clk := newLim(t, st)
	limits := tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", slotCap))
	// Abandoned leases expire in a second; those committed get a day,
	// which the fake clock never reaches: the reconciler takes only the
	// abandoned ones, and a slot counted as held is held in the store.
	short, long := tollgate.WithLeaseTTL(time.Second), tollgate.WithLeaseTTL(24*time.Hour)

	var reclaimed atomic.Int64
	r, err := reconcile.New(st, reconcile.WithClock(clk), reconcile.WithOnReclaim(func(rc reconcile.Reclaimed) {
		reclaimed.Add(1)
		if rc.Lease.Expires-rc.Lease.Created > 1000 {
			t.Errorf("reclaimed a lease held for a day: %+v at %v", rc.Lease, rc.At)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	// The reconciler's goroutine moves the fake clock on and makes a pass,
	// over and over, until the workers are done.
	stop := make(chan struct{})
	var reconciler sync.WaitGroup
	reconciler.Add(1)
	go func() {
		defer reconciler.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			clk.Advance(300 * time.Millisecond)
			if _, err := r.Once(ctx); err != nil {
				t.Error(err)
				return
			}
			// The store's own count: a double grant would show below zero,
			// a double give-back above the capacity.
			if sts, err := lim.Available(ctx, "key", "api", limits); err != nil || sts[0].Available < 0 || sts[0].Available > slotCap {
				t.Errorf("Available = %+v, %v; want 0 to %d", sts, err, slotCap)
				return
			}
			runtime.Gosched()
		}
	}()

	// held counts the slots of leases to be committed, taken and not yet
	// let go: it goes up after a grant and down before the commit, so it is
	// never above what the store holds for them; above the capacity would
	// be a double grant. (An abandoned lease may expire at once, the fake
	// clock running fast, so counting it would count a slot the store
	// rightly gave back.)
	var held, maxHeld, granted, committed, abandoned atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; {
				abandon := (w+i)%5 == 0
				expiry := long
				if abandon {
					expiry = short
				}
				le, err := lim.Acquire(ctx, "key", "api", tollgate.Consume{"slots": 1}, limits, expiry)
				if errors.Is(err, tollgate.ErrRateLimited) {
					runtime.Gosched() // the reconciler or another worker frees a slot
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				i++
				granted.Add(1)
				if abandon {
					abandoned.Add(1)
					continue // the reconciler takes it back
				}
				n := held.Add(1)
				for m := maxHeld.Load(); n > m && !maxHeld.CompareAndSwap(m, n); m = maxHeld.Load() {
				}
				runtime.Gosched() // hold it a while
				held.Add(-1)
				if err := le.Commit(ctx); err != nil {
					t.Error(err)
					return
				}
				committed.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	reconciler.Wait()

	clk.Advance(2 * time.Second)
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if m := maxHeld.Load(); m > slotCap {
		t.Errorf("%d slots held at once, capacity %d", m, slotCap)
	}
	if g, c, a, rc := granted.Load(), committed.Load(), abandoned.Load(), reclaimed.Load(); g != workers*rounds || c+a != g || rc != a {
		t.Errorf("granted %d, committed %d, abandoned %d, reclaimed %d: want %d granted, each abandoned lease reclaimed once",
			g, c, a, rc, workers*rounds)
	}
	if got := availableOf(t, lim, "key", "api", "slots", limits); got != slotCap {
		t.Errorf("slots at the end = %d, want %d", got, slotCap)
	}
	if recs := records(t, st); len(recs) != 0 {
		t.Errorf("%d records left", len(recs))
	}
	t.Logf("granted %d, committed %d, reclaimed %d, at most %d held", granted.Load(), committed.Load(), reclaimed.Load(), maxHeld.Load())
}
