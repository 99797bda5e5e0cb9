package redis_test

import (
	"context"
	"math/big"
	"math/rand/v2"
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
	if serverURL == "" {
		t.Skip("no redis-server")
	}
	co, err := redis.ClientOption(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rueidis.NewClient(co)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	script := rueidis.NewLuaScript(redis.LuaWide + `
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

// randDecimal returns a random integer of 1 to 40 digits, of either sign.
func randDecimal(r *rand.Rand) string {
	n := 1 + r.IntN(40)
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
