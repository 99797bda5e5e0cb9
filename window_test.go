package tollgate_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// A status's Window is the span its capacity is granted over: the refill
// of a rate limit from empty to full, the current window of a calendar
// quota (23 hours on the day Berlin moves to summer time), nothing for a
// limit that time does not refill.
func TestStatusWindow(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip(err)
	}
	mustParse := func(s string) tollgate.Limit {
		l, err := tollgate.ParseLimit(s)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	dstDay := time.Date(2026, 3, 29, 12, 0, 0, 0, berlin)
	for _, c := range []struct {
		name  string
		limit tollgate.Limit
		at    time.Time
		want  time.Duration
	}{
		{"per minute", tollgate.PerMinute("l", 60), time.Time{}, time.Minute},
		{"per second", tollgate.PerSecond("l", 5), time.Time{}, time.Second},
		{"burst of three periods", tollgate.Limit{Name: "l", Capacity: 30, RefillAmount: 10, RefillPeriod: time.Second}, time.Time{}, 3 * time.Second},
		{"rounded up to the millisecond", tollgate.Limit{Name: "l", Capacity: 1, RefillAmount: 3, RefillPeriod: time.Second}, time.Time{}, 334 * time.Millisecond},
		{"per hour", tollgate.PerHour("l", 1000), time.Time{}, time.Hour},
		{"a day's quota", mustParse("l:3/day@UTC"), time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), 24 * time.Hour},
		{"the day summer time starts", mustParse("l:3/day@Europe/Berlin"), dstDay, 23 * time.Hour},
		{"February's quota", mustParse("l:3/month@UTC"), time.Date(2026, 2, 10, 0, 0, 0, 0, time.UTC), 28 * 24 * time.Hour},
		{"concurrency", tollgate.ConcurrencyLimit("l", 2), time.Time{}, 0},
		{"reserved", tollgate.ReservedLimit("l", 2), time.Time{}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			lim, _, clk := newPair(t, memory.New())
			if !c.at.IsZero() {
				clk.Set(c.at)
			}
			sts, err := lim.Available(context.Background(), "e", "r", tollgate.WithLimits(c.limit))
			if err != nil {
				t.Fatal(err)
			}
			if len(sts) != 1 || sts[0].Window != c.want {
				t.Errorf("statuses %+v, want one of Window %v", sts, c.want)
			}
		})
	}
}
