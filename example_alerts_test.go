package tollgate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// A configuration's alert thresholds raise one alert per upward crossing;
// the limiter counts each limit's decisions, and names the entities
// refused most.
func ExampleWithAlerts() {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	st := memory.New()
	adm, _ := tollgate.NewAdmin(st, tollgate.WithClock(clk))
	adm.SetLimits(ctx, tollgate.ResourceScope("api"), tollgate.Config{
		Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 10)}, AlertAt: []float64{0.8, 1}})
	// The function must not block: a server queues the alert for its webhook.
	lim, _ := tollgate.New(st, tollgate.WithClock(clk), tollgate.WithAlerts(func(a tollgate.Alert) {
		fmt.Printf("alert: %s %s.%s crossed %v (use %.1f)\n", a.Entity, a.Resource, a.Limit, a.Threshold, a.Use)
	}))
	for _, n := range []int64{5, 4, 1, 3} { // 0.5, 0.9, 1.0, then refused
		if le, err := lim.Acquire(ctx, "org-1", "api", tollgate.Consume{"rpm": n}); err == nil {
			le.Commit(ctx)
		}
	}
	for _, d := range lim.Stats().Decisions {
		fmt.Printf("%s.%s: %d granted, %d denied, %d near the limit\n", d.Resource, d.Limit, d.Granted, d.Denied, d.NearLimit)
	}
	for _, e := range tollgate.TopDenied(lim.Stats().TopDenied, 5, "api", "") {
		fmt.Printf("refused most: %s by %s.%s, %d times\n", e.Entity, e.Resource, e.Limit, e.Count)
	}
	// Output:
	// alert: org-1 api.rpm crossed 0.8 (use 0.9)
	// alert: org-1 api.rpm crossed 1 (use 1.0)
	// api.rpm: 3 granted, 1 denied, 3 near the limit
	// refused most: org-1 by api.rpm, 1 times
}
