package limitertest

import (
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
)

// berlin returns the instant of a Berlin wall-clock time.
func berlin(t *testing.T, s string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A calendar quota, stored, admits its amount per window of its zone's
// calendar: nothing comes back inside the window, all of it at the
// boundary (the spring change's day lasts 23 hours), a refusal waits
// exactly until the boundary that brings enough, its status says when the
// window resets, and debt is carried into the next window.
func testLimiterCalendar(t *testing.T, e *env) {
	quota, err := tollgate.ParseLimit("d:3/day@Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	cfg := tollgate.Config{Limits: []tollgate.Limit{quota, tollgate.PerMinute("rpm", 100)}}
	if err := e.admin().SetLimits(e.ctx, tollgate.ResourceScope("api"), cfg); err != nil {
		t.Fatalf("SetLimits: %v", err)
	}
	got, err := e.admin().GetLimits(e.ctx, tollgate.ResourceScope("api"))
	if err != nil || len(got.Limits) != 2 || got.Limits[0] != quota {
		t.Fatalf("GetLimits = %+v, %v; want the quota %v back", got, err, quota)
	}
	lim := e.limiter()
	e.clk.Set(berlin(t, "2026-03-28 12:00"))
	midnight := berlin(t, "2026-03-29 00:00")
	for i := range 3 {
		le := e.acquire(lim, "k", "api", tollgate.Consume{"d": 1, "rpm": 1})
		if s := status(t, le.Statuses(), "k", "d"); s.Available != int64(2-i) || !s.ResetsAt.Equal(midnight) {
			t.Errorf("grant %d: %+v, want %d left, resets at %v", i, s, 2-i, midnight)
		}
	}
	ex := e.denied(lim, "k", "api", tollgate.Consume{"d": 1})
	if want := 12 * time.Hour; ex.RetryAfter != want {
		t.Errorf("refused at noon: retry after %v, want %v (to midnight)", ex.RetryAfter, want)
	}
	e.clk.Set(midnight.Add(-time.Millisecond))
	e.denied(lim, "k", "api", tollgate.Consume{"d": 1})
	e.clk.Set(midnight)
	e.wantAvailable(lim, "k", "api", "d", 3)

	// Into debt (an adjustment is never refused): 3 taken, 4 more owed.
	le := e.acquire(lim, "k", "api", tollgate.Consume{"d": 3})
	if err := le.Adjust(e.ctx, tollgate.Consume{"d": 4}); err != nil {
		t.Fatalf("Adjust: %v", err)
	}
	if err := le.Commit(e.ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	e.wantAvailable(lim, "k", "api", "d", -4)
	// The day of the spring change lasts 23 hours; two boundaries repay
	// the debt and bring 2 tokens: a request of 2 waits for both.
	ex = e.denied(lim, "k", "api", tollgate.Consume{"d": 2})
	if want := berlin(t, "2026-03-31 00:00").Sub(midnight); ex.RetryAfter != want || want != 47*time.Hour {
		t.Errorf("refused in debt: retry after %v, want %v (two midnights, 47 hours)", ex.RetryAfter, want)
	}
	e.clk.Set(berlin(t, "2026-03-30 00:00"))
	e.wantAvailable(lim, "k", "api", "d", -1)
	e.clk.Set(berlin(t, "2026-03-31 00:00"))
	e.acquire(lim, "k", "api", tollgate.Consume{"d": 2})
	e.wantAvailable(lim, "k", "api", "d", 0)
	// Many windows later the quota is full: at most its amount.
	e.clk.Set(berlin(t, "2026-06-01 09:00"))
	e.wantAvailable(lim, "k", "api", "d", 3)
}

// A month quota given with the call: a grant's status says when the
// month ends, a refusal waits until the 1st.
func testLimiterCalendarPerCall(t *testing.T, e *env) {
	quota, err := tollgate.ParseLimit("tok:1000/month@UTC")
	if err != nil {
		t.Fatal(err)
	}
	lim := e.limiter()
	e.clk.Set(time.Date(2026, 2, 27, 18, 0, 0, 0, time.UTC))
	march := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	le := e.acquire(lim, "k", "llm", tollgate.Consume{"tok": 900}, tollgate.WithLimits(quota))
	if s := status(t, le.Statuses(), "k", "tok"); s.Available != 100 || !s.ResetsAt.Equal(march) {
		t.Errorf("grant: %+v, want 100 left, resets at %v", s, march)
	}
	ex := e.denied(lim, "k", "llm", tollgate.Consume{"tok": 101}, tollgate.WithLimits(quota))
	if want := march.Sub(e.clk.Now()); ex.RetryAfter != want {
		t.Errorf("refusal: retry after %v, want %v", ex.RetryAfter, want)
	}
	e.clk.Set(march)
	e.acquire(lim, "k", "llm", tollgate.Consume{"tok": 1000}, tollgate.WithLimits(quota))
}
