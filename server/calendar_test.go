package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/api"
)

// A calendar quota over HTTP: stored and read back in its text form, its
// statuses carry resets_at_ms (in the fast writer's bodies and the
// availability's alike), a refusal waits exactly to the boundary and says
// so in Retry-After, and an unknown zone is a 400 naming it.
func TestCalendarQuotaOverHTTP(t *testing.T) {
	e := newEnv(t)
	e.clk.Set(time.Date(2026, 11, 28, 21, 0, 0, 0, time.UTC))
	december := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	e.want(http.StatusOK, "PUT", "/v1/limits/resources/llm", api.Limits{Limits: []string{"tok:1000/month@UTC"}}, nil)
	var got api.Limits
	e.want(http.StatusOK, "GET", "/v1/limits/resources/llm", nil, &got)
	if len(got.Limits) != 1 || got.Limits[0] != "tok:1000/month@UTC" {
		t.Errorf("GET limits = %v", got.Limits)
	}
	body := map[string]any{"entity": "key-1", "resource": "llm", "consume": map[string]int64{"tok": 900}, "commit": true}
	var acq api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", body, &acq)
	if s := acq.Limits[0]; s.Available != 100 || s.ResetsAtMS != december.UnixMilli() {
		t.Errorf("granted: %+v, want 100 left, resets_at_ms %d", s, december.UnixMilli())
	}
	var av api.AvailableResponse
	e.want(http.StatusOK, "GET", "/v1/available?entity=key-1&resource=llm", nil, &av)
	if s := av.Limits[0]; s.ResetsAtMS != december.UnixMilli() {
		t.Errorf("available: %+v, want resets_at_ms %d", s, december.UnixMilli())
	}
	var raw json.RawMessage
	status, hdr := e.do("POST", "/v1/acquire", body, &raw)
	wait := december.Sub(e.clk.Now())
	if status != http.StatusTooManyRequests || hdr.Get("Retry-After") != "183600" ||
		!strings.Contains(string(raw), `"retry_after_ms":`+strconv.FormatInt(wait.Milliseconds(), 10)) {
		t.Errorf("refused: %d, Retry-After %q, body %s; want 429 waiting %v", status, hdr.Get("Retry-After"), raw, wait)
	}
	status, _ = e.do("PUT", "/v1/limits/resources/llm", api.Limits{Limits: []string{"tok:1000/month@Mars/Base"}}, &raw)
	if status != http.StatusBadRequest || !strings.Contains(string(raw), `unknown time zone \"Mars/Base\"`) {
		t.Errorf("unknown zone: %d %s, want a 400 naming it", status, raw)
	}
}
