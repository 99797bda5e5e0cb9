package middleware

import (
	"net/http"
	"testing"

	"github.com/tollgate-rl/tollgate/model"
)

// A limit in shadow is not in force for the client: the RateLimit headers
// leave it out, and say nothing when it is the only one.
func TestRateLimitHeadersLeaveShadowOut(t *testing.T) {
	h := http.Header{}
	setRateLimitHeaders(h, []model.Status{
		{Entity: "a", Limit: "rpm", Capacity: 3, Available: 2},
		{Entity: "a", Limit: "tpm", Capacity: 100, Available: -50, Exceeded: true, Shadow: true, RetryAfterMS: 30_000},
	})
	if p, rl := h.Get("RateLimit-Policy"), h.Get("RateLimit"); p != `"a/rpm";q=3` || rl != `"a/rpm";r=2` {
		t.Errorf("RateLimit-Policy %q, RateLimit %q; want rpm's alone", p, rl)
	}
	h = http.Header{}
	setRateLimitHeaders(h, []model.Status{{Entity: "a", Limit: "tpm", Capacity: 100, Shadow: true}})
	if len(h) != 0 {
		t.Errorf("headers for a shadow limit alone: %v", h)
	}
}
