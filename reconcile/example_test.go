package reconcile_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/reconcile"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// A process crashed holding a slot: once its lease has expired, a
// reconciler gives the slot back. A program using the library without a
// server runs one (go r.Run(ctx)); here, one pass.
func ExampleReconciler() {
	ctx := context.Background()
	st := memory.New()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	slots := tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", 2))

	crashed, _ := tollgate.New(st, tollgate.WithClock(clk))
	_, _ = crashed.Acquire(ctx, "job", "emr", tollgate.Consume{"slots": 1}, slots, tollgate.WithLeaseTTL(time.Minute))
	// ... the process dies without ending its lease ...

	clk.Advance(time.Minute)
	r, _ := reconcile.New(st, reconcile.WithClock(clk))
	n, err := r.Once(ctx)
	fmt.Println("reclaimed:", n, err)

	sts, _ := crashed.Available(ctx, "job", "emr", slots)
	fmt.Println("free slots:", sts[0].Available)
	// Output:
	// reclaimed: 1 <nil>
	// free slots: 2
}
