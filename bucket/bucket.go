// Package bucket is the exact integer arithmetic of a token bucket.
//
// It is pure: no I/O, no locks, no clock reads. Time is passed in as elapsed
// milliseconds, tokens are int64 millitokens (1 token = 1000 millitokens), and a
// refill rate is the fraction Amount/Period, never a float. Every backend applies
// these functions to its stored state, so a bucket behaves identically whether it
// lives in memory, in a local file or in DynamoDB.
//
// Refill is exact: while a bucket stays below capacity, the millitokens credited
// between two instants equal floor(elapsed*Amount/Period) however often Refill is
// called in between. The remainder of the integer division is carried in
// [State.Rem] instead of being lost or rounded into the refill timestamp.
package bucket

import (
	"errors"
	"math"
	"math/bits"

	"github.com/tollgate-rl/tollgate/calendar"
)

// Bounds on representable values. They keep every intermediate result of this
// package inside int64 (sums of two values of magnitude at most MaxTokens cannot
// overflow), and callers reject anything larger instead of letting it wrap.
const (
	// MaxTokens is the largest capacity, amount or token balance in millitokens.
	// Balances saturate at ±MaxTokens.
	MaxTokens int64 = 1<<62 - 1
	// MaxPeriod is the longest refill period in milliseconds (about 1,100 years).
	MaxPeriod int64 = 1 << 45
	// Never is what RetryAfter returns when refill alone cannot cover a
	// request: it is larger than the capacity, or the bucket does not refill
	// (a concurrency limit, which waits for its holders instead). It also
	// stands for a refill longer than Never milliseconds (292 million
	// years: a deep debt at a slow rate), the most an int64 counts; a
	// caller tells the two apart by Params.Refills and the capacity, and
	// reports such a refill saturated at Never, never wrapped.
	Never int64 = math.MaxInt64
)

// Params describe one limit. A zero Amount means the bucket never refills
// (a concurrency limit: tokens come back only through explicit returns).
//
// A limit with a Window is a calendar quota: its time is counted in that
// window's units (Moment) rather than in milliseconds, and Period is 1, so
// that Amount is credited at each of the window's boundaries, all at once:
// every function of this package then works on it unchanged, given
// instants in Unix milliseconds, because each converts them with Moment.
type Params struct {
	Capacity int64 // ceiling in millitokens, the burst; > 0
	Amount   int64 // millitokens credited per Period; 0 for no refill
	Period   int64 // milliseconds (windows with a Window); > 0 when Amount > 0
	// Window, if not zero, is the calendar window of a quota (Amount > 0,
	// Period 1).
	Window calendar.Window
}

// Moment returns the instant ms (Unix milliseconds) in p's time: ms
// itself, or for a calendar quota the index of the window holding it.
func (p Params) Moment(ms int64) int64 {
	if p.Window.IsZero() {
		return ms
	}
	return p.Window.Index(ms)
}

// Millis returns the first Unix millisecond of the moment m of p's time
// (Moment's inverse): m itself, or the start of window m. The int64
// range's ends stand for never and always, and are kept.
func (p Params) Millis(m int64) int64 {
	if p.Window.IsZero() || m == math.MaxInt64 || m == math.MinInt64 {
		return m
	}
	return p.Window.Start(m)
}

// Refills reports whether the limit refills (Amount > 0); one that does
// not is a concurrency limit.
func (p Params) Refills() bool { return p.Amount > 0 }

// Validate reports whether p can be used with this package's functions.
func (p Params) Validate() error {
	switch {
	case p.Capacity <= 0 || p.Capacity > MaxTokens:
		return errors.New("capacity out of range")
	case p.Amount < 0 || p.Amount > MaxTokens:
		return errors.New("refill amount out of range")
	case p.Amount > 0 && (p.Period <= 0 || p.Period > MaxPeriod):
		return errors.New("refill period out of range")
	case !p.Window.IsZero() && (p.Amount == 0 || p.Period != 1):
		return errors.New("a calendar quota refills Amount once per window (Period 1)")
	case !p.Window.IsZero():
		return p.Window.Validate()
	}
	return nil
}

// State is the mutable part of one limit in one bucket.
type State struct {
	// Tokens is the balance in millitokens. It may be negative (debt incurred
	// through ForceConsume) or above capacity (after refunds) until the next Refill.
	Tokens int64
	// Rem is the remainder of the last refill division, in [0, Period): the
	// fraction Rem/Period of a millitoken that has accrued but not been credited.
	Rem int64
}

// Full returns the state of a new bucket: full, nothing accrued.
func Full(p Params) State { return State{Tokens: p.Capacity} }

// Refill credits what elapsed milliseconds earn and clamps the balance to the
// capacity. A non-positive elapsed credits nothing (clocks of different machines
// may disagree; time never runs backwards for a bucket).
func Refill(s State, p Params, elapsed int64) State {
	if s.Tokens >= p.Capacity {
		return State{Tokens: p.Capacity}
	}
	if elapsed <= 0 || p.Amount <= 0 {
		return s
	}
	// n = elapsed*Amount + Rem in 128 bits; credit n / Period, carry n % Period.
	hi, lo := bits.Mul64(uint64(elapsed), uint64(p.Amount))
	lo, carry := bits.Add64(lo, uint64(s.Rem), 0)
	hi += carry
	if hi >= uint64(p.Period) {
		// The quotient needs more than 64 bits: far more than any deficit.
		return State{Tokens: p.Capacity}
	}
	add, rem := bits.Div64(hi, lo, uint64(p.Period))
	// Capacity <= MaxTokens and Tokens >= -MaxTokens, so the deficit fits.
	if deficit := uint64(p.Capacity - s.Tokens); add >= deficit {
		return State{Tokens: p.Capacity}
	}
	return State{Tokens: s.Tokens + int64(add), Rem: int64(rem)}
}

// RefillBetween credits what p's time earns from the instant from to the
// instant to (Unix milliseconds): Refill over their distance in p's time.
// For a calendar quota that is Amount per boundary crossed.
func RefillBetween(s State, p Params, from, to int64) State {
	return Refill(s, p, p.Moment(to)-p.Moment(from))
}

// Consume debits amount millitokens if the balance covers it. It does not
// refill; call Refill first. A negative amount is never satisfied.
func Consume(s State, amount int64) (State, bool) {
	if amount < 0 || s.Tokens < amount {
		return s, false
	}
	s.Tokens -= amount
	return s, true
}

// ForceConsume debits amount millitokens unconditionally; the balance may go
// negative (debt, repaid by refill). A negative amount refunds; any excess over
// capacity is clamped by the next Refill. The balance saturates at ±MaxTokens.
func ForceConsume(s State, amount int64) State {
	s.Tokens = saturate(s.Tokens - saturate(amount))
	return s
}

// RetryAfter returns the milliseconds until refill alone brings the balance to at
// least amount, rounded up: 0 if it already does, Never if it never will or
// if it takes Never milliseconds or more (see Never).
func RetryAfter(s State, p Params, amount int64) int64 {
	if s.Tokens >= amount {
		return 0
	}
	if amount > p.Capacity || p.Amount <= 0 {
		return Never
	}
	// Smallest t with floor((t*Amount + Rem) / Period) >= deficit, i.e.
	// t = ceil((deficit*Period - Rem) / Amount).
	deficit := uint64(amount - s.Tokens)
	hi, lo := bits.Mul64(deficit, uint64(p.Period))
	lo, borrow := bits.Sub64(lo, uint64(s.Rem), 0)
	hi -= borrow
	lo, carry := bits.Add64(lo, uint64(p.Amount-1), 0)
	hi += carry
	if hi >= uint64(p.Amount) {
		return Never
	}
	t, _ := bits.Div64(hi, lo, uint64(p.Amount))
	if t > uint64(math.MaxInt64) {
		return Never
	}
	return int64(t)
}

// RetryAt returns the milliseconds from now (Unix milliseconds) until
// refill alone brings s, observed at now, to at least amount: RetryAfter
// in milliseconds, or for a calendar quota the time to the boundary of the
// window that credits enough, exactly. It is 0 if s covers amount and
// Never if refill never will or the wait does not fit in an int64.
func RetryAt(s State, p Params, amount, now int64) int64 {
	wait := RetryAfter(s, p, amount)
	if p.Window.IsZero() || wait == 0 || wait == Never {
		return wait
	}
	m := p.Moment(now)
	if wait > math.MaxInt64-m {
		return Never
	}
	return p.Millis(m+wait) - now
}

// CanSatisfy reports whether, after elapsed milliseconds of refill, the balance
// covers amount. It is how a caller holding a stale copy of the state decides
// between rejecting at once and re-reading the bucket.
func CanSatisfy(s State, p Params, elapsed, amount int64) bool {
	return Refill(s, p, elapsed).Tokens >= amount
}

// Available reports the balance in whole tokens, rounded down (so -0.5 tokens
// of debt is reported as -1).
func Available(s State) int64 {
	q := s.Tokens / MilliPerToken
	if s.Tokens%MilliPerToken < 0 {
		q--
	}
	return q
}

// Reconfigure moves a state from old parameters to new ones. A rate bucket
// keeps its balance, clamped to the new capacity. A bucket that does not refill
// (a concurrency limit) shifts its balance by the change in capacity, so the
// tokens in use stay in use. The accrued fraction is dropped (at most one
// millitoken per change).
func Reconfigure(s State, old, new Params) State {
	if old == new {
		return s
	}
	if new.Amount == 0 && old.Amount == 0 {
		s.Tokens = saturate(s.Tokens + (new.Capacity - old.Capacity))
	}
	s.Rem = 0
	if s.Tokens > new.Capacity {
		s.Tokens = new.Capacity
	}
	return s
}

// MilliPerToken is the scale of this package's amounts: millitokens in a
// token.
const MilliPerToken = 1000

// Milli converts whole tokens to millitokens, reporting false if the result
// would exceed MaxTokens in magnitude.
func Milli(tokens int64) (int64, bool) {
	if tokens > MaxTokens/MilliPerToken || tokens < -MaxTokens/MilliPerToken {
		return 0, false
	}
	return tokens * MilliPerToken, true
}

// Tokens converts millitokens to whole tokens, rounding toward zero (a
// balance is reported by Available, which rounds down).
func Tokens(milli int64) int64 { return milli / MilliPerToken }

// saturate clamps v into ±MaxTokens. Callers pass sums of two values of
// magnitude at most MaxTokens, which cannot have overflowed int64.
func saturate(v int64) int64 {
	if v > MaxTokens {
		return MaxTokens
	}
	if v < -MaxTokens {
		return -MaxTokens
	}
	return v
}
