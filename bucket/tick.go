package bucket

import (
	"errors"
	"math"
	"math/big"
	"math/bits"
	"strconv"
)

// Full ticks.
//
// A refilling limit's state at an instant `at` (Tokens, and the remainder
// Rem of its last refill) is, equivalently, one number: the instant at
// which refill alone brings it to capacity, counted in ticks of 1/Amount
// millisecond, so that this instant is always an integer:
//
//	FullTick = at·Amount − Rem + (Capacity − Tokens)·Period
//
// The number does not move with time: the state at any later instant now
// is Capacity + floor((now·Amount − FullTick) / Period) tokens, capped at
// the capacity (AtTick), exactly what Refill computes from the state at
// `at`. So:
//
//   - a limit is full at now if and only if FullTick <= now·Amount (TickAt);
//   - it covers a debit of c <= Capacity at now if and only if
//     FullTick <= now·Amount + (Capacity − c)·Period (CoverTick);
//   - debiting c at now, when the limit is not full at now, adds exactly
//     c·Period to it (DebitTicks), and a refund subtracts it, at any time;
//     debiting c when it is full at now sets it to now·Amount + c·Period.
//
// A store can therefore debit a limit with one addition whose condition
// compares the stored number with constants, however long ago it was last
// written: refill is in the comparison, never in a write. Only limits that
// refill (Amount > 0) have a full tick.

// Tick is a signed 128-bit integer: a full tick, or a difference of two.
// The zero value is 0. Full ticks of valid parameters and states (Validate,
// |Tokens| <= MaxTokens, Unix-millisecond times) stay below 2^110 in
// magnitude, 34 decimal digits.
type Tick struct {
	hi int64
	lo uint64
}

// TickOf returns v as a Tick.
func TickOf(v int64) Tick { return Tick{hi: v >> 63, lo: uint64(v)} }

// mulTick returns a·b, exactly.
func mulTick(a, b int64) Tick {
	neg := (a < 0) != (b < 0)
	hi, lo := bits.Mul64(abs64(a), abs64(b))
	t := Tick{hi: int64(hi), lo: lo}
	if neg {
		return t.Neg()
	}
	return t
}

func abs64(v int64) uint64 {
	if v < 0 {
		return uint64(-v) // two's complement: MinInt64 gives 1<<63
	}
	return uint64(v)
}

// Add returns t+u.
func (t Tick) Add(u Tick) Tick {
	lo, c := bits.Add64(t.lo, u.lo, 0)
	return Tick{hi: t.hi + u.hi + int64(c), lo: lo}
}

// Sub returns t−u.
func (t Tick) Sub(u Tick) Tick {
	lo, b := bits.Sub64(t.lo, u.lo, 0)
	return Tick{hi: t.hi - u.hi - int64(b), lo: lo}
}

// Neg returns −t.
func (t Tick) Neg() Tick { return Tick{}.Sub(t) }

// Cmp returns −1, 0 or +1 as t is less than, equal to or greater than u.
func (t Tick) Cmp(u Tick) int {
	switch {
	case t.hi < u.hi:
		return -1
	case t.hi > u.hi:
		return 1
	case t.lo < u.lo:
		return -1
	case t.lo > u.lo:
		return 1
	}
	return 0
}

// Sign returns −1, 0 or +1 as t is negative, zero or positive.
func (t Tick) Sign() int { return t.Cmp(Tick{}) }

// Int64 returns t as an int64, and whether it fits.
func (t Tick) Int64() (int64, bool) {
	v := int64(t.lo)
	return v, t.hi == v>>63
}

// divFloor returns floor(t/d) and t mod d (in [0, d)) for d > 0; ok is false
// when the quotient does not fit in an int64.
func (t Tick) divFloor(d int64) (q, r int64, ok bool) {
	neg := t.hi < 0
	m := t
	if neg {
		m = t.Neg()
	}
	hi, lo := uint64(m.hi), m.lo
	if hi >= uint64(d) {
		return 0, 0, false
	}
	uq, ur := bits.Div64(hi, lo, uint64(d))
	if !neg {
		if uq > math.MaxInt64 {
			return 0, 0, false
		}
		return int64(uq), int64(ur), true
	}
	// floor(−m/d) = −ceil(m/d).
	if uq >= 1<<63 && (uq > 1<<63 || ur != 0) {
		return 0, 0, false
	}
	if ur != 0 {
		uq++
		ur = uint64(d) - ur
	}
	return -int64(uq), int64(ur), true
}

// String returns t in decimal, as DynamoDB and math/big write integers.
func (t Tick) String() string {
	if v, ok := t.Int64(); ok {
		return strconv.FormatInt(v, 10)
	}
	neg := t.hi < 0
	m := t
	if neg {
		m = t.Neg()
	}
	hi, lo := uint64(m.hi), m.lo
	// Peel off 19 digits at a time: 10^19 is the largest power of ten
	// below 2^64.
	const chunk = 1e19
	var parts []uint64
	for hi != 0 || lo >= chunk {
		var r uint64
		hi, r = bits.Div64(0, hi, chunk)
		lo, r = bits.Div64(r, lo, chunk)
		parts = append(parts, r)
	}
	b := make([]byte, 0, 40)
	if neg {
		b = append(b, '-')
	}
	b = strconv.AppendUint(b, lo, 10)
	for i := len(parts) - 1; i >= 0; i-- {
		s := strconv.FormatUint(parts[i], 10)
		for range 19 - len(s) {
			b = append(b, '0')
		}
		b = append(b, s...)
	}
	return string(b)
}

var errTickSyntax = errors.New("not an integer within 128 bits")

// ParseTick reads a decimal integer as String writes it. It also accepts
// the other forms a store may return for an integral number (a fraction of
// zeros, an exponent: "12.0", "1.2E+31").
func ParseTick(s string) (Tick, error) {
	if t, ok := parseDigits(s); ok {
		return t, nil
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || !r.IsInt() {
		return Tick{}, errTickSyntax
	}
	n := r.Num()
	if n.BitLen() > 127 {
		return Tick{}, errTickSyntax
	}
	m := new(big.Int).Abs(n)
	lo := new(big.Int).And(m, new(big.Int).SetUint64(math.MaxUint64)).Uint64()
	hi := new(big.Int).Rsh(m, 64).Uint64()
	t := Tick{hi: int64(hi), lo: lo}
	if n.Sign() < 0 {
		t = t.Neg()
	}
	return t, nil
}

// parseDigits parses an optional '-' and at most 38 decimal digits.
func parseDigits(s string) (Tick, bool) {
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) == 0 || len(s) > 38 {
		return Tick{}, false
	}
	var hi, lo uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return Tick{}, false
		}
		// (hi, lo) = (hi, lo)·10 + digit; 38 digits stay below 2^127.
		h1, l1 := bits.Mul64(lo, 10)
		hi = hi*10 + h1
		var carry uint64
		lo, carry = bits.Add64(l1, uint64(c-'0'), 0)
		hi += carry
	}
	t := Tick{hi: int64(hi), lo: lo}
	if neg {
		t = t.Neg()
	}
	return t, true
}

// TickAt returns the instant now (Unix ms) in ticks of p: now·Amount, with
// now in p's time (Params.Moment). A limit whose full tick is at most
// TickAt(now, p) is full at now.
func TickAt(now int64, p Params) Tick { return mulTick(p.Moment(now), p.Amount) }

// DebitTicks returns amount·Period: how far a debit (or, negated, a
// refund) of amount millitokens moves a limit's full tick.
func DebitTicks(amount int64, p Params) Tick { return mulTick(amount, p.Period) }

// CoverTick returns the greatest full tick at which a limit of parameters
// p holds at least amount millitokens at now: now·Amount +
// (Capacity − amount)·Period. It means that only for amount <= Capacity;
// a larger amount is never covered.
func CoverTick(now, amount int64, p Params) Tick {
	return TickAt(now, p).Add(mulTick(p.Capacity-amount, p.Period))
}

// EmptyTick returns the full tick of a limit of parameters p (Amount > 0)
// that holds exactly nothing at until: until·Amount + Capacity·Period. A
// limit whose full tick is at least that holds nothing before until, and
// refills from zero after it.
func EmptyTick(until int64, p Params) Tick {
	return TickAt(until, p).Add(DebitTicks(p.Capacity, p))
}

// FullTick returns the full tick of a limit of parameters p (Amount > 0)
// holding s at the instant at (Unix ms): at·Amount − Rem +
// (Capacity − Tokens)·Period. A balance above the capacity gives a full
// tick before at: the limit is full from at on.
func FullTick(s State, p Params, at int64) Tick {
	return TickAt(at, p).Sub(TickOf(s.Rem)).Add(mulTick(p.Capacity-s.Tokens, p.Period))
}

// AtTick returns the state at now of a limit of parameters p (Amount > 0)
// whose full tick is ft: full if ft <= now·Amount, else Capacity +
// floor((now·Amount − ft)/Period) tokens with the remainder of that
// division. For every state s and instants at <= now,
// AtTick(FullTick(s, p, at), p, now) equals Refill(s, p, now−at). An
// instant before at gives less than s (refill undone): a store whose
// writers' clocks disagree sees the laggard's view as a smaller balance.
// The balance saturates at −MaxTokens.
func AtTick(ft Tick, p Params, now int64) State {
	d := TickAt(now, p).Sub(ft)
	if d.Sign() >= 0 {
		return State{Tokens: p.Capacity}
	}
	q, r, ok := d.divFloor(p.Period)
	if !ok || q < -MaxTokens-p.Capacity {
		return State{Tokens: -MaxTokens, Rem: r}
	}
	return State{Tokens: saturate(p.Capacity + q), Rem: r}
}

// FullAt returns the first millisecond at which a limit of parameters p
// (Amount > 0) whose full tick is ft is full: ceil(ft / Amount) in p's time
// (Params.Millis), saturated to the int64 range.
func FullAt(ft Tick, p Params) int64 { return p.Millis(fullMoment(ft, p)) }

// fullMoment is FullAt in p's time.
func fullMoment(ft Tick, p Params) int64 {
	q, r, ok := ft.divFloor(p.Amount)
	switch {
	case !ok && ft.Sign() < 0:
		return math.MinInt64
	case !ok, q == math.MaxInt64 && r != 0:
		return math.MaxInt64
	case r != 0:
		return q + 1
	}
	return q
}
