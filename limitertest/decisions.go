package limitertest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
)

// The limiter counts each limit's part in its decisions (granted, denied,
// shadow-denied, near the limit), follows the entities refused most, and
// alerts once per upward crossing of a configuration's thresholds, again
// only after the use fell back below them.
func testLimiterDecisionsAndAlerts(t *testing.T, e *env) {
	cfg := tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 10), tollgate.PerMinute("tpm", 100)},
		Shadow: []string{"tpm"}, AlertAt: []float64{0.5, 1}}
	if err := e.admin().SetLimits(e.ctx, tollgate.ResourceScope("api"), cfg); err != nil {
		t.Fatalf("SetLimits: %v", err)
	}
	var mu sync.Mutex
	var alerts []tollgate.Alert
	lim := e.limiter(tollgate.WithAlerts(func(a tollgate.Alert) {
		mu.Lock()
		defer mu.Unlock()
		alerts = append(alerts, a)
	}))
	start := e.clk.Now()
	type step struct {
		consume tollgate.Consume
		granted bool
		advance time.Duration // before the call
	}
	for i, s := range []step{
		{consume: tollgate.Consume{"rpm": 4, "tpm": 150}, granted: true},           // rpm 0.4; tpm in shadow 1.5: alerts 0.5 and 1
		{consume: tollgate.Consume{"rpm": 2}, granted: true},                       // rpm 0.6: alert 0.5
		{consume: tollgate.Consume{"rpm": 3}, granted: true},                       // 0.9: near
		{consume: tollgate.Consume{"rpm": 2}},                                      // refused, 1.1: alert 1, near
		{consume: tollgate.Consume{"rpm": 1}, granted: true},                       // 1.0: fired already; near
		{consume: tollgate.Consume{"rpm": 1}, granted: true, advance: time.Minute}, // 0.1: both re-armed
		{consume: tollgate.Consume{"rpm": 5}, granted: true},                       // 0.6: alert 0.5 again
	} {
		e.clk.Advance(s.advance)
		le, err := lim.Acquire(e.ctx, "k", "api", s.consume)
		if (err == nil) != s.granted {
			t.Fatalf("step %d: Acquire(%v) = %v, want granted %v", i, s.consume, err, s.granted)
		}
		if le != nil {
			e.commit(le)
		}
	}
	want := []tollgate.Alert{
		{Limit: "tpm", Threshold: 0.5, Use: 1.5, At: start},
		{Limit: "tpm", Threshold: 1, Use: 1.5, At: start},
		{Limit: "rpm", Threshold: 0.5, Use: 0.6, At: start},
		{Limit: "rpm", Threshold: 1, Use: 1.1, At: start},
		{Limit: "rpm", Threshold: 0.5, Use: 0.6, At: start.Add(time.Minute)},
	}
	mu.Lock()
	got := slices.Clone(alerts)
	mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("alerts %+v, want %d: %+v", got, len(want), want)
	}
	for i, w := range want {
		g := got[i]
		if g.Namespace != lim.Namespace() || g.Entity != "k" || g.Resource != "api" || g.Limit != w.Limit ||
			g.Threshold != w.Threshold || g.Use < w.Use-1e-9 || g.Use > w.Use+1e-9 || !g.At.Equal(w.At.Truncate(time.Millisecond)) {
			t.Errorf("alert %d = %+v, want %s at %v, use %v, at %v", i, g, w.Limit, w.Threshold, w.Use, w.At)
		}
	}

	wantDecisions(t, lim, tollgate.LimitDecisions{Resource: "api", Limit: "rpm", Granted: 6, Denied: 1, NearLimit: 3})
	wantDecisions(t, lim, tollgate.LimitDecisions{Resource: "api", Limit: "tpm", ShadowDenied: 1, NearLimit: 1})
	top := lim.Stats().TopDenied
	if len(top) != 1 || top[0] != (tollgate.DeniedEntity{Entity: "k", Resource: "api", Limit: "rpm", Count: 1}) {
		t.Errorf("TopDenied = %+v, want k's refusal by api.rpm alone", top)
	}
	if top := tollgate.TopDenied(lim.Stats().TopDenied, 10, "api", "tpm"); len(top) != 0 {
		t.Errorf("TopDenied of api.tpm = %+v, want none (shadow refusals are not refusals)", top)
	}
}

// A reservation is one decision: its limits, a shadow one's would-be
// refusal included, count once (Reserve acquires through the durable
// path, which must not count them again).
func testLimiterReservationDecisions(t *testing.T, e *env) {
	cfg := tollgate.Config{Limits: []tollgate.Limit{tollgate.ReservedLimit("clusters", 5), tollgate.PerMinute("launches", 1)},
		Shadow: []string{"launches"}}
	if err := e.admin().SetLimits(e.ctx, tollgate.ResourceScope("emr"), cfg); err != nil {
		t.Fatalf("SetLimits: %v", err)
	}
	lim := e.limiter()
	for _, id := range []string{"j-1", "j-2"} { // the second launch is one too many, in shadow
		if _, err := lim.Reserve(e.ctx, "team", "emr", id, tollgate.Consume{"clusters": 1, "launches": 1}); err != nil {
			t.Fatalf("Reserve %s: %v", id, err)
		}
	}
	wantShadowCount(t, lim, "emr", "launches", 1)
	wantDecisions(t, lim, tollgate.LimitDecisions{Resource: "emr", Limit: "clusters", Granted: 2})
	wantDecisions(t, lim, tollgate.LimitDecisions{Resource: "emr", Limit: "launches", Granted: 1, ShadowDenied: 1, NearLimit: 2})
}

// wantDecisions requires lim's decision counts of want's resource and
// limit to be want's.
func wantDecisions(t *testing.T, lim *tollgate.Limiter, want tollgate.LimitDecisions) {
	t.Helper()
	for _, c := range lim.Stats().Decisions {
		if c.Resource == want.Resource && c.Limit == want.Limit {
			if c != want {
				t.Errorf("decisions = %+v, want %+v", c, want)
			}
			return
		}
	}
	t.Errorf("no decisions of %s.%s counted, want %+v", want.Resource, want.Limit, want)
}
