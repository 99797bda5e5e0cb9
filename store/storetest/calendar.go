package storetest

import (
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/calendar"
	"github.com/tollgate-rl/tollgate/store"
)

func calendarCases() []testCase {
	return []testCase{
		{"QuotaRefillsAtBoundaries", testQuotaRefillsAtBoundaries},
		{"QuotaIsNotARateOfTheSameNumbers", testQuotaIsNotARate},
		{"QuotaPenaltyLastsItsWindow", testQuotaPenalty},
		{"QuotaReset", testQuotaReset},
	}
}

// hourly is a calendar quota of 3 tokens per UTC hour (bucket.Params of
// a quota: its period is one window). T0 is 22:13:20 UTC: the next hour
// begins at T0 + nextHour.
var hourly = bucket.Params{Capacity: 3_000, Amount: 3_000, Period: 1, Window: calendar.Window{Unit: calendar.Hour, Zone: "UTC"}}

const nextHour = 46*60_000 + 40_000

// A calendar quota refills nothing inside its window and its whole amount
// at the boundary, debt carried over; its window is stored with it.
func testQuotaRefillsAtBoundaries(t *testing.T, e *Env) {
	k := Key("q", "api")
	req := e.grant(T0, breq(k, checked("h", hourly, 3_000)))
	e.wantObserved(req, k, "h", bucket.State{Tokens: 3_000})
	if l, _ := e.Limit(k, "h"); l.Params != hourly {
		t.Errorf("stored Params = %+v, want %+v", l.Params, hourly)
	}
	req = e.deny(T0+nextHour-1, breq(k, checked("h", hourly, 1)))
	e.wantObserved(req, k, "h", bucket.State{})
	e.deltas(store.Delta{Key: k, Limit: "h", Amount: 2_000, Params: hourly})
	e.WantTokensAt(k, "h", T0+nextHour-1, -2_000)
	req = e.grant(T0+nextHour, breq(k, checked("h", hourly, 1_000)))
	e.wantObserved(req, k, "h", bucket.State{Tokens: 1_000})
	e.WantTokensAt(k, "h", T0+nextHour+3_599_999, 0)
	e.WantTokensAt(k, "h", T0+nextHour+3_600_000, 3_000)
}

// A rate limit of 3 tokens per millisecond has a quota's numbers
// (capacity, amount, period 1): the store tells them apart by the window,
// in both directions, keeping the balance as any change of parameters
// does.
func testQuotaIsNotARate(t *testing.T, e *Env) {
	k := Key("q", "api")
	perMS := rate(3_000, 3_000, 1)
	e.grant(T0, breq(k, checked("x", perMS, 3_000)))
	// As a quota: adopted with the rate's balance (full again 1 ms
	// later), then not refilled within the hour.
	req := e.grant(T0+5, breq(k, checked("x", hourly, 1)))
	e.wantObserved(req, k, "x", bucket.State{Tokens: 3_000})
	if l, _ := e.Limit(k, "x"); l.Params != hourly {
		t.Errorf("stored Params = %+v, want the quota's %+v", l.Params, hourly)
	}
	req = e.deny(T0+8, breq(k, checked("x", hourly, 3_000)))
	e.wantObserved(req, k, "x", bucket.State{Tokens: 2_999})
	// As a rate again: refilled every millisecond.
	e.grant(T0+9, breq(k, checked("x", perMS, 1)))
	if l, _ := e.Limit(k, "x"); l.Params != perMS {
		t.Errorf("stored Params = %+v, want the rate's %+v", l.Params, perMS)
	}
	req = e.grant(T0+10, breq(k, checked("x", perMS, 3_000)))
	e.wantObserved(req, k, "x", bucket.State{Tokens: 3_000})
}

// A penalty empties a quota until the end of the window that holds its
// end: the quota refills at the next boundary, not before.
func testQuotaPenalty(t *testing.T, e *Env) {
	k := Key("q", "api")
	e.grant(T0, breq(k, checked("h", hourly, 1_000)))
	e.penalize(T0+1_000, T0+60_000, breq(k, checked("h", hourly, 0)))
	req := e.deny(T0+120_000, breq(k, checked("h", hourly, 1)))
	e.wantObserved(req, k, "h", bucket.State{})
	e.deny(T0+nextHour-1, breq(k, checked("h", hourly, 1)))
	e.grant(T0+nextHour, breq(k, checked("h", hourly, 3_000)))
}

// A reset fills a quota at once, in the middle of its window; one given
// new parameters (a quota that was a rate) is filled under them.
func testQuotaReset(t *testing.T, e *Env) {
	k := Key("q", "api")
	e.grant(T0, breq(k, checked("h", hourly, 3_000)))
	e.deltas(store.Delta{Key: k, Limit: "h", Amount: 1_000, Params: hourly})
	if err := e.s.Reset(e.ctx, e.ns, &store.ResetRequest{Now: T0 + 10, Bucket: breq(k, checked("h", hourly, 0))}); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	e.grant(T0+20, breq(k, checked("h", hourly, 3_000)))
	e.deny(T0+30, breq(k, checked("h", hourly, 1)))
	perMS := rate(3_000, 3_000, 1)
	if err := e.s.Reset(e.ctx, e.ns, &store.ResetRequest{Now: T0 + 40, Bucket: breq(k, checked("h", perMS, 0))}); err != nil {
		t.Fatalf("Reset as a rate: %v", err)
	}
	e.grant(T0+50, breq(k, checked("h", perMS, 3_000)))
	e.grant(T0+51, breq(k, checked("h", perMS, 3_000)))
}
