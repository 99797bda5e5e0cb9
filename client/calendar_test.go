package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/calendar"
	"github.com/tollgate-rl/tollgate/client"
)

// A calendar quota through the client: stored and read back as a quota
// (its window kept), every status the client decodes (a grant's, a
// lease's, Available's, a refusal's) carries ResetsAt at the month's
// end, other limits none, and a refusal waits exactly to the boundary.
func TestCalendarQuotaStatusesCarryResetsAt(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	ctx := context.Background()
	e.clk.Set(time.Date(2026, 11, 28, 21, 0, 0, 0, time.UTC))
	december := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	month := calendar.Window{Unit: calendar.Month, Zone: "UTC"}
	quota := tollgate.CalendarQuota("tok", 1000, month)

	scope := tollgate.Scope{Resource: "llm"}
	must(t, "SetLimits", c.SetLimits(ctx, scope, tollgate.Config{Limits: []tollgate.Limit{quota, tollgate.PerMinute("rpm", 100)}}))
	cfg, err := c.GetLimits(ctx, scope)
	must(t, "GetLimits", err)
	if len(cfg.Limits) != 2 || cfg.Limits[0].Window != month || cfg.Limits[0].String() != "tok:1000/month@UTC" {
		t.Fatalf("GetLimits = %+v, want the quota tok:1000/month@UTC first", cfg.Limits)
	}

	// resetsAt checks the statuses: tok resets at December, rpm never.
	resetsAt := func(what string, ss []tollgate.Status) {
		t.Helper()
		for _, s := range ss {
			var want time.Time
			if s.Limit == "tok" {
				want = december
			}
			if !s.ResetsAt.Equal(want) {
				t.Errorf("%s: %s ResetsAt = %v, want %v", what, s.Limit, s.ResetsAt, want)
			}
		}
	}
	g, err := c.AcquireAndCommit(ctx, "key-1", "llm", tollgate.Consume{"tok": 900, "rpm": 1})
	must(t, "AcquireAndCommit", err)
	if len(g.Statuses) != 2 {
		t.Fatalf("grant statuses = %+v, want 2", g.Statuses)
	}
	resetsAt("grant", g.Statuses)
	le, err := c.Acquire(ctx, "key-1", "llm", tollgate.Consume{"tok": 50})
	must(t, "Acquire", err)
	resetsAt("lease", le.Statuses())
	must(t, "Commit", le.Commit(ctx))
	av, err := c.Available(ctx, "key-1", "llm")
	must(t, "Available", err)
	resetsAt("available", av)

	_, err = c.Acquire(ctx, "key-1", "llm", tollgate.Consume{"tok": 100})
	var ex *tollgate.RateLimitExceeded
	if !errors.As(err, &ex) {
		t.Fatalf("past the quota: err = %v (%T), want *RateLimitExceeded", err, err)
	}
	if wait := december.Sub(e.clk.Now()); ex.RetryAfter != wait {
		t.Errorf("RetryAfter = %v, want %v (to the month's end)", ex.RetryAfter, wait)
	}
	resetsAt("refusal", ex.Statuses)
	d, err := c.TimeUntilAvailable(ctx, "key-1", "llm", tollgate.Consume{"tok": 100})
	must(t, "TimeUntilAvailable", err)
	if d != 51*time.Hour {
		t.Errorf("TimeUntilAvailable = %v, want 51h", d)
	}

	// A per-call quota in another zone: the day ends at Berlin's midnight.
	berlin := client.WithLimits(tollgate.CalendarQuota("d", 3, calendar.Window{Unit: calendar.Day, Zone: "Europe/Berlin"}))
	av, err = c.Available(ctx, "key-2", "llm", berlin)
	must(t, "Available (Berlin)", err)
	if want := time.Date(2026, 11, 28, 23, 0, 0, 0, time.UTC); len(av) != 1 || !av[0].ResetsAt.Equal(want) {
		t.Errorf("Berlin day quota = %+v, want ResetsAt %v", av, want)
	}
}
