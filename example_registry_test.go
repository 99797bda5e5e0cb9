package tollgate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// A platform gives each tenant a namespace of a shared store: a Registry
// registers it, a Limiter works in it, and a soft delete makes it refuse
// work until it is recovered or purged.
func ExampleRegistry() {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	st := memory.New()
	reg, _ := tollgate.NewRegistry(st, tollgate.WithRegistryClock(clk))

	if _, err := reg.Register(ctx, "tenant-a"); err != nil {
		fmt.Println(err)
		return
	}
	_, err := reg.Register(ctx, "tenant-a")
	fmt.Println("twice:", errors.Is(err, tollgate.ErrNamespaceExists))

	lim, _ := tollgate.New(st, tollgate.WithNamespace("tenant-a"), tollgate.WithClock(clk))
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 100))
	acquire := func() error {
		le, err := lim.Acquire(ctx, "key-1", "search", tollgate.Consume{"rpm": 1}, limits)
		if err != nil {
			return err
		}
		return le.Commit(ctx)
	}
	fmt.Println("acquire:", acquire())

	_ = reg.Delete(ctx, "tenant-a")
	lim.InvalidateCache() // else the limiter sees the delete within its cache TTL
	fmt.Println("deleted:", errors.Is(acquire(), tollgate.ErrNamespaceDeleted))

	_ = reg.Recover(ctx, "tenant-a")
	lim.InvalidateCache()
	fmt.Println("recovered:", acquire())

	ns, _ := reg.List(ctx)
	for _, n := range ns {
		fmt.Println(n.Name, n.CreatedAt.Format(time.Kitchen), n.Deleted())
	}
	// Output:
	// twice: true
	// acquire: <nil>
	// deleted: true
	// recovered: <nil>
	// tenant-a 9:00AM false
}
