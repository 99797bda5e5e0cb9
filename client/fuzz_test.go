package client

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// FuzzDecodeError feeds decodeError what a hostile or broken server might
// send. It must not panic, must return an error whose text is bounded, and
// a denial's durations must be sane.
func FuzzDecodeError(f *testing.F) {
	seeds := []struct {
		status     int
		retryAfter string
		body       string
	}{
		{429, "1", `{"error":"rate_limited","message":"m","retry_after_ms":1500,"limits":[{"limit":"rpm","exceeded":true,"retry_after_ms":1500}]}`},
		{429, "", `{"error":"rate_limited","retry_after_ms":-5,"limits":[{"retry_after_ms":9223372036854775807}]}`},
		{429, "99999999999999999999", ``},
		{400, "", `{"error":"invalid_argument","field":"entity","reason":"bad"}`},
		{404, "", `{"error":"not_found","reason":"lease_not_found"}`},
		{409, "", `{"error":"conflict","reason":"lease_closed","message":"\xff\xfe"}`},
		{503, "", `{"error":"unavailable"}`},
		{503, "", `{"error":"unavailable","reason":"too_many_leases"}`},
		{502, "", `<html>`},
		{0, "", `null`},
		{-1, "x", `[]`},
		{999, "", `{"error":"rate_limited","limits":null}`},
		{401, "", `{"error":"`},
	}
	for _, s := range seeds {
		f.Add(s.status, s.retryAfter, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, status int, retryAfter string, body []byte) {
		h := http.Header{}
		h.Set("Retry-After", retryAfter)
		err := decodeError(status, h, body)
		if err == nil {
			t.Fatal("decodeError returned nil")
		}
		if n := len(err.Error()); n > 4096 {
			t.Errorf("error text is %d bytes", n)
		}
		var ex *model.RateLimitExceeded
		if errors.As(err, &ex) {
			if ex.RetryAfter < 0 {
				t.Errorf("RetryAfter = %v", ex.RetryAfter)
			}
			for _, s := range ex.Statuses {
				if s.RetryAfter < 0 {
					t.Errorf("status RetryAfter = %v", s.RetryAfter)
				}
			}
			_ = ex.Primary()
		}
		_ = errors.Is(err, model.ErrUnavailable)
	})
}

// FuzzDecodeResponse feeds decodeResponse and the lease built from it any
// answer at all.
func FuzzDecodeResponse(f *testing.F) {
	f.Add(200, []byte(`{"lease_id":"abc","consumed":{"rpm":1},"limits":[{"limit":"rpm","kind":"rate"}],"expires_at_ms":1767225600000}`))
	f.Add(200, []byte(`{"lease_id":"abc","expires_at_ms":-9223372036854775808}`))
	f.Add(201, []byte(`{"consumed":null,"limits":[null]}`))
	f.Add(204, []byte(``))
	f.Add(429, []byte(`{"error":"rate_limited"}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		var resp api.AcquireResponse
		err := decodeResponse(status, http.Header{}, body, &resp)
		if status < 200 || status > 299 {
			if err == nil {
				t.Fatalf("status %d: nil error", status)
			}
			return
		}
		if err != nil && !errors.Is(err, ErrBadResponse) {
			t.Fatalf("status %d: err = %v, want ErrBadResponse", status, err)
		}
		le := newLease(&Client{}, "e", "r", resp)
		_, _, _ = le.Consumed(), le.Statuses(), le.ExpiresAt().Add(time.Second)
	})
}
