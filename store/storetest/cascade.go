package storetest

import (
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

func cascadeCases() []testCase {
	return []testCase{
		{"ContractFourBuckets", testCascadeContractFourBuckets},
	}
}

// An all-or-nothing request over the most buckets a cascade has.
func testCascadeContractFourBuckets(t *testing.T, e *Env) {
	p := rate(10_000, 1_000, 1_000)
	keys := []store.BucketKey{Key("key", "api"), Key("proj", "api"), Key("org", "api"), Key("acct", "api")}
	mk := func(amounts ...int64) []store.BucketRequest {
		var brs []store.BucketRequest
		for i, k := range keys {
			brs = append(brs, breq(k, checked("rpm", p, amounts[i]), unchecked("inflight", conc(3_000))))
		}
		return brs
	}
	e.grant(T0, mk(1_000, 2_000, 3_000, 4_000)...)
	want := []int64{9_000, 8_000, 7_000, 6_000}
	for i, k := range keys {
		e.WantStored(k, "rpm", bucket.State{Tokens: want[i]})
		e.WantStored(k, "inflight", bucket.State{Tokens: 3_000})
	}
	// The last bucket is short by one millitoken: nothing anywhere.
	req := e.deny(T0, mk(9_000, 8_000, 7_000, 6_001)...)
	for i, k := range keys {
		e.wantObserved(req, k, "rpm", bucket.State{Tokens: want[i]})
		e.WantTokensAt(k, "rpm", T0, want[i])
	}
	// The first is short: same.
	e.deny(T0, mk(9_001, 0, 0, 0)...)
	for i, k := range keys {
		e.WantTokensAt(k, "rpm", T0, want[i])
	}
	e.grant(T0, mk(9_000, 8_000, 7_000, 6_000)...)
	for _, k := range keys {
		e.WantTokensAt(k, "rpm", T0, 0)
	}
}
