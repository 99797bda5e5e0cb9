package bucket_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
)

const (
	maxTok = bucket.MaxTokens
	maxPer = bucket.MaxPeriod
	never  = bucket.Never
)

// perMinute100 is the running example of the package documentation: 100 tokens
// (100,000 millitokens) per minute, burst 100 tokens.
var perMinute100 = bucket.Params{Capacity: 100_000, Amount: 100_000, Period: 60_000}

// ---------------------------------------------------------------------------
// Random generators (fixed seeds: every run sees the same cases).

func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
}

// rangeInt returns a uniformly distributed value in [lo, hi].
func rangeInt(r *rand.Rand, lo, hi int64) int64 {
	if lo > hi {
		panic("rangeInt: empty range")
	}
	n := uint64(hi) - uint64(lo) + 1
	if n == 0 { // the whole int64 range
		return int64(r.Uint64())
	}
	return lo + int64(r.Uint64N(n)) // wraps correctly in two's complement
}

// spread returns a value in [lo, hi] biased toward the ends of the range and
// spread over every order of magnitude of the distance from either end.
func spread(r *rand.Rand, lo, hi int64) int64 {
	width := uint64(hi) - uint64(lo)
	logOff := func() uint64 {
		off := r.Uint64N(uint64(1) << r.IntN(64))
		if off > width {
			off = r.Uint64N(width/2 + 1)
		}
		return off
	}
	switch r.IntN(8) {
	case 0:
		return lo
	case 1:
		return hi
	case 2:
		return lo + int64(min(width, 1))
	case 3:
		return hi - int64(min(width, 1))
	case 4:
		return lo + int64(logOff())
	case 5:
		return hi - int64(logOff())
	default:
		return rangeInt(r, lo, hi)
	}
}

func pick[T any](r *rand.Rand, vs ...T) T { return vs[r.IntN(len(vs))] }

// randParams returns valid parameters, with Amount > 0 unless allowZero.
func randParams(r *rand.Rand, allowZero bool) bucket.Params {
	var p bucket.Params
	switch r.IntN(4) {
	case 0: // what people configure: n tokens per second/minute/hour/day
		p.Capacity = 1000 * spread(r, 1, 1_000_000)
		p.Amount = 1000 * spread(r, 1, 1_000_000)
		p.Period = pick(r, int64(1), 1000, 60_000, 3_600_000, 86_400_000)
	case 1: // realistic but arbitrary
		p.Capacity = rangeInt(r, 1, 1e12)
		p.Amount = rangeInt(r, 1, 1e12)
		p.Period = rangeInt(r, 1, 1e10)
	case 2: // anywhere in the valid range, biased to the edges
		p.Capacity = spread(r, 1, maxTok)
		p.Amount = spread(r, 1, maxTok)
		p.Period = spread(r, 1, maxPer)
	default: // corners
		p.Capacity = pick(r, int64(1), 2, 1000, maxTok/2, maxTok-1, maxTok)
		p.Amount = pick(r, int64(1), 2, 999, 1000, maxTok/3, maxTok-1, maxTok)
		p.Period = pick(r, int64(1), 2, 3, 7, 60_000, maxPer-1, maxPer)
	}
	if allowZero && r.IntN(8) == 0 {
		p.Amount = 0
		p.Period = pick(r, int64(0), 1, 60_000, maxPer)
	}
	if err := p.Validate(); err != nil {
		panic("randParams generated invalid params: " + err.Error())
	}
	return p
}

// randState returns a state in the valid domain: Tokens in [-MaxTokens, Capacity]
// (or up to MaxTokens if aboveCap, as after refunds), Rem in [0, Period).
func randState(r *rand.Rand, p bucket.Params, aboveCap bool) bucket.State {
	hi := p.Capacity
	if aboveCap {
		hi = maxTok
	}
	var s bucket.State
	switch r.IntN(4) {
	case 0:
		s.Tokens = spread(r, -maxTok, hi)
	case 1:
		s.Tokens = spread(r, max(-maxTok, p.Capacity-1_000_000_000), hi)
	case 2:
		s.Tokens = spread(r, -maxTok, min(hi, -maxTok+1_000_000))
	default:
		s.Tokens = spread(r, 0, hi)
	}
	if p.Amount > 0 && r.IntN(4) != 0 {
		s.Rem = spread(r, 0, p.Period-1)
	}
	return s
}

// randElapsed returns an elapsed time anywhere from 0 to MaxInt64, log-spread.
func randElapsed(r *rand.Rand) int64 {
	switch r.IntN(6) {
	case 0:
		return pick(r, int64(0), 1, 2, math.MaxInt64, math.MaxInt64-1)
	case 1:
		return rangeInt(r, 0, 100_000)
	default:
		return spread(r, 0, math.MaxInt64)
	}
}

// ---------------------------------------------------------------------------
// math/big reference implementations.

func bi(v int64) *big.Int { return big.NewInt(v) }

// refRefill is Refill's specification written with unbounded integers:
// min(Capacity, Tokens + floor((elapsed*Amount+Rem)/Period)), the remainder
// carried unless the result is clamped, and states at or above capacity
// clamped whatever the elapsed time.
func refRefill(s bucket.State, p bucket.Params, elapsed int64) bucket.State {
	if s.Tokens >= p.Capacity {
		return bucket.State{Tokens: p.Capacity}
	}
	if elapsed <= 0 || p.Amount == 0 {
		return s
	}
	n := new(big.Int).Mul(bi(elapsed), bi(p.Amount))
	n.Add(n, bi(s.Rem))
	q, m := new(big.Int).QuoRem(n, bi(p.Period), new(big.Int))
	t := q.Add(q, bi(s.Tokens))
	if t.Cmp(bi(p.Capacity)) >= 0 {
		return bucket.State{Tokens: p.Capacity}
	}
	return bucket.State{Tokens: t.Int64(), Rem: m.Int64()}
}

// refRetryAfter is the smallest t >= 0 with Tokens + floor((t*Amount+Rem)/Period)
// >= amount, Never if there is none or it does not fit in int64.
func refRetryAfter(s bucket.State, p bucket.Params, amount int64) int64 {
	if s.Tokens >= amount {
		return 0
	}
	if amount > p.Capacity || p.Amount == 0 {
		return never
	}
	// t*Amount >= (amount-Tokens)*Period - Rem, so t = ceil(that / Amount).
	num := new(big.Int).Sub(bi(amount), bi(s.Tokens))
	num.Mul(num, bi(p.Period))
	num.Sub(num, bi(s.Rem))
	num.Add(num, bi(p.Amount-1))
	t := num.Quo(num, bi(p.Amount))
	if !t.IsInt64() {
		return never
	}
	return t.Int64()
}

// checkRefillResult reports violations of the invariants every Refill result obeys.
func checkRefillResult(t *testing.T, in bucket.State, p bucket.Params, elapsed int64, got bucket.State) {
	t.Helper()
	switch {
	case got.Tokens > p.Capacity:
		t.Fatalf("Refill(%+v, %+v, %d) = %+v: above capacity", in, p, elapsed, got)
	case got.Tokens < -maxTok:
		t.Fatalf("Refill(%+v, %+v, %d) = %+v: below -MaxTokens", in, p, elapsed, got)
	case got.Tokens == p.Capacity && got.Rem != 0:
		t.Fatalf("Refill(%+v, %+v, %d) = %+v: at capacity with a remainder", in, p, elapsed, got)
	case got.Rem < 0 || (p.Amount > 0 && got.Rem >= p.Period) || (p.Amount == 0 && got.Rem != in.Rem && got.Tokens != p.Capacity):
		t.Fatalf("Refill(%+v, %+v, %d) = %+v: remainder out of range", in, p, elapsed, got)
	case got.Tokens < min(in.Tokens, p.Capacity):
		t.Fatalf("Refill(%+v, %+v, %d) = %+v: balance decreased", in, p, elapsed, got)
	}
}

// ---------------------------------------------------------------------------
// 1. Exactness.

// TestRefillExactPerMillisecond is the motivating example: a 100/minute bucket
// refilled every millisecond for a minute earns exactly 100 tokens, and after
// every single millisecond t its balance is exactly floor(t*100000/60000).
func TestRefillExactPerMillisecond(t *testing.T) {
	p := perMinute100
	s := bucket.State{}
	for ms := int64(1); ms <= 60_000; ms++ {
		s = bucket.Refill(s, p, 1)
		want := ms * p.Amount / p.Period
		if s.Tokens != want {
			t.Fatalf("after %d ms of 1 ms refills: Tokens = %d, want %d", ms, s.Tokens, want)
		}
		if wantRem := ms * p.Amount % p.Period; ms < 60_000 && s.Rem != wantRem {
			t.Fatalf("after %d ms: Rem = %d, want %d", ms, s.Rem, wantRem)
		}
	}
	if s != (bucket.State{Tokens: 100_000}) {
		t.Fatalf("after 60000 refills of 1 ms: %+v, want exactly 100 tokens (100000 millitokens), Rem 0", s)
	}
	if one := bucket.Refill(bucket.State{}, p, 60_000); one != s {
		t.Fatalf("one refill of 60000 ms = %+v, 60000 refills of 1 ms = %+v", one, s)
	}
	// An odd rate that never divides evenly per millisecond: 7 tokens / 3 s.
	q := bucket.Params{Capacity: 1 << 40, Amount: 7000, Period: 3000}
	s = bucket.State{}
	for ms := int64(1); ms <= 30_000; ms++ {
		s = bucket.Refill(s, q, 1)
	}
	if s.Tokens != 70_000 || s.Rem != 0 {
		t.Fatalf("7 tokens/3 s refilled every ms for 30 s: %+v, want Tokens 70000 Rem 0", s)
	}
}

// TestRefillExactProperty: however a span of time is cut into Refill calls, a
// bucket that never reaches capacity is credited exactly
// floor((totalElapsed*Amount + Rem0)/Period), with the remainder carried.
func TestRefillExactProperty(t *testing.T) {
	r := newRand(1)
	iters := 2000
	if testing.Short() {
		iters = 100
	}
	for i := range iters {
		p := randParams(r, false)
		rem0 := int64(0)
		if i%2 == 1 {
			rem0 = spread(r, 0, p.Period-1)
		}
		// The largest credit that still keeps the bucket below capacity when
		// starting from the deepest representable debt.
		limit := new(big.Int).Add(bi(p.Capacity), bi(maxTok))
		limit.Sub(limit, bi(1))

		total := new(big.Int) // sum of positive elapsed steps
		credit := func(extra int64) *big.Int {
			e := new(big.Int).Add(total, bi(extra))
			c := e.Mul(e, bi(p.Amount))
			c.Add(c, bi(rem0))
			return c.Quo(c, bi(p.Period))
		}
		var steps []int64
		mode := r.IntN(5)
		n := 1 + r.IntN(300)
		if mode == 0 {
			n = 1000 + r.IntN(2000) // long runs of 1 ms
		}
		for len(steps) < n {
			var e int64
			switch mode {
			case 0:
				e = 1
			case 1:
				e = rangeInt(r, 1, 10)
			case 2:
				e = spread(r, 1, math.MaxInt64)
			case 3: // mix, including calls that must be no-ops
				e = pick(r, int64(1), 1, 1, 0, -1, math.MinInt64, rangeInt(r, 1, 1000), spread(r, 1, math.MaxInt64))
			default:
				e = spread(r, 1, p.Period)
			}
			if e > 0 && credit(e).Cmp(limit) > 0 {
				if credit(1).Cmp(limit) > 0 {
					break
				}
				e = 1
			}
			steps = append(steps, e)
			if e > 0 {
				total.Add(total, bi(e))
			}
		}
		want := credit(0)
		// Start deep enough in debt that the bucket cannot reach capacity.
		hiStart := new(big.Int).Sub(bi(p.Capacity), want)
		hiStart.Sub(hiStart, bi(1))
		t0 := spread(r, -maxTok, hiStart.Int64())

		s := bucket.State{Tokens: t0, Rem: rem0}
		for _, e := range steps {
			prev := s
			s = bucket.Refill(s, p, e)
			checkRefillResult(t, prev, p, e, s)
			if e <= 0 && s != prev {
				t.Fatalf("Refill(%+v, %+v, %d) = %+v: non-positive elapsed changed the state", prev, p, e, s)
			}
		}
		got := new(big.Int).Sub(bi(s.Tokens), bi(t0))
		if got.Cmp(want) != 0 {
			t.Fatalf("case %d: %+v from {%d %d}, %d steps totalling %v ms (mode %d): credited %v, want %v",
				i, p, t0, rem0, len(steps), total, mode, got, want)
		}
		wantRem := new(big.Int).Mul(total, bi(p.Amount))
		wantRem.Add(wantRem, bi(rem0))
		wantRem.Rem(wantRem, bi(p.Period))
		if wantRem.Int64() != s.Rem {
			t.Fatalf("case %d: %+v: final Rem %d, want %v", i, p, s.Rem, wantRem)
		}
	}
}

// TestRefillSplitInvariance: Refill(s, E) equals refilling the pieces of any
// split of E in sequence, also when the bucket reaches capacity on the way.
func TestRefillSplitInvariance(t *testing.T) {
	r := newRand(2)
	for i := range 3000 {
		p := randParams(r, true)
		s0 := randState(r, p, i%4 == 0)
		var total int64
		switch r.IntN(3) {
		case 0:
			total = rangeInt(r, 0, 200_000)
		case 1:
			total = spread(r, 0, p.Period*4) // p.Period <= 2^45: no overflow
		default:
			total = randElapsed(r)
		}
		k := 1 + r.IntN(40)
		cuts := make([]int64, 0, k+1)
		for range k - 1 {
			cuts = append(cuts, rangeInt(r, 0, total))
		}
		cuts = append(cuts, 0, total)
		slices.Sort(cuts)

		s := s0
		for j := 1; j < len(cuts); j++ {
			s = bucket.Refill(s, p, cuts[j]-cuts[j-1])
		}
		one := bucket.Refill(s0, p, total)
		if one != s {
			t.Fatalf("case %d: %+v from %+v: one refill of %d ms = %+v, pieces %v = %+v", i, p, s0, total, one, cuts, s)
		}
		if want := refRefill(s0, p, total); one != want {
			t.Fatalf("case %d: Refill(%+v, %+v, %d) = %+v, want %+v", i, s0, p, total, one, want)
		}
	}
}

// TestRefillMonotone: a longer wait never yields fewer tokens.
func TestRefillMonotone(t *testing.T) {
	r := newRand(3)
	for range 3000 {
		p := randParams(r, true)
		s := randState(r, p, false)
		e1, e2 := randElapsed(r), randElapsed(r)
		if e1 > e2 {
			e1, e2 = e2, e1
		}
		a, b := bucket.Refill(s, p, e1), bucket.Refill(s, p, e2)
		if a.Tokens > b.Tokens {
			t.Fatalf("%+v from %+v: %d ms gives %d tokens, %d ms gives %d", p, s, e1, a.Tokens, e2, b.Tokens)
		}
	}
}

// ---------------------------------------------------------------------------
// 2. Clamping.

func TestRefillClamping(t *testing.T) {
	p := perMinute100
	tests := []struct {
		name    string
		p       bucket.Params
		s       bucket.State
		elapsed int64
		want    bucket.State
	}{
		{"full stays full", p, bucket.State{Tokens: 100_000}, 1_000, bucket.State{Tokens: 100_000}},
		{"reaching capacity drops remainder", p, bucket.State{Tokens: 99_999, Rem: 59_999}, 1, bucket.State{Tokens: 100_000}},
		{"just below capacity keeps remainder", p, bucket.State{Tokens: 99_998, Rem: 0}, 1, bucket.State{Tokens: 99_999, Rem: 40_000}},
		{"overshoot clamped", p, bucket.State{Tokens: 50_000, Rem: 123}, 1_000_000, bucket.State{Tokens: 100_000}},
		{"at capacity with remainder, elapsed 0", p, bucket.State{Tokens: 100_000, Rem: 5}, 0, bucket.State{Tokens: 100_000}},
		{"above capacity, elapsed 0", p, bucket.State{Tokens: 250_000, Rem: 7}, 0, bucket.State{Tokens: 100_000}},
		{"above capacity, elapsed negative", p, bucket.State{Tokens: 250_000}, -5, bucket.State{Tokens: 100_000}},
		{"above capacity, elapsed MinInt64", p, bucket.State{Tokens: maxTok}, math.MinInt64, bucket.State{Tokens: 100_000}},
		{"above capacity, no refill", bucket.Params{Capacity: 10}, bucket.State{Tokens: 11}, 0, bucket.State{Tokens: 10}},
		{"elapsed 0 below capacity", p, bucket.State{Tokens: 5, Rem: 17}, 0, bucket.State{Tokens: 5, Rem: 17}},
		{"elapsed -1 below capacity", p, bucket.State{Tokens: -5, Rem: 17}, -1, bucket.State{Tokens: -5, Rem: 17}},
		{"elapsed MinInt64 below capacity", p, bucket.State{Tokens: -maxTok, Rem: 59_999}, math.MinInt64, bucket.State{Tokens: -maxTok, Rem: 59_999}},
		{"no refill, long wait", bucket.Params{Capacity: 10_000}, bucket.State{Tokens: 3_000}, math.MaxInt64, bucket.State{Tokens: 3_000}},
		{"no refill, with period", bucket.Params{Capacity: 10_000, Period: 1000}, bucket.State{Tokens: -3_000}, 1 << 50, bucket.State{Tokens: -3_000}},
		{"no refill, deep debt", bucket.Params{Capacity: maxTok}, bucket.State{Tokens: -maxTok}, math.MaxInt64, bucket.State{Tokens: -maxTok}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := bucket.Refill(tt.s, tt.p, tt.elapsed); got != tt.want {
				t.Errorf("Refill(%+v, %+v, %d) = %+v, want %+v", tt.s, tt.p, tt.elapsed, got, tt.want)
			}
		})
	}
}

// TestRefillClampingProperty checks the clamping rules on random inputs.
func TestRefillClampingProperty(t *testing.T) {
	r := newRand(4)
	for range 5000 {
		p := randParams(r, true)
		s := randState(r, p, true)
		e := randElapsed(r)
		if r.IntN(4) == 0 {
			e = -e
		}
		got := bucket.Refill(s, p, e)
		checkRefillResult(t, s, p, e, got)
		switch {
		case s.Tokens >= p.Capacity:
			if got != (bucket.State{Tokens: p.Capacity}) {
				t.Fatalf("Refill(%+v, %+v, %d) = %+v, want clamped to capacity", s, p, e, got)
			}
		case e <= 0 || p.Amount == 0:
			if got != s {
				t.Fatalf("Refill(%+v, %+v, %d) = %+v, want unchanged", s, p, e, got)
			}
		}
		// Refilling a full bucket again changes nothing.
		if got.Tokens == p.Capacity {
			if again := bucket.Refill(got, p, randElapsed(r)); again != got {
				t.Fatalf("refilling full %+v gave %+v", got, again)
			}
		}
	}
}

// ---------------------------------------------------------------------------
// 3. Simulation: admission never exceeds the limit over any window, and a
// request is rejected only when the exact arithmetic says it must be.

// ratModel is an independent model of the bucket: the balance is the exact
// rational level Tokens + Rem/Period, refilled continuously and capped.
type ratModel struct {
	p     bucket.Params
	level *big.Rat
}

func (m *ratModel) refill(elapsed int64) {
	if elapsed > 0 && m.p.Amount > 0 {
		m.level.Add(m.level, new(big.Rat).SetFrac(new(big.Int).Mul(bi(elapsed), bi(m.p.Amount)), bi(m.p.Period)))
	}
	if c := new(big.Rat).SetInt64(m.p.Capacity); m.level.Cmp(c) > 0 {
		m.level = c
	}
}

// state returns the model level as Tokens = floor(level), Rem = frac*Period.
func (m *ratModel) state() bucket.State {
	num, den := m.level.Num(), m.level.Denom()
	q, rm := new(big.Int).DivMod(num, den, new(big.Int)) // floor for den > 0
	var rem int64
	if rm.Sign() != 0 {
		rm.Mul(rm, bi(m.p.Period))
		rm.Quo(rm, den) // exact: den divides Period
		rem = rm.Int64()
	}
	return bucket.State{Tokens: q.Int64(), Rem: rem}
}

func simParams(r *rand.Rand) bucket.Params {
	switch r.IntN(4) {
	case 0:
		return perMinute100
	case 1:
		return bucket.Params{
			Capacity: 1000 * rangeInt(r, 1, 1000),
			Amount:   1000 * rangeInt(r, 1, 1000),
			Period:   pick(r, int64(1000), 60_000, 3_600_000),
		}
	case 2:
		return bucket.Params{
			Capacity: rangeInt(r, 1, 1_000_000),
			Amount:   rangeInt(r, 1, 1_000_000),
			Period:   rangeInt(r, 1, 1_000_000),
		}
	default: // extreme
		return bucket.Params{
			Capacity: spread(r, 1, maxTok),
			Amount:   spread(r, 1, maxTok),
			Period:   spread(r, 1, maxPer),
		}
	}
}

func TestNeverOverAdmit(t *testing.T) {
	r := newRand(5)
	sims, reqs := 120, 200
	if testing.Short() {
		sims = 10
	}
	var admittedTotal, rejectedTotal int
	for sim := range sims {
		p := simParams(r)
		// Typical request: a few tokens, never more than the capacity except
		// on purpose; typical gap: the time to earn about one request.
		unit := max(1, min(p.Capacity/4, 1000))
		gapUnit := new(big.Int).Mul(bi(unit), bi(p.Period))
		gapUnit.Quo(gapUnit, bi(p.Amount))
		gu := int64(math.MaxInt64 / 16)
		if gapUnit.IsInt64() && gapUnit.Int64() < gu {
			gu = max(1, gapUnit.Int64())
		}

		s := bucket.Full(p)
		m := &ratModel{p: p, level: new(big.Rat).SetInt64(p.Capacity)}
		times := make([]int64, reqs)
		admitted := make([]int64, reqs)
		var now int64
		for i := range reqs {
			var gap int64
			switch r.IntN(5) {
			case 0:
				gap = 0 // burst
			case 1:
				gap = rangeInt(r, 0, gu/4+1)
			case 2:
				gap = rangeInt(r, 0, 2*gu)
			case 3:
				gap = min(1, gu)
			default:
				gap = spread(r, 0, gu*4)
			}
			if now > math.MaxInt64/2 {
				gap = 0
			}
			now += gap
			times[i] = now

			var amt int64
			switch r.IntN(10) {
			case 0:
				amt = p.Capacity + rangeInt(r, 1, 1000) // never admissible
			case 1:
				amt = 0
			case 2:
				amt = spread(r, 0, p.Capacity)
			default:
				amt = rangeInt(r, 1, min(p.Capacity, 3*unit))
			}

			s = bucket.Refill(s, p, gap)
			m.refill(gap)
			if ms := m.state(); s != ms {
				t.Fatalf("sim %d req %d: after refill of %d: state %+v, exact model %+v", sim, i, gap, s, ms)
			}
			before := s
			var ok bool
			s, ok = bucket.Consume(s, amt)
			modelOK := m.level.Cmp(new(big.Rat).SetInt64(amt)) >= 0
			if ok != modelOK || ok != (before.Tokens >= amt) {
				t.Fatalf("sim %d req %d: Consume(%+v, %d) ok=%v, exact level %v", sim, i, before, amt, ok, m.level.FloatString(3))
			}
			if ok {
				m.level.Sub(m.level, new(big.Rat).SetInt64(amt))
				admitted[i] = amt
				admittedTotal++
				if s.Tokens != before.Tokens-amt || s.Rem != before.Rem {
					t.Fatalf("sim %d req %d: Consume(%+v, %d) = %+v", sim, i, before, amt, s)
				}
				continue
			}
			rejectedTotal++
			if s != before {
				t.Fatalf("sim %d req %d: rejected Consume changed state %+v -> %+v", sim, i, before, s)
			}
			// A rejected request that fits the capacity is admissible after
			// exactly RetryAfter ms, and not a millisecond earlier.
			w := bucket.RetryAfter(before, p, amt)
			if amt > p.Capacity {
				if w != never {
					t.Fatalf("sim %d req %d: RetryAfter(%+v, %+v, %d) = %d, want Never", sim, i, before, p, amt, w)
				}
				continue
			}
			if ref := refRetryAfter(before, p, amt); w != ref || w <= 0 {
				t.Fatalf("sim %d req %d: RetryAfter(%+v, %+v, %d) = %d after rejection, want %d", sim, i, before, p, amt, w, ref)
			}
			checkRetryAfterMinimal(t, before, p, amt, w)
			if w == never {
				continue // the wait does not fit in int64 (extreme parameters)
			}
			if _, ok := bucket.Consume(bucket.Refill(before, p, w), amt); !ok {
				t.Fatalf("sim %d req %d: still rejected after RetryAfter = %d ms", sim, i, w)
			}
			if _, ok := bucket.Consume(bucket.Refill(before, p, w-1), amt); ok {
				t.Fatalf("sim %d req %d: admitted after RetryAfter-1 = %d ms", sim, i, w-1)
			}
		}

		// Every window [times[a], times[b]]: the requests a..b took at most
		// Capacity + floor((times[b]-times[a])*Amount/Period).
		prefix := make([]*big.Int, reqs+1)
		prefix[0] = new(big.Int)
		for i, a := range admitted {
			prefix[i+1] = new(big.Int).Add(prefix[i], bi(a))
		}
		sum, bound := new(big.Int), new(big.Int)
		for a := range reqs {
			for b := a; b < reqs; b++ {
				sum.Sub(prefix[b+1], prefix[a])
				bound.Mul(bi(times[b]-times[a]), bi(p.Amount))
				bound.Quo(bound, bi(p.Period))
				bound.Add(bound, bi(p.Capacity))
				if sum.Cmp(bound) > 0 {
					t.Fatalf("sim %d %+v: requests %d..%d over [%d, %d] admitted %v > bound %v",
						sim, p, a, b, times[a], times[b], sum, bound)
				}
			}
		}
	}
	// The simulation must exercise both outcomes to mean anything.
	if admittedTotal < sims*reqs/10 || rejectedTotal < sims*reqs/10 {
		t.Fatalf("degenerate simulation: %d admitted, %d rejected", admittedTotal, rejectedTotal)
	}
}

// TestNeverOverAdmitTight: a client that asks for one millitoken every
// millisecond on a slow bucket gets exactly the burst plus the refill, so the
// bound of TestNeverOverAdmit is attained, not merely respected.
func TestNeverOverAdmitTight(t *testing.T) {
	p := bucket.Params{Capacity: 5, Amount: 7, Period: 3000}
	s := bucket.Full(p)
	var got int64
	const span = 100_000
	for ms := int64(0); ms <= span; ms++ {
		if ms > 0 {
			s = bucket.Refill(s, p, 1)
		}
		var ok bool
		if s, ok = bucket.Consume(s, 1); ok {
			got++
		}
	}
	if want := p.Capacity + span*p.Amount/p.Period; got != want {
		t.Fatalf("admitted %d millitokens over %d ms, want %d", got, span, want)
	}
}

// ---------------------------------------------------------------------------
// 4. RetryAfter.

func TestRetryAfter(t *testing.T) {
	p := perMinute100
	debt := bucket.Params{Capacity: 1_000_000, Amount: 1_000_000, Period: 60_000} // 1000/minute
	tests := []struct {
		name   string
		s      bucket.State
		p      bucket.Params
		amount int64
		want   int64
	}{
		{"empty bucket, one token", bucket.State{}, p, 1000, 600},
		{"empty bucket, one millitoken", bucket.State{}, p, 1, 1},
		{"empty bucket, two millitokens", bucket.State{}, p, 2, 2},
		{"empty bucket, full burst", bucket.State{}, p, 100_000, 60_000},
		{"half a token accrued", bucket.State{Tokens: 500}, p, 1000, 300},
		{"1 ms accrued, remainder counts", bucket.State{Tokens: 1, Rem: 40_000}, p, 1000, 599},
		{"same balance, no remainder", bucket.State{Tokens: 1}, p, 1000, 600},
		{"largest remainder", bucket.State{Tokens: 999, Rem: 59_999}, p, 1000, 1},
		{"already enough", bucket.State{Tokens: 1000}, p, 1000, 0},
		{"already enough, zero", bucket.State{}, p, 0, 0},
		{"negative amount", bucket.State{Tokens: -1}, p, -5, 0},
		{"negative amount in deeper debt", bucket.State{Tokens: -100}, p, -40, 36},
		{"more than capacity", bucket.State{}, p, 100_001, never},
		{"more than capacity from full", bucket.State{Tokens: 100_000}, p, 100_001, never},
		{"no refill", bucket.State{Tokens: 3}, bucket.Params{Capacity: 10}, 4, never},
		{"no refill, satisfied", bucket.State{Tokens: 3}, bucket.Params{Capacity: 10}, 3, 0},
		{"debt of 1500 tokens to zero", bucket.State{Tokens: -1_500_000}, debt, 0, 90_000},
		{"debt of 1500 tokens to one token", bucket.State{Tokens: -1_500_000}, debt, 1000, 90_060},
		{"deepest debt, fastest rate", bucket.State{Tokens: -maxTok}, bucket.Params{Capacity: maxTok, Amount: maxTok, Period: 1}, maxTok, 2},
		{"deepest debt, slowest rate", bucket.State{Tokens: -maxTok}, bucket.Params{Capacity: maxTok, Amount: 1, Period: maxPer}, maxTok, never},
		{"one millitoken, slowest rate", bucket.State{}, bucket.Params{Capacity: 1, Amount: 1, Period: maxPer}, 1, maxPer},
		// (2^18 * 2^45 - 1) / 1 = MaxInt64 exactly: representable, and equal to Never.
		{"wait of exactly MaxInt64", bucket.State{Tokens: 1<<20 - 1<<18, Rem: 1}, bucket.Params{Capacity: 1 << 20, Amount: 1, Period: maxPer}, 1 << 20, math.MaxInt64},
		{"wait of MaxInt64 + 1", bucket.State{Tokens: 1<<20 - 1<<18}, bucket.Params{Capacity: 1 << 20, Amount: 1, Period: maxPer}, 1 << 20, never},
		{"wait of MaxInt64 - 1", bucket.State{Tokens: 1<<20 - 1<<18, Rem: 2}, bucket.Params{Capacity: 1 << 20, Amount: 1, Period: maxPer}, 1 << 20, math.MaxInt64 - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bucket.RetryAfter(tt.s, tt.p, tt.amount)
			if got != tt.want {
				t.Fatalf("RetryAfter(%+v, %+v, %d) = %d, want %d", tt.s, tt.p, tt.amount, got, tt.want)
			}
			if ref := refRetryAfter(tt.s, tt.p, tt.amount); ref != tt.want {
				t.Fatalf("reference disagrees with the table: %d", ref)
			}
			checkRetryAfterMinimal(t, tt.s, tt.p, tt.amount, got)
		})
	}
}

// checkRetryAfterMinimal checks, with Refill itself, that w ms of refill bring
// the balance to amount (unless w is Never) and w-1 ms do not (unless w is 0).
// States must be at most at capacity (see TestRetryAfterAboveCapacity).
func checkRetryAfterMinimal(t *testing.T, s bucket.State, p bucket.Params, amount, w int64) {
	t.Helper()
	if w < 0 {
		t.Fatalf("RetryAfter(%+v, %+v, %d) = %d < 0", s, p, amount, w)
	}
	if w != never {
		if got := bucket.Refill(s, p, w); got.Tokens < amount {
			t.Fatalf("RetryAfter(%+v, %+v, %d) = %d, but Refill by %d gives only %+v", s, p, amount, w, w, got)
		}
		if !bucket.CanSatisfy(s, p, w, amount) {
			t.Fatalf("CanSatisfy(%+v, %+v, %d, %d) = false after RetryAfter", s, p, w, amount)
		}
	}
	if w > 0 {
		if got := bucket.Refill(s, p, w-1); got.Tokens >= amount {
			t.Fatalf("RetryAfter(%+v, %+v, %d) = %d, but Refill by %d already gives %+v", s, p, amount, w, w-1, got)
		}
		if bucket.CanSatisfy(s, p, w-1, amount) {
			t.Fatalf("CanSatisfy(%+v, %+v, %d, %d) = true before RetryAfter", s, p, w-1, amount)
		}
	}
}

func TestRetryAfterProperty(t *testing.T) {
	r := newRand(6)
	var finite int
	for i := range 50_000 {
		p := randParams(r, true)
		s := randState(r, p, false)
		var amount int64
		switch r.IntN(6) {
		case 0:
			amount = spread(r, -maxTok, maxTok)
		case 1: // just out of reach
			amount = min(p.Capacity, s.Tokens+rangeInt(r, 1, 1000))
		case 2:
			amount = pick(r, p.Capacity, p.Capacity+1, p.Capacity-1, 0, s.Tokens, s.Tokens+1, maxTok)
		default:
			amount = spread(r, max(-maxTok, s.Tokens), p.Capacity)
		}
		w := bucket.RetryAfter(s, p, amount)
		if want := refRetryAfter(s, p, amount); w != want {
			t.Fatalf("case %d: RetryAfter(%+v, %+v, %d) = %d, want %d", i, s, p, amount, w, want)
		}
		checkRetryAfterMinimal(t, s, p, amount, w)
		if w > 0 && w != never {
			finite++
		}
	}
	if finite < 5000 {
		t.Fatalf("only %d cases with a finite positive wait", finite)
	}
}

// TestRetryAfterAboveCapacity documents the one domain where "RetryAfter ms
// of refill suffice" does not hold: a balance above capacity (after a refund,
// before the next Refill) covers an amount above capacity right now, so
// RetryAfter reports 0, although the next Refill will clamp the balance below
// the amount. Amounts within capacity are consistent.
func TestRetryAfterAboveCapacity(t *testing.T) {
	p := perMinute100
	s := bucket.State{Tokens: 150_000}
	if w := bucket.RetryAfter(s, p, 100_000); w != 0 || !bucket.CanSatisfy(s, p, 0, 100_000) {
		t.Fatalf("within capacity: RetryAfter = %d, CanSatisfy = %v", w, bucket.CanSatisfy(s, p, 0, 100_000))
	}
	if w := bucket.RetryAfter(s, p, 120_000); w != 0 {
		t.Fatalf("RetryAfter(%+v, %+v, 120000) = %d, want 0 (the balance covers it)", s, p, w)
	}
	if _, ok := bucket.Consume(s, 120_000); !ok {
		t.Fatalf("Consume without refill should succeed on %+v", s)
	}
	if bucket.CanSatisfy(s, p, 0, 120_000) {
		t.Fatalf("CanSatisfy refills (and clamps) first, so it must be false")
	}
}

// TestDebtRepayment: -1500 tokens of debt on a 1000/minute bucket is repaid in
// exactly 90 seconds.
func TestDebtRepayment(t *testing.T) {
	p := bucket.Params{Capacity: 1_000_000, Amount: 1_000_000, Period: 60_000}
	s := bucket.ForceConsume(bucket.Full(p), 2_500_000)
	if s != (bucket.State{Tokens: -1_500_000}) {
		t.Fatalf("ForceConsume of 2500 tokens from full = %+v, want -1500 tokens", s)
	}
	if a := bucket.Available(s); a != -1500 {
		t.Fatalf("Available = %d, want -1500", a)
	}
	if w := bucket.RetryAfter(s, p, 0); w != 90_000 {
		t.Fatalf("RetryAfter to 0 = %d, want 90000", w)
	}
	if got := bucket.Refill(s, p, 89_999); got.Tokens >= 0 {
		t.Fatalf("after 89999 ms: %+v, want still in debt", got)
	}
	if got := bucket.Refill(s, p, 90_000); got != (bucket.State{}) {
		t.Fatalf("after 90000 ms: %+v, want exactly 0", got)
	}
	// Repaid in 90 one-second steps as well.
	for range 90 {
		s = bucket.Refill(s, p, 1000)
	}
	if s != (bucket.State{}) {
		t.Fatalf("after 90 refills of 1 s: %+v, want exactly 0", s)
	}
	if _, ok := bucket.Consume(s, 1); ok {
		t.Fatalf("a repaid bucket has nothing to give")
	}
}

// ---------------------------------------------------------------------------
// 5. Consume and ForceConsume.

func TestConsume(t *testing.T) {
	tests := []struct {
		s      bucket.State
		amount int64
		want   bucket.State
		ok     bool
	}{
		{bucket.State{Tokens: 1000}, 1000, bucket.State{Tokens: 0}, true},
		{bucket.State{Tokens: 1000, Rem: 7}, 1, bucket.State{Tokens: 999, Rem: 7}, true},
		{bucket.State{Tokens: 999, Rem: 7}, 1000, bucket.State{Tokens: 999, Rem: 7}, false},
		{bucket.State{Tokens: 5}, 0, bucket.State{Tokens: 5}, true},
		{bucket.State{Tokens: 0}, 0, bucket.State{Tokens: 0}, true},
		{bucket.State{Tokens: -1}, 0, bucket.State{Tokens: -1}, false},
		{bucket.State{Tokens: -5}, -10, bucket.State{Tokens: -5}, false},
		{bucket.State{Tokens: 5}, -1, bucket.State{Tokens: 5}, false},
		{bucket.State{Tokens: 5}, math.MinInt64, bucket.State{Tokens: 5}, false},
		{bucket.State{Tokens: maxTok}, maxTok, bucket.State{Tokens: 0}, true},
		{bucket.State{Tokens: maxTok}, math.MaxInt64, bucket.State{Tokens: maxTok}, false},
		{bucket.State{Tokens: -maxTok}, 1, bucket.State{Tokens: -maxTok}, false},
	}
	for _, tt := range tests {
		got, ok := bucket.Consume(tt.s, tt.amount)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Consume(%+v, %d) = %+v, %v; want %+v, %v", tt.s, tt.amount, got, ok, tt.want, tt.ok)
		}
	}
}

func TestConsumeProperty(t *testing.T) {
	r := newRand(7)
	for range 10_000 {
		s := bucket.State{Tokens: spread(r, -maxTok, maxTok), Rem: rangeInt(r, 0, 100)}
		amount := spread(r, math.MinInt64, math.MaxInt64)
		if r.IntN(2) == 0 {
			amount = s.Tokens + rangeInt(r, -2, 2)
		}
		got, ok := bucket.Consume(s, amount)
		wantOK := amount >= 0 && s.Tokens >= amount
		if ok != wantOK {
			t.Fatalf("Consume(%+v, %d) ok = %v, want %v", s, amount, ok, wantOK)
		}
		want := s
		if ok {
			want.Tokens -= amount
		}
		if got != want {
			t.Fatalf("Consume(%+v, %d) = %+v, want %+v", s, amount, got, want)
		}
	}
}

func TestForceConsume(t *testing.T) {
	tests := []struct {
		name   string
		s      bucket.State
		amount int64
		want   int64
	}{
		{"ordinary", bucket.State{Tokens: 5000}, 3000, 2000},
		{"into debt", bucket.State{Tokens: 1000}, 3000, -2000},
		{"deeper into debt", bucket.State{Tokens: -2000}, 500, -2500},
		{"zero", bucket.State{Tokens: -7}, 0, -7},
		{"refund", bucket.State{Tokens: -2000}, -500, -1500},
		{"refund above any capacity", bucket.State{Tokens: 10}, -1 << 40, 10 + 1<<40},
		{"saturates low", bucket.State{Tokens: -maxTok + 10}, 100, -maxTok},
		{"exactly -MaxTokens", bucket.State{Tokens: -maxTok + 10}, 10, -maxTok},
		{"saturates high", bucket.State{Tokens: maxTok - 10}, -100, maxTok},
		{"exactly MaxTokens", bucket.State{Tokens: maxTok - 10}, -10, maxTok},
		{"MaxInt64 from 0", bucket.State{}, math.MaxInt64, -maxTok},
		{"MinInt64 from 0", bucket.State{}, math.MinInt64, maxTok},
		{"MaxInt64 from -MaxTokens", bucket.State{Tokens: -maxTok}, math.MaxInt64, -maxTok},
		{"MinInt64 from MaxTokens", bucket.State{Tokens: maxTok}, math.MinInt64, maxTok},
		{"MaxInt64 from MaxTokens", bucket.State{Tokens: maxTok}, math.MaxInt64, 0},
		{"MinInt64 from -MaxTokens", bucket.State{Tokens: -maxTok}, math.MinInt64, 0},
		{"MaxTokens from MaxTokens", bucket.State{Tokens: maxTok}, maxTok, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.s
			s.Rem = 42
			got := bucket.ForceConsume(s, tt.amount)
			if got.Tokens != tt.want || got.Rem != 42 {
				t.Fatalf("ForceConsume(%+v, %d) = %+v, want Tokens %d Rem 42", s, tt.amount, got, tt.want)
			}
		})
	}
}

func TestForceConsumeProperty(t *testing.T) {
	r := newRand(8)
	lo, hi := bi(-maxTok), bi(maxTok)
	for range 10_000 {
		s := bucket.State{Tokens: spread(r, -maxTok, maxTok)}
		amount := spread(r, math.MinInt64, math.MaxInt64)
		got := bucket.ForceConsume(s, amount)
		// Exact difference, with the amount and then the result clamped.
		a := bi(amount)
		if a.Cmp(hi) > 0 {
			a = hi
		} else if a.Cmp(lo) < 0 {
			a = lo
		}
		want := new(big.Int).Sub(bi(s.Tokens), a)
		if want.Cmp(hi) > 0 {
			want = hi
		} else if want.Cmp(lo) < 0 {
			want = lo
		}
		if got.Tokens != want.Int64() {
			t.Fatalf("ForceConsume(%+v, %d) = %+v, want %v", s, amount, got, want)
		}
	}
}

// TestForceConsumeRefundClampedByRefill: a refund may lift the balance above
// capacity, and the next Refill clamps it.
func TestForceConsumeRefundClampedByRefill(t *testing.T) {
	p := perMinute100
	s := bucket.ForceConsume(bucket.State{Tokens: 90_000, Rem: 3}, -30_000)
	if s.Tokens != 120_000 {
		t.Fatalf("refund: %+v, want 120000", s)
	}
	if got := bucket.Refill(s, p, 0); got != (bucket.State{Tokens: 100_000}) {
		t.Fatalf("Refill after refund: %+v, want capacity", got)
	}
}

// ---------------------------------------------------------------------------
// 6. Available.

func TestAvailable(t *testing.T) {
	tests := []struct{ tokens, want int64 }{
		{0, 0},
		{1, 0},
		{999, 0},
		{1000, 1},
		{1001, 1},
		{1999, 1},
		{2000, 2},
		{-1, -1},
		{-999, -1},
		{-1000, -1},
		{-1001, -2},
		{-1999, -2},
		{-2000, -2},
		{-2001, -3},
		{maxTok, maxTok / 1000},
		{-maxTok, -maxTok/1000 - 1},
		{math.MaxInt64, math.MaxInt64 / 1000},
		{math.MinInt64, math.MinInt64/1000 - 1},
	}
	for _, tt := range tests {
		if got := bucket.Available(bucket.State{Tokens: tt.tokens, Rem: 5}); got != tt.want {
			t.Errorf("Available(%d) = %d, want %d", tt.tokens, got, tt.want)
		}
	}
	r := newRand(9)
	thousand := bi(1000)
	for range 10_000 {
		v := spread(r, math.MinInt64, math.MaxInt64)
		want := new(big.Int).Div(bi(v), thousand) // Euclidean: floor for a positive divisor
		if got := bucket.Available(bucket.State{Tokens: v}); got != want.Int64() {
			t.Fatalf("Available(%d) = %d, want %v", v, got, want)
		}
	}
}

// ---------------------------------------------------------------------------
// 7. Reconfigure.

func TestReconfigure(t *testing.T) {
	rate := bucket.Params{Capacity: 10_000, Amount: 1000, Period: 1000}
	conc := func(c int64) bucket.Params { return bucket.Params{Capacity: c * 1000} }
	tests := []struct {
		name     string
		s        bucket.State
		old, new bucket.Params
		want     bucket.State
	}{
		{"identical rate params untouched", bucket.State{Tokens: 4000, Rem: 999}, rate, rate, bucket.State{Tokens: 4000, Rem: 999}},
		{"identical, even above capacity", bucket.State{Tokens: 12_000, Rem: 1}, rate, rate, bucket.State{Tokens: 12_000, Rem: 1}},
		{"identical concurrency untouched", bucket.State{Tokens: -3000}, conc(10), conc(10), bucket.State{Tokens: -3000}},
		{"rate: lower capacity clamps", bucket.State{Tokens: 8000, Rem: 3}, rate, bucket.Params{Capacity: 5000, Amount: 1000, Period: 1000}, bucket.State{Tokens: 5000}},
		{"rate: higher capacity keeps balance", bucket.State{Tokens: 8000, Rem: 3}, rate, bucket.Params{Capacity: 50_000, Amount: 1000, Period: 1000}, bucket.State{Tokens: 8000}},
		{"rate: new amount drops remainder", bucket.State{Tokens: 8000, Rem: 3}, rate, bucket.Params{Capacity: 10_000, Amount: 2000, Period: 1000}, bucket.State{Tokens: 8000}},
		{"rate: new period drops remainder", bucket.State{Tokens: -8000, Rem: 999}, rate, bucket.Params{Capacity: 10_000, Amount: 1000, Period: 10}, bucket.State{Tokens: -8000}},
		{"rate: debt kept", bucket.State{Tokens: -maxTok, Rem: 5}, rate, bucket.Params{Capacity: 1, Amount: 1, Period: 1}, bucket.State{Tokens: -maxTok}},
		{"concurrency 10 -> 20", bucket.State{Tokens: 7000}, conc(10), conc(20), bucket.State{Tokens: 17_000}},
		{"concurrency 10 -> 5", bucket.State{Tokens: 7000}, conc(10), conc(5), bucket.State{Tokens: 2000}},
		{"concurrency 10 -> 2", bucket.State{Tokens: 7000}, conc(10), conc(2), bucket.State{Tokens: -1000}},
		{"concurrency, refund above old capacity", bucket.State{Tokens: 12_000}, conc(10), conc(20), bucket.State{Tokens: 20_000}},
		{"concurrency, only period differs", bucket.State{Tokens: 7000}, conc(10), bucket.Params{Capacity: 10_000, Period: 5}, bucket.State{Tokens: 7000}},
		{"concurrency saturates low", bucket.State{Tokens: -maxTok}, bucket.Params{Capacity: maxTok}, bucket.Params{Capacity: 1}, bucket.State{Tokens: -maxTok}},
		{"concurrency saturates high then clamps", bucket.State{Tokens: maxTok}, bucket.Params{Capacity: 1}, bucket.Params{Capacity: maxTok}, bucket.State{Tokens: maxTok}},
		{"concurrency -> rate keeps balance", bucket.State{Tokens: 7000}, conc(10), bucket.Params{Capacity: 20_000, Amount: 1, Period: 1}, bucket.State{Tokens: 7000}},
		{"concurrency -> rate clamps", bucket.State{Tokens: 7000}, conc(10), bucket.Params{Capacity: 5000, Amount: 1, Period: 1}, bucket.State{Tokens: 5000}},
		{"rate -> concurrency keeps balance", bucket.State{Tokens: 7000, Rem: 9}, rate, conc(20), bucket.State{Tokens: 7000}},
		{"rate -> concurrency clamps", bucket.State{Tokens: 7000, Rem: 9}, rate, conc(2), bucket.State{Tokens: 2000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := bucket.Reconfigure(tt.s, tt.old, tt.new); got != tt.want {
				t.Fatalf("Reconfigure(%+v, %+v, %+v) = %+v, want %+v", tt.s, tt.old, tt.new, got, tt.want)
			}
		})
	}
}

// TestConcurrencyLimitLifecycle: a 10-slot concurrency limit with 3 slots in
// use is resized several times; the 3 in-use slots stay in use throughout and
// the bucket recovers as they are returned.
func TestConcurrencyLimitLifecycle(t *testing.T) {
	slots := func(n int64) bucket.Params { return bucket.Params{Capacity: n * 1000} }
	p := slots(10)
	s := bucket.Full(p)
	for i := range 3 {
		var ok bool
		if s, ok = bucket.Consume(s, 1000); !ok {
			t.Fatalf("acquire %d failed on %+v", i, s)
		}
	}
	if bucket.Available(s) != 7 {
		t.Fatalf("after 3 acquisitions: %+v", s)
	}
	if got := bucket.Available(bucket.Reconfigure(s, p, slots(20))); got != 17 {
		t.Fatalf("raise to 20: %d available, want 17", got)
	}
	if got := bucket.Available(bucket.Reconfigure(s, p, slots(5))); got != 2 {
		t.Fatalf("lower to 5: %d available, want 2", got)
	}
	s = bucket.Reconfigure(s, p, slots(2))
	p = slots(2)
	if s.Tokens != -1000 {
		t.Fatalf("lower to 2: %+v, want -1000 (one slot over)", s)
	}
	// No refill ever happens, however long we wait.
	if got := bucket.Refill(s, p, math.MaxInt64); got != s {
		t.Fatalf("concurrency bucket refilled: %+v", got)
	}
	if w := bucket.RetryAfter(s, p, 1000); w != never {
		t.Fatalf("RetryAfter on a concurrency bucket = %d, want Never", w)
	}
	if _, ok := bucket.Consume(s, 1000); ok {
		t.Fatalf("acquired a slot while over the limit")
	}
	wantAfter := []int64{0, 1000, 2000}
	for i, want := range wantAfter {
		s = bucket.ForceConsume(s, -1000) // release one slot
		s = bucket.Refill(s, p, 0)
		if s.Tokens != want {
			t.Fatalf("after releasing %d slots: %+v, want %d", i+1, s, want)
		}
	}
	// Returning more than was taken is clamped at the capacity.
	s = bucket.Refill(bucket.ForceConsume(s, -1000), p, 0)
	if s.Tokens != 2000 {
		t.Fatalf("over-release: %+v, want capacity 2000", s)
	}
}

// TestReconfigureProperty checks the documented rules on random inputs.
func TestReconfigureProperty(t *testing.T) {
	r := newRand(10)
	for range 10_000 {
		old := randParams(r, true)
		nw := old
		switch r.IntN(4) {
		case 0: // identical
		case 1:
			nw.Capacity = spread(r, 1, maxTok)
		default:
			nw = randParams(r, true)
		}
		s := randState(r, old, true)
		got := bucket.Reconfigure(s, old, nw)
		if old == nw {
			if got != s {
				t.Fatalf("Reconfigure with identical params changed %+v to %+v", s, got)
			}
			continue
		}
		if got.Rem != 0 {
			t.Fatalf("Reconfigure(%+v, %+v, %+v) = %+v: remainder kept", s, old, nw, got)
		}
		want := bi(s.Tokens)
		if old.Amount == 0 && nw.Amount == 0 {
			want.Add(want, bi(nw.Capacity-old.Capacity))
			if want.Cmp(bi(-maxTok)) < 0 {
				want = bi(-maxTok)
			}
		}
		if want.Cmp(bi(nw.Capacity)) > 0 {
			want = bi(nw.Capacity)
		}
		if got.Tokens != want.Int64() {
			t.Fatalf("Reconfigure(%+v, %+v, %+v) = %+v, want Tokens %v", s, old, nw, got, want)
		}
	}
}

// ---------------------------------------------------------------------------
// 8. Validate.

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		p    bucket.Params
		ok   bool
	}{
		{"100 per minute", perMinute100, true},
		{"smallest", bucket.Params{Capacity: 1, Amount: 1, Period: 1}, true},
		{"largest", bucket.Params{Capacity: maxTok, Amount: maxTok, Period: maxPer}, true},
		{"concurrency, period 0", bucket.Params{Capacity: 10_000}, true},
		{"concurrency, any period", bucket.Params{Capacity: 10_000, Period: 60_000}, true},
		{"concurrency, period beyond MaxPeriod", bucket.Params{Capacity: 10_000, Period: math.MaxInt64}, true},
		{"concurrency, negative period", bucket.Params{Capacity: 10_000, Period: -1}, true},
		{"zero capacity", bucket.Params{Capacity: 0, Amount: 1, Period: 1}, false},
		{"negative capacity", bucket.Params{Capacity: -1, Amount: 1, Period: 1}, false},
		{"MinInt64 capacity", bucket.Params{Capacity: math.MinInt64}, false},
		{"capacity above MaxTokens", bucket.Params{Capacity: maxTok + 1, Amount: 1, Period: 1}, false},
		{"capacity MaxInt64", bucket.Params{Capacity: math.MaxInt64}, false},
		{"negative amount", bucket.Params{Capacity: 1, Amount: -1, Period: 1}, false},
		{"negative amount, no period", bucket.Params{Capacity: 1, Amount: -1}, false},
		{"amount above MaxTokens", bucket.Params{Capacity: 1, Amount: maxTok + 1, Period: 1}, false},
		{"amount, period 0", bucket.Params{Capacity: 1, Amount: 1, Period: 0}, false},
		{"amount, negative period", bucket.Params{Capacity: 1, Amount: 1, Period: -60_000}, false},
		{"amount, period above MaxPeriod", bucket.Params{Capacity: 1, Amount: 1, Period: maxPer + 1}, false},
		{"amount, period MaxInt64", bucket.Params{Capacity: 1, Amount: 1, Period: math.MaxInt64}, false},
		{"zero value", bucket.Params{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("%+v.Validate() = %v, want ok=%v", tt.p, err, tt.ok)
			}
			if err != nil && err.Error() == "" {
				t.Fatalf("empty error message")
			}
		})
	}
}

// ---------------------------------------------------------------------------
// 9. Milli.

func TestMilli(t *testing.T) {
	lim := maxTok / 1000 // 4611686018427387
	tests := []struct {
		tokens, want int64
		ok           bool
	}{
		{0, 0, true},
		{1, 1000, true},
		{-1, -1000, true},
		{100, 100_000, true},
		{lim, lim * 1000, true},
		{-lim, -lim * 1000, true},
		{lim - 1, (lim - 1) * 1000, true},
		{lim + 1, 0, false},
		{-lim - 1, 0, false},
		{math.MaxInt64, 0, false},
		{math.MinInt64, 0, false},
		{math.MaxInt64 / 1000, 0, false},
		{math.MaxInt64/1000 + 1, 0, false}, // would wrap if multiplied
	}
	for _, tt := range tests {
		got, ok := bucket.Milli(tt.tokens)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Milli(%d) = %d, %v; want %d, %v", tt.tokens, got, ok, tt.want, tt.ok)
		}
		if ok && (got > maxTok || got < -maxTok) {
			t.Errorf("Milli(%d) = %d outside ±MaxTokens", tt.tokens, got)
		}
	}
	if lim*1000 > maxTok || (lim+1)*1000 <= maxTok {
		t.Fatalf("test premise: %d is not the largest whole-token count", lim)
	}
}

// ---------------------------------------------------------------------------
// 10. Overflow safety at the extremes.

func TestRefillExtremes(t *testing.T) {
	amounts := []int64{1, 2, maxTok / 2, maxTok - 1, maxTok}
	periods := []int64{1, 2, 3, 60_000, maxPer - 1, maxPer}
	caps := []int64{1, 1000, maxTok - 1, maxTok}
	elapsed := []int64{1, 2, 1000, 1 << 31, 1 << 45, 1<<62 - 1, math.MaxInt64 - 1, math.MaxInt64}
	for _, c := range caps {
		for _, a := range amounts {
			for _, per := range periods {
				p := bucket.Params{Capacity: c, Amount: a, Period: per}
				tokens := []int64{-maxTok, -maxTok + 1, -1, 0, c - 1}
				rems := []int64{0, per - 1, per / 2}
				for _, tok := range tokens {
					for _, rem := range rems {
						s := bucket.State{Tokens: tok, Rem: rem}
						for _, e := range elapsed {
							got := bucket.Refill(s, p, e)
							checkRefillResult(t, s, p, e, got)
							if want := refRefill(s, p, e); got != want {
								t.Fatalf("Refill(%+v, %+v, %d) = %+v, want %+v", s, p, e, got, want)
							}
						}
						for _, amt := range []int64{-maxTok, 0, 1, c - 1, c, c + 1, maxTok} {
							w := bucket.RetryAfter(s, p, amt)
							if want := refRetryAfter(s, p, amt); w != want {
								t.Fatalf("RetryAfter(%+v, %+v, %d) = %d, want %d", s, p, amt, w, want)
							}
							checkRetryAfterMinimal(t, s, p, amt, w)
						}
					}
				}
			}
		}
	}
}

// TestRefillMatchesReference compares Refill with the math/big reference on
// random inputs anywhere in the valid domain.
func TestRefillMatchesReference(t *testing.T) {
	r := newRand(11)
	for i := range 100_000 {
		p := randParams(r, true)
		s := randState(r, p, i%8 == 0)
		e := randElapsed(r)
		got := bucket.Refill(s, p, e)
		checkRefillResult(t, s, p, e, got)
		if want := refRefill(s, p, e); got != want {
			t.Fatalf("case %d: Refill(%+v, %+v, %d) = %+v, want %+v", i, s, p, e, got, want)
		}
	}
}

// TestOperationsStayInRange drives random sequences of every operation with
// extreme values and checks that balances never leave [-MaxTokens, MaxTokens]
// and are at most the capacity after each Refill.
func TestOperationsStayInRange(t *testing.T) {
	r := newRand(12)
	for range 300 {
		p := randParams(r, true)
		s := randState(r, p, true)
		for range 100 {
			switch r.IntN(6) {
			case 0, 1:
				e := randElapsed(r)
				prev := s
				s = bucket.Refill(s, p, e)
				checkRefillResult(t, prev, p, e, s)
			case 2:
				s, _ = bucket.Consume(s, spread(r, math.MinInt64, math.MaxInt64))
			case 3:
				s = bucket.ForceConsume(s, spread(r, math.MinInt64, math.MaxInt64))
			case 4:
				amt := spread(r, -maxTok, maxTok)
				if s.Tokens <= p.Capacity {
					checkRetryAfterMinimal(t, s, p, amt, bucket.RetryAfter(s, p, amt))
				}
			default:
				np := randParams(r, true)
				if p.Amount == 0 && np.Amount == 0 || r.IntN(2) == 0 {
					s = bucket.Reconfigure(s, p, np)
					p = np
				}
			}
			if s.Tokens < -maxTok || s.Tokens > maxTok {
				t.Fatalf("balance %d out of ±MaxTokens with %+v", s.Tokens, p)
			}
			if s.Rem < 0 || (p.Amount > 0 && s.Rem >= p.Period) {
				t.Fatalf("remainder %d out of range with %+v", s.Rem, p)
			}
		}
	}
}

// TestFull checks the constructor.
func TestFull(t *testing.T) {
	for _, c := range []int64{1, 1000, maxTok} {
		p := bucket.Params{Capacity: c, Amount: 1, Period: 1}
		s := bucket.Full(p)
		if s != (bucket.State{Tokens: c}) {
			t.Fatalf("Full(%+v) = %+v", p, s)
		}
		if bucket.Refill(s, p, 1000) != s {
			t.Fatalf("a full bucket changed on refill")
		}
		if _, ok := bucket.Consume(s, c); !ok {
			t.Fatalf("a full bucket cannot give its capacity")
		}
	}
}

// Tokens undoes Milli, and rounds fractions toward zero.
func TestTokens(t *testing.T) {
	tests := []struct{ milli, want int64 }{
		{0, 0}, {999, 0}, {1000, 1}, {1999, 1}, {-999, 0}, {-1000, -1}, {-1500, -1},
		{maxTok, maxTok / bucket.MilliPerToken}, {-maxTok, -maxTok / bucket.MilliPerToken},
	}
	for _, tt := range tests {
		if got := bucket.Tokens(tt.milli); got != tt.want {
			t.Errorf("Tokens(%d) = %d, want %d", tt.milli, got, tt.want)
		}
	}
	for _, n := range []int64{0, 1, -1, 12345, maxTok / bucket.MilliPerToken} {
		if m, ok := bucket.Milli(n); !ok || bucket.Tokens(m) != n {
			t.Errorf("Tokens(Milli(%d)) = %d, %v", n, bucket.Tokens(m), ok)
		}
	}
}
