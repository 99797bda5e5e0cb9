package server

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/tollgate-rl/tollgate/api"
)

// The deep-debt probe of issue 21: 10^12 tokens of debt at 1 a second.
// The 429 and /v1/available both say the true wait, about 31,700 years:
// in milliseconds in the body, in whole seconds in Retry-After; not 0 or
// 1, as a wrapped time.Duration made them.
func TestDeepDebtRetryAfter(t *testing.T) {
	e := newEnv(t)
	e.want(http.StatusOK, "PUT", "/v1/limits/resources/api", api.Limits{Limits: []string{"rps:1/sec"}}, nil)
	one := map[string]any{"entity": "key-1", "resource": "api", "consume": map[string]int64{"rps": 1}}
	var acq api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", one, &acq)
	e.want(http.StatusOK, "POST", "/v1/leases/"+acq.LeaseID+"/adjust", api.AdjustRequest{Consume: map[string]int64{"rps": 1_000_000_000_000}}, nil)
	e.want(http.StatusOK, "POST", "/v1/leases/"+acq.LeaseID+"/commit", nil, nil)

	const wantMS int64 = 1_000_000_000_001_000 // (10^12 + 1) tokens at 1 per 1,000 ms
	var er api.Error
	h := e.want(http.StatusTooManyRequests, "POST", "/v1/acquire", one, &er)
	if got, want := h.Get("Retry-After"), strconv.FormatInt(wantMS/1000, 10); got != want {
		t.Errorf("Retry-After = %q, want %q", got, want)
	}
	if er.RetryAfterMS != wantMS || len(er.Limits) != 1 || er.Limits[0].RetryAfterMS != wantMS || er.Waits != "" {
		t.Errorf("429 body = %+v, want retry_after_ms %d", er, wantMS)
	}
	var av api.AvailableResponse
	e.want(http.StatusOK, "GET", "/v1/available?entity=key-1&resource=api&consume=rps:1", nil, &av)
	if av.RetryAfterMS == nil || *av.RetryAfterMS != wantMS {
		t.Errorf("available: retry_after_ms %v, want %d", av.RetryAfterMS, wantMS)
	}
}

// A full concurrency slot held by a lease with an expiry says when it
// expires; a full reserved limit whose reservations never expire sends no
// Retry-After and says it waits for a release.
func TestSlotRetryAfter(t *testing.T) {
	e := newEnv(t)
	slot := map[string]any{"entity": "key-1", "resource": "jobs", "consume": map[string]int64{"inflight": 1},
		"limits": []string{"inflight:1/concurrent"}, "lease_ttl_ms": 60_000}
	e.want(http.StatusOK, "POST", "/v1/acquire", slot, nil)
	var er api.Error
	h := e.want(http.StatusTooManyRequests, "POST", "/v1/acquire", slot, &er)
	if h.Get("Retry-After") != "60" || er.RetryAfterMS != 60_000 || er.Waits != "expiry" || er.Limits[0].Waits != "expiry" {
		t.Errorf("full slot: Retry-After %q, body %+v; want 60 s, the lease's expiry", h.Get("Retry-After"), er)
	}
	var av api.AvailableResponse
	e.want(http.StatusOK, "GET", "/v1/available?entity=key-1&resource=jobs&consume=inflight:1&limits=inflight:1/concurrent", nil, &av)
	if av.RetryAfterMS == nil || *av.RetryAfterMS != 60_000 || av.Waits != "expiry" {
		t.Errorf("available of the full slot: %v, %q; want 60000, expiry", av.RetryAfterMS, av.Waits)
	}

	reserve := map[string]any{"entity": "team-a", "resource": "emr", "id": "j-1", "limits": []string{"clusters:1/reserved"}}
	e.want(http.StatusCreated, "POST", "/v1/reservations", reserve, nil)
	reserve["id"] = "j-2"
	er = api.Error{}
	h = e.want(http.StatusTooManyRequests, "POST", "/v1/reservations", reserve, &er)
	if _, ok := h["Retry-After"]; ok || er.RetryAfterMS != 0 || er.Waits != "release" || er.Limits[0].Waits != "release" {
		t.Errorf("full reserved limit: Retry-After %q, body %+v; want none, a release", h.Get("Retry-After"), er)
	}
}

func TestRetryAfterHeaderDoesNotWrap(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want string
	}{
		{1, "1"},
		{2000, "2"},
		{2001, "3"},
		{16144, "17"},
		{1_000_000_000_001_000, "1000000000001"},
		{1<<63 - 1, "9223372036854776"},
	} {
		if got := retryAfterHeader(tc.ms); got != tc.want {
			t.Errorf("retryAfterHeader(%d) = %q, want %q", tc.ms, got, tc.want)
		}
	}
}
