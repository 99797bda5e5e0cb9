package tollgate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// A limiter with the deny cache answers a client that keeps asking once
// refused from memory, with the store's refusal, until refill could cover
// the request (or the max age passes): on DynamoDB each of those refusals
// would cost a read.
func ExampleWithDenyCache() {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	lim, _ := tollgate.New(memory.New(), tollgate.WithClock(clk), tollgate.WithDenyCache(tollgate.DefaultDenyCacheMaxAge))
	rpm := tollgate.WithLimits(tollgate.PerMinute("rpm", 2))
	one := tollgate.Consume{"rpm": 1}

	for i := range 5 {
		_, err := lim.AcquireAndCommit(ctx, "key-1", "api", one, rpm)
		fmt.Printf("acquire %d: %v\n", i+1, err)
	}
	fmt.Println("refusals from memory:", lim.Stats().Deny.Served)

	clk.Advance(30 * time.Second) // refill covers one token: the store grants it
	_, err := lim.AcquireAndCommit(ctx, "key-1", "api", one, rpm)
	fmt.Println("after 30s:", err)
	// Output:
	// acquire 1: <nil>
	// acquire 2: <nil>
	// acquire 3: rate limited: rpm of key-1/api: requested 1, available 0; retry after 30s
	// acquire 4: rate limited: rpm of key-1/api: requested 1, available 0; retry after 30s
	// acquire 5: rate limited: rpm of key-1/api: requested 1, available 0; retry after 30s
	// refusals from memory: 2
	// after 30s: <nil>
}
