package limitertest

import (
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
)

// A stored configuration's shadow limit is debited like the others and
// never denies: an acquire it cannot cover is granted (its status
// exceeded and in shadow), one another limit refuses is refused for that
// limit alone, an amount above its capacity is no error, and the limiter
// counts what it would have denied. Enforced again, the limit denies from
// the balance the shadow debits left.
func testLimiterShadow(t *testing.T, e *env) {
	cfg := tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 2), tollgate.PerMinute("tpm", 100)}, Shadow: []string{"tpm"}}
	if err := e.admin().SetLimits(e.ctx, tollgate.ResourceScope("api"), cfg); err != nil {
		t.Fatalf("SetLimits: %v", err)
	}
	lim := e.limiter()
	le := e.acquire(lim, "k", "api", tollgate.Consume{"rpm": 1, "tpm": 80})
	if s := status(t, le.Statuses(), "k", "tpm"); s.Exceeded || !s.Shadow || s.Available != 20 {
		t.Errorf("covered shadow limit: %+v, want in shadow, not exceeded, 20 left", s)
	}
	le = e.acquire(lim, "k", "api", tollgate.Consume{"rpm": 1, "tpm": 80})
	sts := le.Statuses()
	if s := status(t, sts, "k", "tpm"); !s.Exceeded || !s.Shadow || s.Available != -60 || s.RetryAfter <= 0 {
		t.Errorf("uncovered shadow limit, granted: %+v, want exceeded in shadow, -60 left, a retry-after", s)
	}
	if s := status(t, sts, "k", "rpm"); s.Exceeded || s.Shadow {
		t.Errorf("enforced limit: %+v, want neither exceeded nor in shadow", s)
	}
	wantShadowCount(t, lim, "api", "tpm", 1)

	// rpm refuses: the refusal is rpm's; tpm says it would have too.
	ex := e.denied(lim, "k", "api", tollgate.Consume{"rpm": 1, "tpm": 1})
	if v := ex.Violations(); len(v) != 1 || v[0].Limit != "rpm" {
		t.Errorf("violations %+v, want rpm's alone", v)
	}
	if s := status(t, ex.Statuses, "k", "tpm"); !s.Exceeded || !s.Shadow {
		t.Errorf("shadow limit in a refusal: %+v, want exceeded in shadow", s)
	}
	if rpm := status(t, ex.Statuses, "k", "rpm"); ex.RetryAfter != rpm.RetryAfter {
		t.Errorf("refusal retry-after %v, want rpm's %v (a shadow limit's wait never counts)", ex.RetryAfter, rpm.RetryAfter)
	}
	wantShadowCount(t, lim, "api", "tpm", 2)

	// Above the shadow limit's capacity: no error, granted, debited.
	e.clk.Advance(time.Minute)
	le = e.acquire(lim, "k", "api", tollgate.Consume{"rpm": 1, "tpm": 500})
	if s := status(t, le.Statuses(), "k", "tpm"); !s.Exceeded || s.Available != -460 {
		t.Errorf("shadow limit asked above its capacity: %+v, want exceeded, -460 left (-60 + 100 refilled - 500)", s)
	}
	wantShadowCount(t, lim, "api", "tpm", 3)

	// Enforced: the debt the shadow debits left denies.
	cfg.Shadow = nil
	if err := e.admin().SetLimits(e.ctx, tollgate.ResourceScope("api"), cfg); err != nil {
		t.Fatalf("SetLimits: %v", err)
	}
	ex = e.denied(lim, "k", "api", tollgate.Consume{"tpm": 1})
	if v := ex.Violations(); len(v) != 1 || v[0].Limit != "tpm" || v[0].Shadow {
		t.Errorf("violations once enforced %+v, want tpm's, not in shadow", v)
	}
}

// wantShadowCount requires lim's count of would-be denials of limit of
// resource to be want.
func wantShadowCount(t *testing.T, lim *tollgate.Limiter, resource, limit string, want uint64) {
	t.Helper()
	for _, c := range lim.Stats().Shadow {
		if c.Resource == resource && c.Limit == limit {
			if c.Count != want {
				t.Errorf("shadow denials of %s.%s = %d, want %d", resource, limit, c.Count, want)
			}
			return
		}
	}
	if want != 0 {
		t.Errorf("no shadow denials of %s.%s counted, want %d", resource, limit, want)
	}
}
