package rls_test

import (
	"context"
	"fmt"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/rls"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// A service that allows two requests a second per API key. In a server,
// register it on a gRPC server with Register and point Envoy's ratelimit
// filter at that port; here it is called directly.
func ExampleNew() {
	cfg, err := rls.ParseConfig([]byte(`
domains:
  - domain: edge
    descriptors:
      - key: api_key
        entity: "key-{value}"
        resource: http
        limits: ["rps:2/sec"]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lim, err := tollgate.New(memory.New(), tollgate.WithClock(clk))
	if err != nil {
		fmt.Println(err)
		return
	}
	svc := rls.New(cfg, func(context.Context, string) (*tollgate.Limiter, error) { return lim, nil })

	req := &pb.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "api_key", Value: "k1"}},
	}}}
	for range 3 {
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			fmt.Println(err)
			return
		}
		st := resp.Statuses[0]
		fmt.Println(resp.OverallCode, st.LimitRemaining, st.DurationUntilReset.AsDuration())
	}
	// Output:
	// OK 1 0s
	// OK 0 0s
	// OVER_LIMIT 0 500ms
}
