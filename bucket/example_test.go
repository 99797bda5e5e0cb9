package bucket_test

import (
	"fmt"

	"github.com/tollgate-rl/tollgate/bucket"
)

// A limit of 100 requests per minute, each request costing one token.
func Example() {
	p := bucket.Params{
		Capacity: 100_000, // burst of 100 tokens, in millitokens
		Amount:   100_000, // 100 tokens...
		Period:   60_000,  // ...per minute, in milliseconds
	}
	s := bucket.Full(p)

	// A burst drains the bucket.
	s, ok := bucket.Consume(s, 100_000)
	fmt.Println("burst of 100:", ok, "available:", bucket.Available(s))
	_, ok = bucket.Consume(s, 1000)
	fmt.Println("one more:", ok, "retry after ms:", bucket.RetryAfter(s, p, 1000))

	// 599 ms later the bucket holds 998.33 millitokens: not yet a token.
	s = bucket.Refill(s, p, 599)
	fmt.Println("after 599 ms:", s.Tokens, "millitokens, retry after ms:", bucket.RetryAfter(s, p, 1000))

	// One more millisecond: the carried remainder completes the token exactly.
	s = bucket.Refill(s, p, 1)
	s, ok = bucket.Consume(s, 1000)
	fmt.Println("after 600 ms:", ok)

	// A long pause refills to capacity and no further.
	s = bucket.Refill(s, p, 3_600_000)
	fmt.Println("after an hour:", bucket.Available(s))

	// Waiting can never cover more than the capacity.
	fmt.Println("101 tokens:", bucket.RetryAfter(s, p, 101_000) == bucket.Never)
	// Output:
	// burst of 100: true available: 0
	// one more: false retry after ms: 600
	// after 599 ms: 998 millitokens, retry after ms: 1
	// after 600 ms: true
	// after an hour: 100
	// 101 tokens: true
}

// Work of unknown cost is admitted first and charged afterwards; the debt is
// repaid by refill before the next request is admitted.
func ExampleForceConsume() {
	p := bucket.Params{Capacity: 100_000, Amount: 100_000, Period: 60_000} // 100/minute
	s := bucket.Full(p)

	s = bucket.ForceConsume(s, 130_000) // the job cost 130 tokens
	fmt.Println("available:", bucket.Available(s))
	fmt.Println("ms until one token:", bucket.RetryAfter(s, p, 1000))

	s = bucket.Refill(s, p, 18_600)
	_, ok := bucket.Consume(s, 1000)
	fmt.Println("after 18.6 s:", ok)
	// Output:
	// available: -30
	// ms until one token: 18600
	// after 18.6 s: true
}
