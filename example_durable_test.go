package tollgate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/reconcile"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// A concurrency slot is a durable lease: its record is in the store, so
// another process (here a second limiter) can resume it by id and end it,
// and a reconciler takes it back if nobody ends it before it expires.
func ExampleLimiter_ResumeLease() {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	st := memory.New()
	worker, _ := tollgate.New(st, tollgate.WithClock(clk))
	other, _ := tollgate.New(st, tollgate.WithClock(clk))
	limits := tollgate.WithLimits(tollgate.ConcurrencyLimit("jobs", 2))

	lease, _ := worker.Acquire(ctx, "team-a", "gpu", tollgate.Consume{"jobs": 1}, limits, tollgate.WithLeaseTTL(time.Minute))
	fmt.Println("expires:", lease.ExpiresAt().UTC().Format(time.Kitchen))
	lease.Extend(ctx, 10*time.Minute) // the job runs long
	fmt.Println("extended to:", lease.ExpiresAt().UTC().Format(time.Kitchen))

	resumed, _ := other.ResumeLease(ctx, lease.ID())
	resumed.Commit(ctx)
	var ended *tollgate.LeaseEndedError
	if errors.As(lease.Commit(ctx), &ended) {
		fmt.Println("the worker's commit: the lease was", ended.How)
	}

	// A holder that never ends its lease: after the expiry a reconciler
	// gives the slot back.
	worker.Acquire(ctx, "team-a", "gpu", tollgate.Consume{"jobs": 1}, limits, tollgate.WithLeaseTTL(time.Minute))
	clk.Advance(2 * time.Minute)
	r, _ := reconcile.New(st, reconcile.WithClock(clk))
	n, _ := r.Once(ctx)
	sts, _ := worker.Available(ctx, "team-a", "gpu", limits)
	fmt.Printf("reclaimed %d; %s: %d of %d\n", n, sts[0].Limit, sts[0].Available, sts[0].Capacity)
	// Output:
	// expires: 9:01AM
	// extended to: 9:10AM
	// the worker's commit: the lease was committed
	// reclaimed 1; jobs: 2 of 2
}

// When a vendor answers 429 with its own retry-after, Penalize empties the
// limit for every process until then.
func ExampleLimiter_Penalize() {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	st := memory.New()
	lim, _ := tollgate.New(st, tollgate.WithClock(clk))
	adm, _ := tollgate.NewAdmin(st, tollgate.WithClock(clk))
	adm.SetLimits(ctx, tollgate.ResourceScope("openai"), tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 600)}})

	err := lim.Penalize(ctx, "key-1", "openai", clk.Now().Add(30*time.Second), "openai said 429, retry-after 30",
		[]string{"rpm"}, tollgate.WithPrincipal("gateway"))
	fmt.Println("penalized:", err == nil)
	_, err = lim.Acquire(ctx, "key-1", "openai", tollgate.Consume{"rpm": 1})
	var denied *tollgate.RateLimitExceeded
	if errors.As(err, &denied) {
		fmt.Println("denied, retry after", denied.RetryAfter)
	}
	// Output:
	// penalized: true
	// denied, retry after 30.1s
}
