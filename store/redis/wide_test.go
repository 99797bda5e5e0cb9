package redis_test

import (
	"context"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/store/redis"
)

// The scripts' integers (luaWide), run by a real Redis on random numbers
// of up to 40 digits and on the edges of the limbs, agree with math/big:
// sums, differences, products of non-negative numbers, comparisons and
// formatting.
func TestWideArithmeticIsExact(t *testing.T) {
	c := rawClient(t, serverURL)
	script := rueidis.NewLuaScript(redis.LuaWide + `
local w = wide()
local w_parse, w_format, w_add, w_mul, w_cmp = w.parse, w.format, w.add, w.mul, w.cmp
local out = {}
for i = 1, #ARGV, 2 do
  local a, b = w_parse(ARGV[i]), w_parse(ARGV[i + 1])
  local prod = ''
  if not a.neg and not b.neg then prod = w_format(w_mul(a, b)) end
  out[#out + 1] = {w_format(w_add(a, b)), w_cmp(a, b), prod, w_format(a)}
end
return out
`)
	r := rand.New(rand.NewPCG(1, 2))
	edges := []string{"0", "-0", "1", "-1", "9999999", "10000000", "-10000000", "10000001", "99999999999999", "100000000000000",
		"0000123", "-0000000", "1298074214633706907132624082305023", "-1298074214633706907132624082305023"}
	var args []string
	for _, a := range edges {
		for _, b := range edges {
			args = append(args, a, b)
		}
	}
	for range 2000 {
		args = append(args, randDecimal(r), randDecimal(r))
	}
	res, err := script.Exec(context.Background(), c, nil, args).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range res {
		a, b := bigOf(t, args[2*i]), bigOf(t, args[2*i+1])
		got, _ := row.ToArray()
		sum, _ := got[0].ToString()
		cmp, _ := got[1].AsInt64()
		prod, _ := got[2].ToString()
		self, _ := got[3].ToString()
		if want := new(big.Int).Add(a, b).String(); sum != want {
			t.Errorf("%s + %s = %s, want %s", args[2*i], args[2*i+1], sum, want)
		}
		if want := a.Cmp(b); int(cmp) != want {
			t.Errorf("cmp(%s, %s) = %d, want %d", args[2*i], args[2*i+1], cmp, want)
		}
		if a.Sign() >= 0 && b.Sign() >= 0 && !strings.HasPrefix(args[2*i], "-") && !strings.HasPrefix(args[2*i+1], "-") {
			if want := new(big.Int).Mul(a, b).String(); prod != want {
				t.Errorf("%s x %s = %s, want %s", args[2*i], args[2*i+1], prod, want)
			}
		}
		if self != a.String() {
			t.Errorf("format(parse(%s)) = %s, want %s", args[2*i], self, a.String())
		}
	}
}

// The scripts' numbers (luaNum: plain doubles while exact, limbs beyond)
// agree with math/big on random numbers of up to 20 digits and around
// 2^53, 10^15 and the square root of 2^53: sums, differences, signed
// products, comparisons, formatting, and results of results (2ab, a²b),
// which cross from plain to limbs.
func TestNumArithmeticIsExact(t *testing.T) {
	c := rawClient(t, serverURL)
	script := rueidis.NewLuaScript(redis.LuaNum + `
local out = {}
for i = 1, #ARGV, 2 do
  local a, b = n_parse(ARGV[i]), n_parse(ARGV[i + 1])
  local ab = n_mul(a, b)
  out[#out + 1] = {n_format(n_add(a, b)), n_format(n_add(a, n_neg(b))), n_format(ab), n_cmp(a, b), n_format(a),
    n_format(n_add(ab, ab)), n_format(n_mul(n_mul(a, a), b)), n_sign(n_add(ab, n_neg(ab)))}
end
return out
`)
	r := rand.New(rand.NewPCG(3, 4))
	edges := []string{"0", "-0", "1", "-1", "94906265", "94906266", "-94906266", "67108864", "134217728",
		"999999999999999", "-999999999999999", "1000000000000000", "4503599627370496", "9007199254740991",
		"9007199254740992", "-9007199254740993", "123456789012345678"}
	var args []string
	for _, a := range edges {
		for _, b := range edges {
			args = append(args, a, b)
		}
	}
	for range 2000 {
		args = append(args, randDecimalUpTo(r, 20), randDecimalUpTo(r, 20))
	}
	res, err := script.Exec(context.Background(), c, nil, args).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range res {
		x, y := args[2*i], args[2*i+1]
		a, b := bigOf(t, x), bigOf(t, y)
		ab := new(big.Int).Mul(a, b)
		want := []string{
			new(big.Int).Add(a, b).String(),
			new(big.Int).Sub(a, b).String(),
			ab.String(),
			strconv.Itoa(a.Cmp(b)),
			a.String(),
			new(big.Int).Add(ab, ab).String(),
			new(big.Int).Mul(new(big.Int).Mul(a, a), b).String(),
			"0",
		}
		got, _ := row.ToArray()
		for j, w := range want {
			g, err := got[j].ToString()
			if err != nil {
				n, _ := got[j].AsInt64()
				g = strconv.FormatInt(n, 10)
			}
			if g != w {
				t.Errorf("%s, %s: result %d = %s, want %s", x, y, j, g, w)
			}
		}
	}
}

// randDecimal returns a random integer of 1 to 40 digits, of either sign.
func randDecimal(r *rand.Rand) string { return randDecimalUpTo(r, 40) }

// randDecimalUpTo returns a random integer of 1 to digits digits, of either
// sign.
func randDecimalUpTo(r *rand.Rand, digits int) string {
	n := 1 + r.IntN(digits)
	var b strings.Builder
	if r.IntN(2) == 0 {
		b.WriteByte('-')
	}
	b.WriteByte(byte('1' + r.IntN(9)))
	for range n - 1 {
		b.WriteByte(byte('0' + r.IntN(10)))
	}
	return b.String()
}

func bigOf(t *testing.T, s string) *big.Int {
	t.Helper()
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		t.Fatalf("not a number: %q", s)
	}
	return v
}
