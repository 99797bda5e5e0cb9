package tollgate_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// longestPeriod is the longest refill period a time.Duration holds, in
// whole milliseconds: about 292 years.
const longestPeriod = tollgate.MaxWait / time.Millisecond * time.Millisecond

// arithCase is one draw of extreme amounts: a rate limit, what an acquire
// took of it, the debt adjustments then piled on it (each by its own
// lease), the time that passes, and the amount asked then.
type arithCase struct {
	limit   tollgate.Limit
	take    int64
	debts   []int64
	elapsed time.Duration
	ask     int64
}

// extreme picks one of the bounds, or a value in between.
func extreme(r *rand.Rand, lo, hi int64) int64 {
	switch r.IntN(4) {
	case 0:
		return lo
	case 1:
		return hi
	case 2:
		return lo + r.Int64N(min(hi-lo, 1000)+1) // near the bottom
	}
	return lo + r.Int64N(hi-lo+1)
}

func drawArith(r *rand.Rand) arithCase {
	capacity := extreme(r, 1, model.MaxTokens)
	amount := extreme(r, 1, model.MaxTokens)
	period := time.Duration(extreme(r, 1, int64(longestPeriod/time.Millisecond))) * time.Millisecond
	c := arithCase{
		limit: tollgate.RateLimit("x", amount, period).WithBurst(capacity),
		take:  extreme(r, 0, capacity),
		ask:   extreme(r, 1, capacity),
	}
	for range r.IntN(4) {
		c.debts = append(c.debts, extreme(r, 1, model.MaxTokens))
	}
	// Up to 200 years: the limiter's clock ends in 2262.
	c.elapsed = time.Duration(extreme(r, 0, 200*365*24*3600*1000)) * time.Millisecond
	return c
}

// want is the oracle: the bucket package's arithmetic on the same steps,
// the wait in milliseconds (0: granted).
func (c arithCase) want() int64 {
	p := bucket.Params{Capacity: c.limit.Capacity * 1000, Amount: c.limit.RefillAmount * 1000, Period: c.limit.RefillPeriod.Milliseconds()}
	s := bucket.ForceConsume(bucket.Full(p), c.take*1000)
	for _, d := range c.debts {
		s = bucket.ForceConsume(s, d*1000)
	}
	return bucket.RetryAfter(bucket.Refill(s, p, c.elapsed.Milliseconds()), p, c.ask*1000)
}

// Extreme amounts through the library: capacities and rates up to
// MaxTokens, periods of a millisecond to 292 years, debt piled up to its
// saturation near -2^62 millitokens, up to 200 years elapsed. The refusal
// says the bucket package's wait exactly, in RetryAfterMS however long,
// its RetryAfter saturating at MaxWait and never negative;
// TimeUntilAvailable and Check agree; a wait that the clock can reach is
// exact to the millisecond.
func TestArithmeticSaturatesProperty(t *testing.T) {
	seed := time.Now().UnixNano()
	r := rand.New(rand.NewPCG(uint64(seed), 21))
	ctx := context.Background()
	for i := range 300 {
		c := drawArith(r)
		lim, clk := newLim(t, memory.New())
		limits := tollgate.WithLimits(c.limit, tollgate.PerMinute("carrier", 1000))
		mustCommit(t, mustAcquire(t, lim, "e", "api", tollgate.Consume{"x": c.take}, limits))
		for _, d := range c.debts {
			// In debt, x grants nothing: each debt comes through a lease
			// of another limit.
			le := mustAcquire(t, lim, "e", "api", tollgate.Consume{"carrier": 1}, limits)
			if err := le.Adjust(ctx, tollgate.Consume{"x": d}); err != nil {
				t.Fatalf("seed %d case %d %+v: Adjust: %v", seed, i, c, err)
			}
			mustCommit(t, le)
		}
		clk.Advance(c.elapsed)
		want := c.want()
		le, err := lim.Acquire(ctx, "e", "api", tollgate.Consume{"x": c.ask}, limits)
		if want == 0 {
			if err != nil {
				t.Fatalf("seed %d case %d %+v: %v, want a grant", seed, i, c, err)
			}
			mustCommit(t, le)
			continue
		}
		var ex *tollgate.RateLimitExceeded
		if !errors.As(err, &ex) {
			t.Fatalf("seed %d case %d %+v: %v, want a refusal of %d ms", seed, i, c, err, want)
		}
		wantD := tollgate.MaxWait
		if want <= int64(tollgate.MaxWait/time.Millisecond) {
			wantD = time.Duration(want) * time.Millisecond
		}
		if p := ex.Primary(); ex.RetryAfterMS() != want || ex.RetryAfter != wantD || p.RetryAfterMS != want || p.Waits != "" {
			t.Fatalf("seed %d case %d %+v: RetryAfterMS %d, RetryAfter %v, primary %+v; want %d ms, %v", seed, i, c, ex.RetryAfterMS(), ex.RetryAfter, p, want, wantD)
		}
		if d, err := lim.TimeUntilAvailable(ctx, "e", "api", tollgate.Consume{"x": c.ask}, limits); err != nil || d != wantD {
			t.Fatalf("seed %d case %d: TimeUntilAvailable = %v, %v; want %v", seed, i, d, err, wantD)
		}
		if chk, err := lim.Check(ctx, "e", "api", tollgate.Consume{"x": c.ask}, limits); err != nil || chk == nil || chk.RetryAfterMS() != want {
			t.Fatalf("seed %d case %d: Check = %v, %v; want %d ms", seed, i, chk, err, want)
		}
		if want > int64(time.Hour/time.Millisecond)*24*365*30 {
			continue // beyond the clock's reach within 2262 from any start
		}
		clk.Advance(time.Duration(want-1) * time.Millisecond)
		if _, err := lim.Acquire(ctx, "e", "api", tollgate.Consume{"x": c.ask}, limits); !errors.Is(err, tollgate.ErrRateLimited) {
			t.Fatalf("seed %d case %d: 1 ms early: %v, want a refusal", seed, i, err)
		}
		clk.Advance(time.Millisecond)
		mustCommit(t, mustAcquire(t, lim, "e", "api", tollgate.Consume{"x": c.ask}, limits))
	}
}

func mustCommit(t testing.TB, le *tollgate.Lease) {
	t.Helper()
	if err := le.Commit(context.Background()); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}
