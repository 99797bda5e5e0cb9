package limitertest

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/storetest"
)

// arithDraw is one draw of extreme amounts: a rate limit, what an acquire
// took of it, the debt adjustments then piled on it (each by its own
// lease), the time that passes, and the amount asked then.
type arithDraw struct {
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

func drawArith(r *rand.Rand) arithDraw {
	capacity := extreme(r, 1, model.MaxTokens)
	amount := extreme(r, 1, model.MaxTokens)
	period := time.Duration(extreme(r, 1, int64(longestPeriod/time.Millisecond))) * time.Millisecond
	c := arithDraw{
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
func (c arithDraw) want() int64 {
	p := bucket.Params{Capacity: c.limit.Capacity * 1000, Amount: c.limit.RefillAmount * 1000, Period: c.limit.RefillPeriod.Milliseconds()}
	s := bucket.ForceConsume(bucket.Full(p), c.take*1000)
	for _, d := range c.debts {
		s = bucket.ForceConsume(s, d*1000)
	}
	return bucket.RetryAfter(bucket.Refill(s, p, c.elapsed.Milliseconds()), p, c.ask*1000)
}

// beyondFloor reports whether the draw's debt goes below the balance's
// floor, -MaxTokens millitokens, at some step (the sum need not fit an
// int64).
func (c arithDraw) beyondFloor() bool {
	b := big.NewInt(c.limit.Capacity - c.take)
	for _, d := range c.debts {
		b.Sub(b, big.NewInt(d))
	}
	b.Mul(b, big.NewInt(1000))
	return b.Cmp(big.NewInt(-bucket.MaxTokens)) < 0
}

// arithDraws is how many draws a backend runs: each is a handful of store
// calls.
const arithDraws = 60

// Arithmetic saturates on every backend, whatever the amounts (issue 21
// item 4): capacities and rates up to MaxTokens, periods of a
// millisecond to 292 years, debt piled up to its saturation near -2^62
// millitokens, up to 200 years elapsed, each draw on an entity of its own
// from T0. The refusal says the bucket package's wait exactly, in
// RetryAfterMS however long, RetryAfter saturating at MaxWait;
// TimeUntilAvailable and Check agree; a wait the clock can reach is exact to the millisecond. A
// backend that held amounts in float64 (Lua numbers, DynamoDB's without
// care) or wrapped would fail it.
func testLimiterSaturationProperty(t *testing.T, e *env) {
	seed := time.Now().UnixNano()
	if s, err := strconv.ParseInt(os.Getenv("TOLLGATE_ARITH_SEED"), 10, 64); err == nil {
		seed = s // to replay a failure's draws
	}
	r := rand.New(rand.NewPCG(uint64(seed), 21))
	lim := e.limiter()
	ctx := context.Background()
	beyond := 0
	defer func() { t.Logf("seed %d: %d draws, %d with debt below the floor", seed, arithDraws, beyond) }()
	for i := range arithDraws {
		c := drawArith(r)
		if only := os.Getenv("TOLLGATE_ARITH_ONLY"); only != "" && only != strconv.Itoa(i) {
			continue
		}
		e.clk.Set(time.UnixMilli(storetest.T0))
		entity := fmt.Sprintf("e%d", i)
		at := func(step string) string { return fmt.Sprintf("seed %d draw %d %+v: %s", seed, i, c, step) }
		limits := tollgate.WithLimits(c.limit, tollgate.PerMinute("carrier", 1000))
		e.commit(e.acquire(lim, entity, "api", tollgate.Consume{"x": c.take}, limits))
		for _, d := range c.debts {
			// In debt, x grants nothing: each debt comes through a lease
			// of another limit.
			le := e.acquire(lim, entity, "api", tollgate.Consume{"carrier": 1}, limits)
			if err := le.Adjust(ctx, tollgate.Consume{"x": d}); err != nil {
				t.Fatalf("%s: %v", at("Adjust"), err)
			}
			e.commit(le)
		}
		e.clk.Advance(c.elapsed)
		want := c.want()
		le, err := lim.Acquire(ctx, entity, "api", tollgate.Consume{"x": c.ask}, limits)
		if want == 0 {
			if errors.Is(err, tollgate.ErrRateLimited) && c.beyondFloor() {
				beyond++ // the debt below the floor, remembered, is not repaid yet
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v, want a grant", at("acquire"), err)
			}
			e.commit(le)
			continue
		}
		var ex *tollgate.RateLimitExceeded
		if !errors.As(err, &ex) {
			t.Fatalf("%s: %v, want a refusal of %d ms", at("acquire"), err, want)
		}
		wantD := tollgate.MaxWait
		if want <= int64(tollgate.MaxWait/time.Millisecond) {
			wantD = time.Duration(want) * time.Millisecond
		}
		if c.beyondFloor() {
			// The debt went below the floor. The balance saturates there;
			// a backend that keeps the full tick (DynamoDB, Redis) still
			// remembers the debt below it (docs/semantics.md 1): its wait,
			// computed from the saturated balance, is never shorter than
			// the saturating one and never wraps, but the excess is repaid
			// first (a grant may come after it: not checked); no grant
			// comes before the saturating one's time.
			if ms := ex.RetryAfterMS(); ms < want || ms <= 0 || ex.RetryAfter <= 0 || ex.RetryAfter > tollgate.MaxWait {
				t.Fatalf("%s: RetryAfterMS %d, RetryAfter %v; want at least %d ms, within (0, MaxWait]", at("refusal beyond the floor"), ms, ex.RetryAfter, want)
			}
			if want <= int64(time.Hour/time.Millisecond)*24*365*30 {
				e.clk.Advance(time.Duration(want-1) * time.Millisecond)
				if _, err := lim.Acquire(ctx, entity, "api", tollgate.Consume{"x": c.ask}, limits); !errors.Is(err, tollgate.ErrRateLimited) {
					t.Fatalf("%s: %v, want a refusal", at("beyond the floor, 1 ms before the saturating wait"), err)
				}
			}
			beyond++
			continue
		}
		if p := ex.Primary(); ex.RetryAfterMS() != want || ex.RetryAfter != wantD || p.RetryAfterMS != want || p.Waits != "" {
			t.Fatalf("%s: RetryAfterMS %d, RetryAfter %v, primary %+v; want %d ms, %v", at("refusal"), ex.RetryAfterMS(), ex.RetryAfter, p, want, wantD)
		}
		if d, err := lim.TimeUntilAvailable(ctx, entity, "api", tollgate.Consume{"x": c.ask}, limits); err != nil || d != wantD {
			t.Fatalf("%s: %v, %v; want %v", at("TimeUntilAvailable"), d, err, wantD)
		}
		if chk, err := lim.Check(ctx, entity, "api", tollgate.Consume{"x": c.ask}, limits); err != nil || chk == nil || chk.RetryAfterMS() != want {
			t.Fatalf("%s: %v, %v; want %d ms", at("Check"), chk, err, want)
		}
		if want > int64(time.Hour/time.Millisecond)*24*365*30 {
			continue // beyond the clock's reach within 2262 from any start
		}
		e.clk.Advance(time.Duration(want-1) * time.Millisecond)
		if _, err := lim.Acquire(ctx, entity, "api", tollgate.Consume{"x": c.ask}, limits); !errors.Is(err, tollgate.ErrRateLimited) {
			t.Fatalf("%s: %v, want a refusal", at("1 ms early"), err)
		}
		e.clk.Advance(time.Millisecond)
		e.commit(e.acquire(lim, entity, "api", tollgate.Consume{"x": c.ask}, limits))
	}
}
