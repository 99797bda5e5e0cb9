package tollgate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
)

// waitScenario runs n callers of Wait (or, with perCaller, each polling on
// its own as Wait did before its queue: try, sleep the retry-after, try
// again) on a drained bucket of 100 a second, and returns the store's
// Consume calls and the grants. With a fake clock it drives the clock to
// each wake-up; with the wall clock it takes n/100 seconds.
func waitScenario(t testing.TB, n int, perCaller bool, fake bool) (calls, grants int) {
	ctx := context.Background()
	fs := newFaultStore()
	var clk clock.Clock = clock.Real{}
	if fake {
		clk = clock.NewFake(time.Now().Add(24 * time.Hour)) // ahead of the wall clock that deadlines are on
	}
	lim, err := tollgate.New(fs, tollgate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	limits := tollgate.WithLimits(tollgate.PerSecond("rps", 100))
	if _, err := lim.Acquire(ctx, "k", "api", tollgate.Consume{"rps": 100}, limits); err != nil { // drained
		t.Fatal(err)
	}
	fs.resetCounts()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range n {
		// Deadlines in reverse of arrival, all meetable (a day ahead).
		dctx, cancel := context.WithTimeout(ctx, time.Duration(2*n-i)*time.Hour)
		wg.Go(func() {
			defer cancel()
			wait := lim.Wait
			if perCaller {
				wait = pollingWait(lim, clk)
			}
			le, err := wait(dctx, "k", "api", tollgate.Consume{"rps": 1}, limits)
			if err != nil {
				t.Errorf("Wait: %v", err)
				return
			}
			mu.Lock()
			grants++
			mu.Unlock()
			_ = le.Commit(ctx)
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if f, ok := clk.(*clock.Fake); ok {
		for f.BlockUntilWaiters(1, done) {
			if next, ok := f.NextDeadline(); ok {
				f.Set(next)
			}
		}
	}
	<-done
	return fs.count(mConsume), grants
}

// pollingWait is Wait as it was before the queue: each caller tries,
// sleeps the refusal's retry-after on the clock, and tries again.
func pollingWait(lim *tollgate.Limiter, clk clock.Clock) func(context.Context, string, string, tollgate.Consume, ...tollgate.AcquireOption) (*tollgate.Lease, error) {
	return func(ctx context.Context, entity, resource string, c tollgate.Consume, opts ...tollgate.AcquireOption) (*tollgate.Lease, error) {
		for {
			le, err := lim.Acquire(ctx, entity, resource, c, opts...)
			var ex *tollgate.RateLimitExceeded
			if !errors.As(err, &ex) {
				return le, err
			}
			if err := clock.Sleep(ctx, clk, max(ex.RetryAfter, time.Millisecond)); err != nil {
				return nil, err
			}
		}
	}
}

// 1,000 callers waiting on a limit of 100 a second are all served, at
// about one store call each: one poller tries for the line's head, and
// sleeps each refill exactly, where each caller polling on its own would
// cost callers x retries.
func TestWaitQueueThousandWaiters(t *testing.T) {
	const n = 1000
	calls, grants := waitScenario(t, n, false, true)
	if grants != n {
		t.Fatalf("%d grants of %d", grants, n)
	}
	// One per grant, plus one refused try of each caller that arrived
	// while nobody waited (the goroutines start while the clock runs).
	if calls > 2*n {
		t.Errorf("%d store calls for %d grants, want about one per grant", calls, n)
	}
	t.Logf("%d callers on 100/s: %d grants, %d store calls", n, grants, calls)
}

// A caller whose deadline falls before its next possible try is told at
// once, with the refusal and ErrWaitDeadline.
func TestWaitDeadlineUnmeetable(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, newFaultStore())
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 1))
	if _, err := lim.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 1}, limits); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, time.Second) // the token is back in a minute
	defer cancel()
	_, err := lim.Wait(dctx, "k", "api", tollgate.Consume{"rpm": 1}, limits)
	var ex *tollgate.RateLimitExceeded
	if !errors.Is(err, tollgate.ErrWaitDeadline) || !errors.As(err, &ex) {
		t.Errorf("Wait = %v, want ErrWaitDeadline and the refusal", err)
	}
}

// BenchmarkWaitQueue: 200 callers of Wait on 100 a second, on the wall
// clock (two seconds a run), against the same callers each polling on
// their own (per-caller, the baseline); calls/grant is the store calls per
// grant. (TestWaitQueueThousandWaiters runs 1,000 on a fake clock; a fake
// clock cannot time the baseline, whose callers race the clock's driver.)
func BenchmarkWaitQueue(b *testing.B) {
	const n = 200
	for _, c := range []struct {
		name      string
		perCaller bool
	}{{"queue", false}, {"per-caller", true}} {
		b.Run(c.name, func(b *testing.B) {
			var calls, grants int
			for b.Loop() {
				cl, g := waitScenario(b, n, c.perCaller, false)
				calls, grants = calls+cl, grants+g
			}
			b.ReportMetric(float64(calls)/float64(grants), "calls/grant")
		})
	}
}
