package tollgate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// WithSlot runs a long job in one of a few slots: it waits up to a minute
// for a slot, keeps the lease alive while the job runs, and gives the slot
// back when it returns.
func ExampleLimiter_WithSlot() {
	ctx := context.Background()
	lim, _ := tollgate.New(memory.New())
	clusters := tollgate.WithLimits(tollgate.ConcurrencyLimit("clusters", 3))

	err := lim.WithSlot(ctx, "team-data", "emr", tollgate.Consume{"clusters": 1}, time.Minute,
		func(ctx context.Context) error {
			// ... run the job; ctx ends if the slot is lost ...
			return nil
		}, clusters)
	fmt.Println("job:", err)

	sts, _ := lim.Available(ctx, "team-data", "emr", clusters)
	fmt.Println("free slots:", sts[0].Available)
	// Output:
	// job: <nil>
	// free slots: 3
}
