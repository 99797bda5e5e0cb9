package model

import (
	"math"
	"time"
)

// Waits: what a limit waits for, and how long.
//
// A rate limit waits for refill, whose time is exact (Status.RetryAfter)
// however far off: deep debt at a slow rate can take millennia, longer
// than the 292 years a time.Duration holds, so the millisecond fields
// (Status.RetryAfterMS, RateLimitExceeded.RetryAfterMS, the wire's
// retry_after_ms) carry it exactly and the durations saturate at MaxWait.
// A concurrency or reserved limit waits for a holder to give its tokens
// back, which no clock foretells (Status.Waits).

// MaxWait is the longest wait a time.Duration holds, about 292 years. A
// RetryAfter or TimeUntilAvailable of MaxWait means at least that long;
// the millisecond fields say how long.
const MaxWait time.Duration = math.MaxInt64

// MaxWaitMS is the longest wait in milliseconds, about 292 million years
// (bucket.Never): a refill that would take longer than that is reported as
// MaxWaitMS.
const MaxWaitMS int64 = math.MaxInt64

// What an exceeded concurrency or reserved limit waits for (Status.Waits).
// A rate limit waits for refill and has none.
const (
	// WaitsExpiry says that RetryAfter is the time until the earliest
	// expiry among the leases holding the limit, when a reconciler gives
	// their tokens back. A holder that ends its lease gives them back
	// sooner: it is when to look again at the latest, not a bound.
	WaitsExpiry = "expiry"
	// WaitsRelease says that no holder's expiry tells when the limit
	// frees up (reservations without an expiry, holders already expired
	// and awaiting a reconciler, holders the lookup could not see): it
	// waits for a holder to end its lease or release its reservation.
	// RetryAfter is then the limiter's polling hint for a concurrency
	// limit (WithConcurrencyRetryAfter) and 0 for a reserved one.
	WaitsRelease = "release"
)

// SlotPoll is how often a waiter looks again at a concurrency or reserved
// limit that only a release can free, unless a holder's expiry comes
// sooner: about one call a second per waiter, whatever the hint. In one
// process, a lease that ends wakes the waiters of its buckets at once.
const SlotPoll = time.Second

// DurationMS returns ms milliseconds as a time.Duration, saturating at
// MaxWait; a negative ms is no wait (0).
func DurationMS(ms int64) time.Duration {
	switch {
	case ms <= 0:
		return 0
	case ms > int64(MaxWait/time.Millisecond):
		return MaxWait
	}
	return time.Duration(ms) * time.Millisecond
}

// CeilMS returns d in whole milliseconds, rounded up (1ns is 1 ms), without
// overflow near MaxWait; a negative d is 0.
func CeilMS(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// CeilSeconds returns ms milliseconds in whole seconds, rounded up (2,000
// ms is 2, 2,001 ms is 3), as an HTTP Retry-After header says a wait,
// without overflow near MaxWaitMS; a negative ms is 0.
func CeilSeconds(ms int64) int64 {
	if ms <= 0 {
		return 0
	}
	s := ms / 1000
	if ms%1000 != 0 {
		s++
	}
	return s
}

// retryMS is s's wait in milliseconds: RetryAfterMS, or RetryAfter's for a
// status made without it.
func (s *Status) retryMS() int64 { return max(s.RetryAfterMS, CeilMS(s.RetryAfter)) }

// slot reports whether s is of a limit that time does not refill.
func (s *Status) slot() bool { return s.Kind.holds() }

// RetryAfterMS returns RetryAfter in whole milliseconds, rounded up, exact
// also beyond MaxWait: the longest RetryAfterMS among the violations, or
// RetryAfter's if longer (a refusal made by hand).
func (e *RateLimitExceeded) RetryAfterMS() int64 {
	ms := CeilMS(e.RetryAfter)
	for i := range e.Statuses {
		if s := &e.Statuses[i]; s.Denies() {
			ms = max(ms, s.retryMS())
		}
	}
	return ms
}

// Waits returns what the primary violation waits for (Status.Waits): ""
// when it is a rate limit's refill, WaitsExpiry or WaitsRelease when it is
// a concurrency or reserved limit.
func (e *RateLimitExceeded) Waits() string { return e.Primary().Waits }

// Backoff returns how long a waiter refused with e sleeps before it tries
// again (sleep, at least a millisecond), and how long no try can succeed
// (least, at most sleep). Each violation asks for its own wait, and the
// longest wins:
//
//   - a rate limit its RetryAfter, exactly: refill is foretold, so no try
//     before it can succeed, and least is the longest of these;
//   - a concurrency or reserved limit (any Waits, a server too old to say
//     one included) SlotPoll, since a holder may end its lease at any time;
//     sooner when a holder's expiry comes first (WaitsExpiry), later when
//     the limiter's polling hint says so (WaitsRelease).
//
// A refusal without statuses waits its RetryAfter.
func (e *RateLimitExceeded) Backoff() (sleep, least time.Duration) {
	found := false
	for i := range e.Statuses {
		s := &e.Statuses[i]
		if !s.Denies() {
			continue
		}
		found = true
		switch {
		case !s.slot():
			sleep, least = max(sleep, s.RetryAfter), max(least, s.RetryAfter)
		case s.Waits == WaitsExpiry && s.RetryAfter > 0:
			sleep = max(sleep, min(s.RetryAfter, SlotPoll))
		default:
			sleep = max(sleep, s.RetryAfter, SlotPoll)
		}
	}
	if !found {
		sleep, least = e.RetryAfter, e.RetryAfter
	}
	return max(sleep, time.Millisecond), least
}
