package memory

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store"
)

// TestExpiredUsageIsDeleted checks that snapshots past their retention
// leave memory once newer usage is written, and that snapshots still
// within it stay.
func TestExpiredUsageIsDeleted(t *testing.T) {
	ctx := context.Background()
	hour := time.Hour.Milliseconds()
	t0, retention := store.Hourly.Start(1_700_000_000_000), 90*24*hour
	clk := clock.NewFake(time.UnixMilli(t0))
	s := New(WithClock(clk))
	add := func(start int64, entity string) {
		t.Helper()
		inc := store.UsageIncrement{
			Key:      store.UsageKey{Entity: entity, Resource: "llm", Window: store.Hourly, Start: start},
			Consumed: map[string]int64{"tpm": 1000}, Events: 1, Source: "s", Seq: "1", Expires: start + retention,
		}
		if err := s.AddUsage(ctx, "ns", []store.UsageIncrement{inc}); err != nil {
			t.Fatal(err)
		}
	}
	const old = 1000
	for i := range old {
		add(t0, fmt.Sprintf("old-%d", i))
	}
	// Written just before the old ones expire: they must survive.
	add(t0+retention-hour, "recent")
	// After the retention, new usage makes the table sweep.
	clk.Advance(time.Duration(retention) * time.Millisecond)
	for i := range old {
		add(t0+retention, fmt.Sprintf("new-%d", i))
	}
	s.usage.mu.Lock()
	n := len(s.usage.snaps)
	s.usage.mu.Unlock()
	if n > old+1 {
		t.Errorf("%d snapshots held, want at most %d: expired ones were kept", n, old+1)
	}
	got, err := s.ListUsage(ctx, "ns", store.UsageQuery{Entity: "recent", Window: store.Hourly, From: 0, To: t0 + 2*retention})
	if err != nil || len(got) != 1 {
		t.Errorf("the unexpired snapshot: %+v, %v", got, err)
	}
}
