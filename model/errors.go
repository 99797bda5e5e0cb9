package model

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors. Match them with errors.Is; the typed errors below match the
// corresponding sentinel. Every one of them but ErrUnavailable is a domain
// error (it matches ErrDomain).
var (
	// ErrRateLimited is matched by every *RateLimitExceeded.
	ErrRateLimited = NewDomainError("rate limited")
	// ErrUnavailable is matched by every *UnavailableError. It is the one
	// sentinel that is not a domain error.
	ErrUnavailable = errors.New("store unavailable")
	// ErrInvalid is matched by every *ValidationError.
	ErrInvalid = NewDomainError("invalid argument")
	// ErrEntityNotFound reports an entity id that does not exist.
	ErrEntityNotFound = NewDomainError("entity not found")
	// ErrEntityExists reports creating an entity id that already exists.
	ErrEntityExists = NewDomainError("entity already exists")
	// ErrNotFound reports a configuration or other record that does not exist.
	ErrNotFound = NewDomainError("not found")
	// ErrLeaseClosed reports use of a lease after Commit or Rollback.
	ErrLeaseClosed = NewDomainError("lease closed")
	// ErrUsageUnsupported reports a usage query to a store that keeps no
	// usage snapshots.
	ErrUsageUnsupported = NewDomainError("this store keeps no usage snapshots")
	// ErrCapacityUnsupported reports a capacity query to a store that
	// cannot list buckets.
	ErrCapacityUnsupported = NewDomainError("this store cannot list buckets")
	// ErrPreconditionFailed reports a change made on a condition on the
	// version of what it changes (IfVersion, IfAbsent; HTTP If-Match) that
	// no longer holds: someone else changed it since it was read. Nothing
	// was written.
	ErrPreconditionFailed = NewDomainError("precondition failed")
)

// VersionMismatch returns an error matching ErrPreconditionFailed that
// says which version a change expected (0: none stored) and which is
// stored (have; 0: none).
func VersionMismatch(expected, have int64) error {
	var want, is string
	if expected == 0 {
		want = "not to exist"
	} else {
		want = "version " + strconv.FormatInt(expected, 10)
	}
	if have == 0 {
		is = "it does not exist"
	} else {
		is = "it is at version " + strconv.FormatInt(have, 10)
	}
	return &preconditionError{msg: "expected " + want + ", " + is}
}

// preconditionError is VersionMismatch's error.
type preconditionError struct{ msg string }

// Error says what was expected and what is.
func (e *preconditionError) Error() string { return "precondition failed: " + e.msg }

// Is reports whether target is ErrPreconditionFailed or ErrDomain.
func (e *preconditionError) Is(target error) bool {
	return target == ErrPreconditionFailed || target == ErrDomain
}

// ErrDomain is matched by every domain error: an answer about the data
// (not found, already exists, invalid, rate limited, ...), which the store
// gave, as opposed to a failure to reach the store. The limiter returns a
// domain error from a store as it is, in every unavailable mode; any other
// store error means the store is unavailable (docs/semantics.md, section
// 8). A backend's own answers about the data must match it: make them with
// NewDomainError, or wrap a sentinel of this package.
var ErrDomain = errors.New("domain error")

// NewDomainError returns a new sentinel error, equal to no other, with the
// message msg, that matches ErrDomain.
func NewDomainError(msg string) error { return &domainError{msg: msg} }

// domainError is a sentinel error that matches ErrDomain.
type domainError struct{ msg string }

// Error returns the message.
func (e *domainError) Error() string { return e.msg }

// Is reports whether target is ErrDomain.
func (e *domainError) Is(target error) bool { return target == ErrDomain }

// Status is one limit's verdict for one entity in an acquire, or its current
// state in an availability query. Token counts are whole tokens.
type Status struct {
	Entity   string
	Resource string
	Limit    string
	Kind     Kind
	// Capacity is the bucket's ceiling.
	Capacity int64
	// Available is the balance after refill, rounded down; negative in debt.
	// In a granted acquire it is the balance after the debit.
	Available int64
	// Requested is the amount this request asked of the limit.
	Requested int64
	// Exceeded reports that Available could not cover Requested.
	Exceeded bool
	// Shadow reports that the limit is enforced in shadow (Config.Shadow):
	// an exceeded shadow limit says it would have denied, and did not.
	Shadow bool
	// Source names the level that supplied the limit: "entity",
	// "entity-default", "resource" or "system" (Scope.Level) for stored
	// limits, SourceCall for the request's own; "" where not known (a
	// status rebuilt without the request's plan).
	Source string
	// RetryAfter is how long refill alone needs to cover Requested; zero when
	// not exceeded. It saturates at MaxWait (about 292 years): RetryAfterMS
	// has longer waits exactly. For a concurrency or reserved limit it is a
	// hint, as Waits says: tokens come back when other leases end, not with
	// time.
	RetryAfter time.Duration
	// RetryAfterMS is RetryAfter in milliseconds, rounded up, and exact
	// where RetryAfter saturates, up to MaxWaitMS.
	RetryAfterMS int64
	// Waits says what an exceeded concurrency or reserved limit waits for:
	// WaitsExpiry (RetryAfter is the earliest expiry among its holders) or
	// WaitsRelease (no time is known). "" for a rate limit, whose
	// RetryAfter is exact, and when not exceeded.
	Waits string
	// ResetsAt is, for a calendar quota (Limit.Window), when its current
	// window ends and it refills; zero for every other limit.
	ResetsAt time.Time
	// Window is the span Capacity is granted over: for a rate limit the
	// time its refill takes to fill it from empty (Capacity /
	// RefillAmount × RefillPeriod: a minute for PerMinute), for a calendar
	// quota the length of its current window (a day of 23 hours across a
	// DST change); zero for concurrency and reserved limits, which time
	// does not refill. It saturates at MaxWait. The RateLimit-Policy
	// header field's w parameter is it, in seconds.
	Window time.Duration
}

// RateLimitExceeded is returned when an acquire is denied. Nothing was
// consumed anywhere.
type RateLimitExceeded struct {
	// Statuses lists every limit checked, in every bucket of the cascade.
	Statuses []Status
	// RetryAfter is the longest RetryAfter among the violations: the earliest
	// time at which refill alone could make the same request succeed. It
	// saturates at MaxWait; the RetryAfterMS method is exact. Zero when
	// only reserved limits deny, waiting for a release (Waits).
	RetryAfter time.Duration
}

// Error names the primary violation.
func (e *RateLimitExceeded) Error() string {
	p := e.Primary()
	msg := "rate limited: " + p.Limit + " of " + p.Entity + "/" + p.Resource + ": requested " +
		strconv.FormatInt(p.Requested, 10) + ", available " + strconv.FormatInt(p.Available, 10)
	switch ms := e.RetryAfterMS(); {
	case ms == 0 && p.Waits == WaitsRelease:
		return msg + "; waits for a release"
	case ms > CeilMS(MaxWait):
		return msg + "; retry after " + strconv.FormatInt(ms, 10) + "ms"
	}
	return msg + "; retry after " + e.RetryAfter.String()
}

// Is reports whether target is ErrRateLimited or ErrDomain.
func (e *RateLimitExceeded) Is(target error) bool {
	return target == ErrRateLimited || target == ErrDomain
}

// Violations returns the statuses that deny (Status.Denies).
func (e *RateLimitExceeded) Violations() []Status { return e.filter(true) }

// SourceCall is the Status.Source of a limit the request passed itself
// (per-call limits).
const SourceCall = "call"

// Denies reports whether the status refuses its request: exceeded, and
// not a shadow limit's (which only says it would have).
func (s Status) Denies() bool { return s.Exceeded && !s.Shadow }

// Passed returns the statuses that do not deny: limits that could have
// been satisfied, and shadow limits that would have denied.
func (e *RateLimitExceeded) Passed() []Status { return e.filter(false) }

// Primary returns the violation with the longest RetryAfter (the first such in
// cascade order, child first), which is the one that decides when to retry.
// Waits beyond MaxWait compare by RetryAfterMS.
func (e *RateLimitExceeded) Primary() Status {
	var p Status
	found := false
	for _, s := range e.Statuses {
		if s.Denies() && (!found || s.retryMS() > p.retryMS() || s.retryMS() == p.retryMS() && s.RetryAfter > p.RetryAfter) {
			p, found = s, true
		}
	}
	return p
}

func (e *RateLimitExceeded) filter(exceeded bool) []Status {
	var out []Status
	for _, s := range e.Statuses {
		if s.Denies() == exceeded {
			out = append(out, s)
		}
	}
	return out
}

// UnavailableError is returned when the store could not answer and the
// unavailable mode is Block. It wraps the store's error.
type UnavailableError struct {
	Op  string // the operation that failed, e.g. "acquire"
	Err error
	// Unreachable names what did not answer when it is not the store: a
	// client sets "server" when no server answered its call (connection
	// refused, a timeout), so the message says what to look at.
	Unreachable string
}

// Error describes what failed, the operation and the cause.
func (e *UnavailableError) Error() string {
	if e.Unreachable != "" {
		return e.Unreachable + " unreachable during " + e.Op + ": " + e.Err.Error()
	}
	return "store unavailable during " + e.Op + ": " + e.Err.Error()
}

// Unwrap returns the store's error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is reports whether target is ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// ValidationError reports bad input. Nothing was written.
type ValidationError struct {
	Field  string // e.g. "entity", "consume.tpm", "limit.rpm.capacity"
	Value  string // the offending value, truncated to 80 bytes
	Reason string
}

// Error names the field, the value and the reason.
func (e *ValidationError) Error() string {
	if e.Value == "" { // "invalid limits: ...", not `invalid limits "": ...`
		return "invalid " + e.Field + ": " + e.Reason
	}
	return "invalid " + e.Field + " " + quote(e.Value) + ": " + e.Reason
}

// Is reports whether target is ErrInvalid or ErrDomain.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid || target == ErrDomain }

// Invalid returns a *ValidationError; value is truncated.
func Invalid(field, value, reason string) error { return invalid(field, value, reason) }

func invalid(field, value, reason string) *ValidationError {
	return &ValidationError{Field: field, Value: truncate(value), Reason: reason}
}

const maxValueLen = 80

func truncate(s string) string {
	if len(s) <= maxValueLen {
		return s
	}
	return strings.ToValidUTF8(s[:maxValueLen], "") + "..."
}

func quote(s string) string { return strconv.Quote(s) }
func itoa(n int) string     { return strconv.Itoa(n) }
