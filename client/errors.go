package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// ErrBadResponse is matched by the error of an answer the client could not
// read: not JSON, not the expected shape, or larger than MaxResponseBytes.
// Such an error also matches model.ErrUnavailable, as no decision was
// received.
var ErrBadResponse = errors.New("malformed answer from the server")

// ErrServerUnreachable is matched by the error of a call that got no
// answer from a server: connection refused, a name that does not resolve,
// a timeout before the answer. It is an *UnavailableError (it matches
// model.ErrUnavailable: no decision was made, and a caller's fail-open
// or fail-closed choice applies as to a store that does not answer), whose
// message says "server unreachable".
var ErrServerUnreachable = errors.New("no answer from the server")

// unreachable is the error of a call to op that no server answered.
func unreachable(op string, err error) error {
	return &model.UnavailableError{Op: op, Err: fmt.Errorf("%w: %w", ErrServerUnreachable, err), Unreachable: "server"}
}

// Bounds on what a server's error body may put into an error.
const (
	maxMessageLen = 512
	maxFieldLen   = 128
	// maxRetryAfterMS keeps RetryAfterMS * time.Millisecond from overflowing.
	maxRetryAfterMS = math.MaxInt64 / int64(time.Millisecond)
)

// decodeResponse decodes a 2xx answer into out (unless nil), or turns any
// other answer into the error the library would have returned.
func decodeResponse(status int, h http.Header, body []byte, out any) error {
	if status < 200 || status > 299 {
		return decodeError(status, h, body)
	}
	if out == nil || status == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &model.UnavailableError{Op: "server", Err: badResponse(err)}
	}
	return nil
}

// badResponse wraps why an answer could not be read.
func badResponse(err error) error { return fmt.Errorf("%w: %v", ErrBadResponse, err) }

// decodeError maps an error answer with api.AsError: an api.Error body as
// the server writes it, or, for a body that is not one (a proxy's page), an
// error inferred from the status. Whatever the body says, the result is
// non-nil and bounded.
func decodeError(status int, h http.Header, body []byte) error {
	var e api.Error
	if err := json.Unmarshal(body, &e); err != nil || e.Code == "" {
		e = inferError(status, h, body)
	}
	sanitize(&e)
	return api.AsError(status, e)
}

// inferError describes an answer without an api.Error body. Only statuses
// whose meaning does not depend on the body are given a code: 401, 403,
// 429 (waiting the Retry-After header) and the gateway and availability
// errors 502, 503 and 504; any other is a plain *api.StatusError.
func inferError(status int, h http.Header, body []byte) api.Error {
	e := api.Error{Message: bodySnippet(status, body)}
	switch status {
	case http.StatusUnauthorized:
		e.Code = api.CodeUnauthenticated
	case http.StatusForbidden:
		e.Code = api.CodePermissionDenied
	case http.StatusTooManyRequests:
		e.Code = api.CodeRateLimited
		e.RetryAfterMS = retryAfterMS(h.Get("Retry-After"))
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		e.Code = api.CodeUnavailable
	}
	return e
}

// bodySnippet is the status line and the start of a body that is not JSON.
func bodySnippet(status int, body []byte) string {
	msg := strconv.Itoa(status) + " " + http.StatusText(status)
	if text := strings.TrimSpace(string(body)); text != "" {
		msg += ": " + text
	}
	return msg
}

// retryAfterMS reads a Retry-After header in seconds; 0 if absent or not a
// number of seconds.
func retryAfterMS(v string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return min(n, maxRetryAfterMS/1000) * 1000
}

// sanitize bounds what a server can put into an error: text lengths and
// retry-after durations (never negative, never overflowing).
func sanitize(e *api.Error) {
	e.Message = truncate(e.Message, maxMessageLen)
	e.Field = truncate(e.Field, maxFieldLen)
	e.Reason = truncate(e.Reason, maxFieldLen)
	e.RetryAfterMS = clampMS(e.RetryAfterMS)
	for i := range e.Limits {
		e.Limits[i].RetryAfterMS = clampMS(e.Limits[i].RetryAfterMS)
	}
}

func clampMS(ms int64) int64 { return min(max(ms, 0), maxRetryAfterMS) }

// truncate cuts s to at most n bytes of valid UTF-8.
func truncate(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}
