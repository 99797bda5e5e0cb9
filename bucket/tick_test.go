package bucket_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
)

// randInstant returns a Unix-millisecond instant: mostly realistic, some
// anywhere in the int64 range.
func randInstant(r *rand.Rand) int64 {
	switch r.IntN(4) {
	case 0:
		return spread(r, math.MinInt64/2, math.MaxInt64/2)
	case 1:
		return rangeInt(r, -1000, 1000)
	default:
		return rangeInt(r, 1_700_000_000_000, 4_102_444_800_000)
	}
}

// later returns at+e, or math.MaxInt64 when that overflows.
func later(at, e int64) int64 {
	if at > 0 && e > math.MaxInt64-at {
		return math.MaxInt64
	}
	return at + e
}

// checkFullTick checks the full tick of s at `at` against Refill at now:
// the state it gives at now, and that a debit added to it is the debit of
// the refilled state (when not full at now).
func checkFullTick(t *testing.T, p bucket.Params, s bucket.State, at, now, debit int64) {
	t.Helper()
	ft := bucket.FullTick(s, p, at)
	want := bucket.Refill(s, p, now-at)
	if got := bucket.AtTick(ft, p, now); got != want {
		t.Fatalf("AtTick(FullTick(%+v, %+v, %d), now %d) = %+v, Refill gives %+v", s, p, at, now, got, want)
	}
	full := ft.Cmp(bucket.TickAt(now, p)) <= 0
	if full != (want == bucket.State{Tokens: p.Capacity}) {
		t.Fatalf("full at now = %v for refilled %+v (%+v)", full, want, p)
	}
	if debit <= p.Capacity {
		covers := ft.Cmp(bucket.CoverTick(now, debit, p)) <= 0
		if covers != (want.Tokens >= debit) {
			t.Fatalf("covers %d = %v for refilled %+v (%+v)", debit, covers, want, p)
		}
	}
	if full || debit < 0 {
		return
	}
	// Not full at now: a debit adds exactly debit·Period, whenever it is
	// read afterwards.
	after := ft.Add(bucket.DebitTicks(debit, p))
	debited := bucket.ForceConsume(want, debit)
	if want.Tokens-debit < -bucket.MaxTokens {
		return // the balance saturates; the tick does not
	}
	for _, e := range []int64{0, 1, p.Period, 1 << 20} {
		t2 := later(now, e)
		if got, exp := bucket.AtTick(after, p, t2), bucket.Refill(debited, p, t2-now); got != exp {
			t.Fatalf("debit %d of %+v at %d, read at +%d: %+v, want %+v", debit, want, now, e, got, exp)
		}
	}
}

func TestFullTickIsRefill(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for i := range 200_000 {
		p := randParams(r, false)
		s := randState(r, p, i%3 == 0)
		at := randInstant(r)
		now := later(at, randElapsed(r))
		debit := pick(r, int64(0), 1, 1000, p.Capacity, p.Capacity/3, spread(r, 0, p.Capacity))
		checkFullTick(t, p, s, at, now, debit)
	}
}

func FuzzFullTick(f *testing.F) {
	elapsed := []int64{1, 1, 1, 0, 7, 90_000, math.MaxInt64 / 4, 1 << 45, 3, 60_000, 1 << 40}
	addSeeds(f, func(i int) int64 { return elapsed[i%len(elapsed)] })
	f.Fuzz(func(t *testing.T, capacity, amount, period, tokens, rem, elapsed int64) {
		p := bucket.Params{Capacity: capacity, Amount: amount, Period: period}
		s := bucket.State{Tokens: tokens, Rem: rem}
		if !validInput(p, s) || amount == 0 || elapsed < 0 {
			t.Skip()
		}
		at := int64(1_767_225_600_000)
		checkFullTick(t, p, s, at, later(at, elapsed), min(max(tokens, 0), capacity))
	})
}

// A debit of a full limit cannot be an addition: it sets the full tick to
// now·Amount + c·Period, which is the full tick of the debited state.
func TestDebitOfFullLimitSets(t *testing.T) {
	p := bucket.Params{Capacity: 100_000, Amount: 100_000, Period: 60_000}
	now := int64(1_767_225_600_000)
	set := bucket.TickAt(now, p).Add(bucket.DebitTicks(1000, p))
	if got, want := set, bucket.FullTick(bucket.State{Tokens: 99_000}, p, now); got != want {
		t.Fatalf("set %v, FullTick of the debited state %v", got, want)
	}
	// An addition to a full tick far in the past would lose the debit.
	old := bucket.TickAt(now-3_600_000, p)
	if got := bucket.AtTick(old.Add(bucket.DebitTicks(1000, p)), p, now); got.Tokens != p.Capacity {
		t.Fatalf("added to a stale full tick: %+v, want still full (the debit absorbed)", got)
	}
}

func bigOf(t bucket.Tick) *big.Int {
	v, ok := new(big.Int).SetString(t.String(), 10)
	if !ok {
		panic("bad tick string " + t.String())
	}
	return v
}

func randTick(r *rand.Rand) (bucket.Tick, *big.Int) {
	// Below 2^125 in magnitude, so that sums of two stay in range.
	a, b := spread(r, -1<<62, 1<<62), spread(r, -1<<62, 1<<62)
	c := spread(r, math.MinInt64, math.MaxInt64)
	p := bucket.Params{Capacity: 1, Amount: b, Period: 1}
	tk := bucket.TickAt(a, p).Add(bucket.TickOf(c))
	want := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
	want.Add(want, big.NewInt(c))
	return tk, want
}

func TestTickArithmeticMatchesBig(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for range 100_000 {
		x, bx := randTick(r)
		y, by := randTick(r)
		if got := bigOf(x); got.Cmp(bx) != 0 {
			t.Fatalf("String %s, want %s", got, bx)
		}
		if got := bigOf(x.Add(y)); got.Cmp(new(big.Int).Add(bx, by)) != 0 {
			t.Fatalf("%s + %s = %s", bx, by, got)
		}
		if got := bigOf(x.Sub(y)); got.Cmp(new(big.Int).Sub(bx, by)) != 0 {
			t.Fatalf("%s - %s = %s", bx, by, got)
		}
		if got := x.Cmp(y); got != bx.Cmp(by) {
			t.Fatalf("Cmp(%s, %s) = %d", bx, by, got)
		}
		back, err := bucket.ParseTick(x.String())
		if err != nil || back != x {
			t.Fatalf("ParseTick(%s) = %v, %v", x, back, err)
		}
		if v, ok := x.Int64(); ok != bx.IsInt64() || ok && v != bx.Int64() {
			t.Fatalf("Int64(%s) = %d, %v", bx, v, ok)
		}
		// FullAt is the ceiling of the division by Amount.
		a := spread(r, 1, bucket.MaxTokens)
		q, m := new(big.Int).DivMod(bx, big.NewInt(a), new(big.Int))
		if m.Sign() != 0 {
			q.Add(q, big.NewInt(1))
		}
		want := q.Int64()
		switch {
		case q.Cmp(big.NewInt(math.MaxInt64)) > 0:
			want = math.MaxInt64
		case q.Cmp(big.NewInt(math.MinInt64)) < 0:
			want = math.MinInt64
		}
		if got := bucket.FullAt(x, bucket.Params{Capacity: 1, Amount: a, Period: 1}); got != want {
			t.Fatalf("FullAt(%s, amount %d) = %d, want %d", bx, a, got, want)
		}
	}
}

func TestParseTick(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"0", "0", true},
		{"-0", "0", true},
		{"123456789012345678901234567890123", "123456789012345678901234567890123", true},
		{"-99999999999999999999999999999999999999", "-99999999999999999999999999999999999999", true},
		{"12.000", "12", true},
		{"1.2E+31", "12000000000000000000000000000000", true},
		{"1e2", "100", true},
		{"1.5", "", false},
		{"", "", false},
		{"12a", "", false},
		{"170141183460469231731687303715884105728", "", false}, // 2^127
	} {
		got, err := bucket.ParseTick(c.in)
		if (err == nil) != c.ok || c.ok && got.String() != c.want {
			t.Errorf("ParseTick(%q) = %v, %v; want %s (ok %v)", c.in, got, err, c.want, c.ok)
		}
	}
}
