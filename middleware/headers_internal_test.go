package middleware

import (
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/model"
)

// The RateLimit header fields: each limit by its policy name (never the
// entity: the limit's name, NAME.N on the Nth cascade ancestor, or what
// WithPolicyName says), its quota and window (w, seconds; none for a limit
// time does not refill), what remains and when; a limit in shadow is not
// in force for the client, and is left out.
func TestRateLimitHeaders(t *testing.T) {
	rpm := model.Status{Entity: "sk-secret", Limit: "rpm", Capacity: 3, Available: 2, Window: time.Minute}
	for _, c := range []struct {
		name          string
		opts          []Option
		sts           []model.Status
		policy, state string
	}{
		{name: "a rate limit", sts: []model.Status{rpm}, policy: `"rpm";q=3;w=60`, state: `"rpm";r=2`},
		{name: "shadow left out", sts: []model.Status{rpm,
			{Entity: "sk-secret", Limit: "tpm", Capacity: 100, Available: -50, Exceeded: true, Shadow: true, RetryAfterMS: 30_000, Window: time.Minute}},
			policy: `"rpm";q=3;w=60`, state: `"rpm";r=2`},
		{name: "shadow alone", sts: []model.Status{{Entity: "sk-secret", Limit: "tpm", Capacity: 100, Shadow: true}}},
		{name: "short, in debt", sts: []model.Status{{Entity: "sk-secret", Limit: "tpm", Capacity: 1000, Available: -5, Exceeded: true,
			RetryAfter: 1500 * time.Millisecond, RetryAfterMS: 1500, Window: time.Hour}},
			policy: `"tpm";q=1000;w=3600`, state: `"tpm";r=0;t=2`},
		{name: "concurrency has no window", sts: []model.Status{{Entity: "sk-secret", Limit: "inflight", Kind: model.Concurrency, Capacity: 2, Available: 1}},
			policy: `"inflight";q=2`, state: `"inflight";r=1`},
		{name: "calendar quota", sts: []model.Status{{Entity: "sk-secret", Limit: "d", Capacity: 5, Available: 5, Window: 23 * time.Hour,
			ResetsAt: time.Unix(1, 0)}}, policy: `"d";q=5;w=82800`, state: `"d";r=5`},
		{name: "window rounded up", sts: []model.Status{{Entity: "sk-secret", Limit: "l", Capacity: 1, Available: 1, Window: 334 * time.Millisecond}},
			policy: `"l";q=1;w=1`, state: `"l";r=1`},
		{name: "cascade levels", sts: []model.Status{rpm,
			{Entity: "org-7", Limit: "rpm", Capacity: 50, Available: 40, Window: time.Minute},
			{Entity: "acct-1", Limit: "rpm", Capacity: 500, Available: 400, Window: time.Minute},
			{Entity: "org-7", Limit: "tpm", Capacity: 9, Available: 9, Window: time.Minute}},
			policy: `"rpm";q=3;w=60, "rpm.1";q=50;w=60, "rpm.2";q=500;w=60, "tpm.1";q=9;w=60`,
			state:  `"rpm";r=2, "rpm.1";r=40, "rpm.2";r=400, "tpm.1";r=9`},
		{name: "named by WithPolicyName", opts: []Option{WithPolicyName(func(s model.Status, level int) string {
			return "api-" + s.Limit + "-" + strconv.Itoa(level)
		})}, sts: []model.Status{rpm, {Entity: "org-7", Limit: "rpm", Capacity: 50, Available: 40, Window: time.Minute}},
			policy: `"api-rpm-0";q=3;w=60, "api-rpm-1";q=50;w=60`, state: `"api-rpm-0";r=2, "api-rpm-1";r=40`},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := newOptions(c.opts)
			h := http.Header{}
			o.setRateLimitHeaders(h, "sk-secret", c.sts)
			if p, rl := h.Get("RateLimit-Policy"), h.Get("RateLimit"); p != c.policy || rl != c.state {
				t.Errorf("RateLimit-Policy %q, RateLimit %q; want %q, %q", p, rl, c.policy, c.state)
			}
			if c.policy == "" && len(h) != 0 {
				t.Errorf("headers for no limit in force: %v", h)
			}
		})
	}
}

// The 429 body is the server's rate_limited body without the entities:
// each limit by its policy name, shadow limits left out, the message
// naming the primary violation by its policy name too.
func TestRateLimitedBody(t *testing.T) {
	ex := &model.RateLimitExceeded{RetryAfter: 20 * time.Second, Statuses: []model.Status{
		{Entity: "sk-secret", Resource: "api", Limit: "rpm", Capacity: 3, Available: 2, Requested: 1, Window: time.Minute},
		{Entity: "org-7", Resource: "api", Limit: "rpm", Capacity: 5, Available: 0, Requested: 1, Exceeded: true,
			RetryAfter: 20 * time.Second, RetryAfterMS: 20_000, Window: time.Minute},
		{Entity: "sk-secret", Resource: "api", Limit: "tpm", Capacity: 5, Available: 0, Requested: 9, Exceeded: true, Shadow: true},
	}}
	o := newOptions(nil)
	body := o.rateLimitedBody("sk-secret", ex)
	if body.Code != "rate_limited" || body.RetryAfterMS != 20_000 ||
		body.Message != "rate limited: rpm.1: requested 1, available 0; retry after 20s" {
		t.Errorf("body %+v", body)
	}
	var names []string
	for _, l := range body.Limits {
		if l.Entity != "" {
			t.Errorf("limit %+v names its entity", l)
		}
		names = append(names, l.Limit)
	}
	if !slices.Equal(names, []string{"rpm", "rpm.1"}) || body.Limits[1].WindowMS != 60_000 || !body.Limits[1].Exceeded {
		t.Errorf("limits %+v, want rpm and rpm.1 (exceeded), not the shadow tpm", body.Limits)
	}
}
