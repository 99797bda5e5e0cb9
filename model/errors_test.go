package model_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tollgate-rl/tollgate/model"
)

func TestRateLimitExceededIs(t *testing.T) {
	err := error(&model.RateLimitExceeded{Statuses: []model.Status{
		{Entity: "key-1", Resource: "gpt-4o", Limit: "rpm", Exceeded: true, RetryAfter: time.Second},
	}, RetryAfter: time.Second})
	wrapped := fmt.Errorf("acquire: %w", err)
	for _, e := range []error{err, wrapped} {
		if !errors.Is(e, model.ErrRateLimited) {
			t.Errorf("errors.Is(%v, ErrRateLimited) = false", e)
		}
		for _, other := range []error{model.ErrUnavailable, model.ErrInvalid, model.ErrNotFound, model.ErrLeaseClosed} {
			if errors.Is(e, other) {
				t.Errorf("errors.Is(%v, %v) = true", e, other)
			}
		}
		var rle *model.RateLimitExceeded
		if !errors.As(e, &rle) || rle != err {
			t.Errorf("errors.As(%v) did not find the *RateLimitExceeded", e)
		}
	}
}

func TestRateLimitExceededPrimary(t *testing.T) {
	st := func(entity, limit string, exceeded bool, retry time.Duration) model.Status {
		return model.Status{Entity: entity, Resource: "gpt-4o", Limit: limit, Exceeded: exceeded, RetryAfter: retry}
	}
	tests := []struct {
		name     string
		statuses []model.Status
		primary  int // index into statuses
	}{
		{"single violation", []model.Status{st("key-1", "rpm", true, time.Second)}, 0},
		{"longest later", []model.Status{
			st("key-1", "rpm", true, time.Second),
			st("key-1", "tpm", false, 0),
			st("org-1", "tpm", true, 3*time.Second),
		}, 2},
		{"longest first", []model.Status{
			st("key-1", "tpm", true, 5*time.Second),
			st("org-1", "rpm", true, 2*time.Second),
		}, 0},
		{"tie takes the first", []model.Status{
			st("key-1", "rpm", false, 0),
			st("key-1", "tpm", true, 2*time.Second),
			st("org-1", "tpm", true, 2*time.Second),
			st("acct", "tpm", true, time.Second),
		}, 1},
		{"passed statuses are ignored", []model.Status{
			st("key-1", "rpm", false, time.Hour),
			st("key-1", "tpm", true, 0),
			st("org-1", "rpm", false, time.Hour),
		}, 1},
		{"concurrency violation with zero retry", []model.Status{
			st("key-1", "rpm", false, 0),
			{Entity: "key-1", Resource: "gpt-4o", Limit: "inflight", Kind: model.Concurrency, Exceeded: true},
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var retry time.Duration
			for _, s := range tt.statuses {
				if s.Exceeded && s.RetryAfter > retry {
					retry = s.RetryAfter
				}
			}
			e := &model.RateLimitExceeded{Statuses: tt.statuses, RetryAfter: retry}
			want := tt.statuses[tt.primary]
			if got := e.Primary(); got != want {
				t.Errorf("Primary() = %+v, want %+v", got, want)
			}

			var wantV, wantP []model.Status
			for _, s := range tt.statuses {
				if s.Exceeded {
					wantV = append(wantV, s)
				} else {
					wantP = append(wantP, s)
				}
			}
			if got := e.Violations(); !equalStatuses(got, wantV) {
				t.Errorf("Violations() = %+v, want %+v", got, wantV)
			}
			if got := e.Passed(); !equalStatuses(got, wantP) {
				t.Errorf("Passed() = %+v, want %+v", got, wantP)
			}

			msg := e.Error()
			for _, part := range []string{want.Limit, want.Entity, want.Resource} {
				if !strings.Contains(msg, part) {
					t.Errorf("Error() = %q, want it to mention %q", msg, part)
				}
			}
		})
	}
}

func TestRateLimitExceededErrorNamesPrimary(t *testing.T) {
	e := &model.RateLimitExceeded{Statuses: []model.Status{
		{Entity: "key-7", Resource: "gpt-4o", Limit: "rpm", Exceeded: true, RetryAfter: time.Second, Requested: 1, Available: 0},
		{Entity: "org-9", Resource: "gpt-4o", Limit: "tpm", Exceeded: true, RetryAfter: 4 * time.Second, Requested: 500, Available: -20},
	}, RetryAfter: 4 * time.Second}
	msg := e.Error()
	for _, part := range []string{"tpm", "org-9", "500", "-20", "4s"} {
		if !strings.Contains(msg, part) {
			t.Errorf("Error() = %q, want it to mention %q", msg, part)
		}
	}
	for _, part := range []string{"rpm", "key-7"} {
		if strings.Contains(msg, part) {
			t.Errorf("Error() = %q names %q, which is not the primary violation", msg, part)
		}
	}
}

func equalStatuses(a, b []model.Status) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestUnavailableError(t *testing.T) {
	tests := []struct {
		name  string
		cause error
		is    []error // besides ErrUnavailable
	}{
		{"deadline", context.DeadlineExceeded, []error{context.DeadlineExceeded}},
		{"wrapped deadline", fmt.Errorf("dynamodb: %w", context.DeadlineExceeded), []error{context.DeadlineExceeded}},
		{"canceled", context.Canceled, []error{context.Canceled}},
		{"plain", io.ErrUnexpectedEOF, []error{io.ErrUnexpectedEOF}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := error(&model.UnavailableError{Op: "acquire", Err: tt.cause})
			if got := errors.Unwrap(err); got != tt.cause {
				t.Errorf("Unwrap() = %v, want %v", got, tt.cause)
			}
			for _, e := range []error{err, fmt.Errorf("limiter: %w", err)} {
				for _, target := range append([]error{model.ErrUnavailable}, tt.is...) {
					if !errors.Is(e, target) {
						t.Errorf("errors.Is(%v, %v) = false", e, target)
					}
				}
				for _, target := range []error{model.ErrRateLimited, model.ErrInvalid} {
					if errors.Is(e, target) {
						t.Errorf("errors.Is(%v, %v) = true", e, target)
					}
				}
			}
			if errors.Is(err, context.Canceled) != errors.Is(tt.cause, context.Canceled) {
				t.Errorf("errors.Is(err, context.Canceled) disagrees with the cause")
			}
			msg := err.Error()
			if !strings.Contains(msg, "acquire") || !strings.Contains(msg, tt.cause.Error()) {
				t.Errorf("Error() = %q, want it to mention the op and %q", msg, tt.cause.Error())
			}
		})
	}
}

func TestValidationErrorIs(t *testing.T) {
	err := model.Invalid("entity", "bad id", "must not contain spaces")
	var ve *model.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Invalid returned %T, want *ValidationError", err)
	}
	if ve.Field != "entity" || ve.Value != "bad id" || ve.Reason != "must not contain spaces" {
		t.Errorf("Invalid = %+v", ve)
	}
	for _, e := range []error{err, fmt.Errorf("create: %w", err)} {
		if !errors.Is(e, model.ErrInvalid) {
			t.Errorf("errors.Is(%v, ErrInvalid) = false", e)
		}
		if errors.Is(e, model.ErrRateLimited) || errors.Is(e, model.ErrUnavailable) {
			t.Errorf("%v matches a sentinel other than ErrInvalid", e)
		}
	}
	msg := err.Error()
	for _, part := range []string{"entity", `"bad id"`, "must not contain spaces"} {
		if !strings.Contains(msg, part) {
			t.Errorf("Error() = %q, want it to contain %q", msg, part)
		}
	}
}

func TestValidationErrorTruncation(t *testing.T) {
	a80 := strings.Repeat("a", 80)
	tests := []struct {
		name  string
		value string
		want  string
	}{
		{"short", "abc", "abc"},
		{"empty", "", ""},
		{"exactly 80 bytes", a80, a80},
		{"81 bytes", a80 + "b", a80 + "..."},
		{"long ASCII", strings.Repeat("x", 1000), strings.Repeat("x", 80) + "..."},
		{"2-byte runes on the boundary", strings.Repeat("é", 50), strings.Repeat("é", 40) + "..."},
		{"2-byte rune split", "a" + strings.Repeat("é", 50), "a" + strings.Repeat("é", 39) + "..."},
		{"3-byte rune split", "a" + strings.Repeat("€", 30), "a" + strings.Repeat("€", 26) + "..."},
		{"3-byte runes on the boundary", "ab" + strings.Repeat("€", 30), "ab" + strings.Repeat("€", 26) + "..."},
		{"4-byte rune split", "abc" + strings.Repeat("🙂", 25), "abc" + strings.Repeat("🙂", 19) + "..."},
		{"80 bytes of 2-byte runes", strings.Repeat("é", 40), strings.Repeat("é", 40)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ve *model.ValidationError
			if !errors.As(model.Invalid("f", tt.value, "r"), &ve) {
				t.Fatal("not a *ValidationError")
			}
			if ve.Value != tt.want {
				t.Errorf("Value = %q (%d bytes), want %q (%d bytes)", ve.Value, len(ve.Value), tt.want, len(tt.want))
			}
			if len(ve.Value) > 83 {
				t.Errorf("Value is %d bytes, want at most 83", len(ve.Value))
			}
			if utf8.ValidString(tt.value) && !utf8.ValidString(ve.Value) {
				t.Errorf("Value %q is not valid UTF-8", ve.Value)
			}
		})
	}
}

// Every sentinel but ErrUnavailable, and the typed errors of verdicts and
// bad input, are domain errors, wrapped or not; ErrUnavailable, an
// *UnavailableError and an arbitrary error are not. A new domain error is
// one, and equal to no other.
func TestDomainErrors(t *testing.T) {
	domain := []error{
		model.ErrRateLimited, model.ErrInvalid, model.ErrEntityNotFound, model.ErrEntityExists,
		model.ErrNotFound, model.ErrLeaseClosed, model.ErrUsageUnsupported, model.ErrCapacityUnsupported,
		model.ErrNamespaceNotFound, model.ErrNamespaceExists, model.ErrNamespaceDeleted,
		model.ErrLeaseNotFound, model.ErrLeaseExists, model.ErrLeaseConflict, model.ErrLeaseExpired, model.ErrReservationConflict,
		&model.RateLimitExceeded{}, model.Invalid("field", "value", "reason"),
	}
	for _, err := range domain {
		for _, e := range []error{err, fmt.Errorf("read: %w", err)} {
			if !errors.Is(e, model.ErrDomain) {
				t.Errorf("errors.Is(%v, ErrDomain) = false, want true", e)
			}
		}
	}
	other := []error{model.ErrUnavailable, &model.UnavailableError{Op: "acquire", Err: io.EOF}, io.EOF, errors.New("not found")}
	for _, e := range other {
		if errors.Is(e, model.ErrDomain) {
			t.Errorf("errors.Is(%v, ErrDomain) = true, want false", e)
		}
	}
	fresh := model.NewDomainError("quota frozen")
	if !errors.Is(fresh, model.ErrDomain) || fresh.Error() != "quota frozen" {
		t.Errorf("NewDomainError: %v, domain %v", fresh, errors.Is(fresh, model.ErrDomain))
	}
	if errors.Is(fresh, model.NewDomainError("quota frozen")) || errors.Is(fresh, model.ErrNotFound) {
		t.Error("a new domain error matches another sentinel")
	}
}

// A validation error without a value names the field alone: no empty
// quotes for a newcomer to puzzle over.
func TestValidationErrorText(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{model.Invalid("limits", "", "WithLimits needs at least one limit"), "invalid limits: WithLimits needs at least one limit"},
		{model.Invalid("consume.rpm", "101", "exceeds the capacity 100"), `invalid consume.rpm "101": exceeds the capacity 100`},
	}
	for _, c := range cases {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}
