package dynamodb

import (
	"context"
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// events sums the acquire counter over every shard of bucket k.
func events(t *testing.T, s *Store, k store.BucketKey) int64 {
	t.Helper()
	var n int64
	for _, it := range shardItems(t, s, "ns", k) {
		v, _ := getN(it, attrEvents)
		n += v
	}
	return n
}

// Every granted acquire counts once in its buckets' ev counters, whatever
// path wrote it; deltas count none, and a compensated debit takes its
// count back.
func TestAcquireEventCounter(t *testing.T) {
	s := newTable(t, WithWritePressureLimit(2), WithMaxShards(4))
	k := store.BucketKey{Entity: "key", Resource: "api"}
	for range 3 { // create, then speculative writes
		if !mustConsume(t, s, "ns", consumeReq(hotEpoch, hotParams, 1_000, k)) {
			t.Fatal("refused")
		}
	}
	if err := s.ApplyDeltas(context.Background(), "ns", []store.Delta{{Key: k, Limit: "rpm", Amount: 5_000}}); err != nil {
		t.Fatal(err)
	}
	if got := events(t, s, k); got != 3 {
		t.Errorf("ev %d after 3 acquires and an adjustment, want 3", got)
	}

	// A cascade the child refuses after the parent's speculative debit.
	parent := store.BucketKey{Entity: "org", Resource: "api"}
	child := store.BucketKey{Entity: "tiny", Resource: "api"}
	small := bucket.Params{Capacity: 1_000, Amount: 1_000, Period: 3_600_000}
	cascade := func() *store.ConsumeRequest {
		r := consumeReq(hotEpoch, small, 1_000, child)
		r.Buckets = append(r.Buckets, consumeReq(hotEpoch, bucket.Params{Capacity: 1_000_000, Amount: 1_000, Period: 1_000}, 1_000, parent).Buckets...)
		return r
	}
	if !mustConsume(t, s, "ns", cascade()) {
		t.Fatal("first cascade refused")
	}
	before := events(t, s, parent)
	if mustConsume(t, s, "ns", cascade()) {
		t.Fatal("second cascade granted past the child's one token")
	}
	if got := events(t, s, parent); got != before {
		t.Errorf("parent ev %d after a refused cascade, want %d", got, before)
	}

	// A gathered acquire on a sharded bucket counts once.
	hot := store.BucketKey{Entity: "hot", Resource: "api"}
	splitTo(t, s, hot, hotParams, hotEpoch, 4)
	before = events(t, s, hot)
	if !mustConsume(t, s, "ns", consumeReq(hotEpoch, hotParams, 400_000, hot)) { // more than a shard holds
		t.Fatal("gather refused")
	}
	if got := events(t, s, hot); got != before+1 {
		t.Errorf("ev rose by %d for one gathered acquire, want 1", got-before)
	}
}
