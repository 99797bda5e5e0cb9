package faultsuite

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/internal/faultproxy"
)

// TestAbandonedSlotsComeBack: a concurrency slot's acquire whose answer is
// lost, through the proxy, to the store's call timeout (docs/semantics.md
// 8): its write lands (the answer held past the timeout), or reaches
// DynamoDB only once the proxy passes again (the request held). Either
// way the limiter finds the record and rolls it back within seconds, not
// at the lease's expiry (5 minutes): the slot is free again.
func TestAbandonedSlotsComeBack(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	abandoned := make(chan tollgate.Abandoned, 4)
	lim, err := tollgate.New(s.store, tollgate.WithOnAbandon(func(a tollgate.Abandoned) { abandoned <- a }))
	if err != nil {
		t.Fatal(err)
	}
	slot := tollgate.ConcurrencyLimit("slots", 1)
	for _, c := range []struct {
		name  string
		fault faultproxy.Mode
	}{
		{"answer-late", faultproxy.Delay(3 * callTimeout)},
		{"request-late", faultproxy.Hang},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			entity := "abandoned-" + c.name
			// Warm: the namespace resolved, the bucket known.
			if _, err := lim.AcquireAndCommit(ctx, entity, resource, tollgate.Consume{"slots": 1}, tollgate.WithLimits(slot)); err != nil {
				t.Fatal(err)
			}
			s.proxy.Set(c.fault)
			start := time.Now()
			_, err := lim.Acquire(ctx, entity, resource, tollgate.Consume{"slots": 1}, tollgate.WithLimits(slot))
			s.proxy.Set(faultproxy.Pass)
			if err == nil {
				t.Fatal("Acquire through the fault answered no error")
			}
			select {
			case a := <-abandoned:
				if a.Outcome != tollgate.AbandonEnded || a.Entity != entity {
					t.Fatalf("abandoned %+v, want %s's ended", a, entity)
				}
			case <-time.After(45 * time.Second):
				t.Fatal("no abandonment reported within 45 s")
			}
			took := time.Since(start)
			st, err := s.direct.Available(ctx, entity, resource, tollgate.WithLimits(slot))
			if err != nil || st[0].Available != 1 {
				t.Fatalf("Available: %+v, %v; want the slot back", st, err)
			}
			t.Logf("%s: the slot came back %v after the acquire began", c.name, took.Round(time.Millisecond))
		})
	}
}
