package bucket_test

import (
	"math"
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
)

// validInput reports whether params and state are in the domain the package
// documents: params pass Validate, |Tokens| <= MaxTokens, Rem in [0, Period)
// (and 0 for a bucket that does not refill).
func validInput(p bucket.Params, s bucket.State) bool {
	if p.Validate() != nil || s.Tokens < -maxTok || s.Tokens > maxTok || s.Rem < 0 {
		return false
	}
	if p.Amount == 0 {
		return s.Rem == 0
	}
	return s.Rem < p.Period
}

func addSeeds(f *testing.F, last func(i int) int64) {
	seeds := [][5]int64{
		{100_000, 100_000, 60_000, 0, 0},
		{100_000, 100_000, 60_000, 99_999, 59_999},
		{1_000_000, 1_000_000, 60_000, -1_500_000, 0},
		{1, 1, 1, 0, 0},
		{1, 1, maxPer, -maxTok, maxPer - 1},
		{maxTok, maxTok, 1, -maxTok, 0},
		{maxTok, maxTok, maxPer, -maxTok, maxPer - 1},
		{maxTok, 1, maxPer, maxTok - 1, 12345},
		{10_000, 0, 0, -3000, 0},
		{10_000, 7, 3, 20_000, 2},
		{1 << 20, 1, maxPer, 1<<20 - 1<<18, 1},
	}
	for i, s := range seeds {
		f.Add(s[0], s[1], s[2], s[3], s[4], last(i))
	}
}

// FuzzRefill compares Refill with the math/big reference, checks its
// invariants, and checks that splitting the elapsed time in two changes nothing.
func FuzzRefill(f *testing.F) {
	elapsed := []int64{1, 1, 1, 0, -1, 90_000, math.MaxInt64, 1 << 45, 3, 60_000, 1 << 40}
	addSeeds(f, func(i int) int64 { return elapsed[i%len(elapsed)] })
	f.Fuzz(func(t *testing.T, capacity, amount, period, tokens, rem, elapsed int64) {
		p := bucket.Params{Capacity: capacity, Amount: amount, Period: period}
		s := bucket.State{Tokens: tokens, Rem: rem}
		if !validInput(p, s) {
			t.Skip()
		}
		got := bucket.Refill(s, p, elapsed)
		checkRefillResult(t, s, p, elapsed, got)
		if want := refRefill(s, p, elapsed); got != want {
			t.Fatalf("Refill(%+v, %+v, %d) = %+v, want %+v", s, p, elapsed, got, want)
		}
		if elapsed > 0 {
			// Split at a point derived from the inputs.
			e1 := int64(uint64(tokens^rem) % uint64(elapsed))
			two := bucket.Refill(bucket.Refill(s, p, e1), p, elapsed-e1)
			if two != got {
				t.Fatalf("Refill(%+v, %+v, %d) = %+v, but split at %d gives %+v", s, p, elapsed, got, e1, two)
			}
		}
	})
}

// FuzzRetryAfter checks RetryAfter against the math/big reference and its
// minimality with Refill: the returned wait suffices and one millisecond less
// does not. Balances above capacity are excluded (see
// TestRetryAfterAboveCapacity): Refill clamps them before any wait counts.
func FuzzRetryAfter(f *testing.F) {
	amounts := []int64{1000, 100_000, 0, 1, 1, maxTok, maxTok, 1, 10_000, 11, 1 << 20}
	addSeeds(f, func(i int) int64 { return amounts[i%len(amounts)] })
	f.Fuzz(func(t *testing.T, capacity, amount, period, tokens, rem, want int64) {
		p := bucket.Params{Capacity: capacity, Amount: amount, Period: period}
		s := bucket.State{Tokens: tokens, Rem: rem}
		if !validInput(p, s) || s.Tokens > p.Capacity {
			t.Skip()
		}
		w := bucket.RetryAfter(s, p, want)
		if ref := refRetryAfter(s, p, want); w != ref {
			t.Fatalf("RetryAfter(%+v, %+v, %d) = %d, want %d", s, p, want, w, ref)
		}
		checkRetryAfterMinimal(t, s, p, want, w)
	})
}
