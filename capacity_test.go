package tollgate_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

func TestCapacity(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	st := memory.New()
	lim, err := tollgate.New(st, tollgate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	adm, err := tollgate.NewAdmin(st, tollgate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 60), tollgate.ConcurrencyLimit("inflight", 4))
	for i, key := range []string{"a", "b", "c"} {
		if _, err := lim.Acquire(ctx, key, "llm", tollgate.Consume{"rpm": int64(10 * (i + 1)), "inflight": 1}, limits); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lim.Acquire(ctx, "x", "other", tollgate.Consume{"rpm": 1}, limits); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second) // 10 rpm tokens back in each bucket
	got, err := adm.Capacity(ctx, "llm")
	if err != nil {
		t.Fatal(err)
	}
	if got.Entities != 3 || len(got.Limits) != 2 {
		t.Fatalf("capacity %+v", got)
	}
	inflight, rpm := got.Limits[0], got.Limits[1]
	// rpm: 3 x 60 capacity; balances 50+10, 40+10, 30+10 = 150.
	if rpm.Limit != "rpm" || rpm.Capacity != 180 || rpm.Available != 150 || math.Abs(rpm.Utilisation-1.0/6) > 1e-9 {
		t.Errorf("rpm %+v", rpm)
	}
	if inflight.Limit != "inflight" || inflight.Kind != tollgate.Concurrency || inflight.Capacity != 12 || inflight.Available != 9 {
		t.Errorf("inflight %+v", inflight)
	}
	if _, err := adm.Capacity(ctx, "no such/res ource"); !errors.Is(err, tollgate.ErrInvalid) {
		t.Errorf("bad resource: %v", err)
	}
	plain, _ := tollgate.NewAdmin(struct{ store.Store }{memory.New()})
	if _, err := plain.Capacity(ctx, "llm"); !errors.Is(err, tollgate.ErrCapacityUnsupported) {
		t.Errorf("a store that cannot list: %v", err)
	}
}
