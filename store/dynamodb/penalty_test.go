package dynamodb

import (
	"context"
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// A penalty reaches every shard of a split bucket: nothing can be acquired
// from any shard before it ends, and the bucket refills from zero after.
func TestPenaltyEmptiesEveryShard(t *testing.T) {
	s := newTable(t, WithWritePressureLimit(2), WithMaxShards(4))
	k := store.BucketKey{Entity: "hot", Resource: "api"}
	p := bucket.Params{Capacity: 100_000, Amount: 1_000, Period: 1_000}
	splitTo(t, s, k, p, hotEpoch, 4)
	until := int64(hotEpoch) + 30_000
	req := &store.PenaltyRequest{Now: hotEpoch, Until: until, Bucket: store.BucketRequest{Key: k, Limits: []store.LimitRequest{
		{Name: "rpm", Params: p, Check: true},
	}}}
	if err := s.Penalize(context.Background(), "ns", req); err != nil {
		t.Fatal(err)
	}
	for shard := range 4 {
		it, err := s.eng().getItem(context.Background(), "ns", &target{key: k, shard: shard})
		if err != nil {
			t.Fatal(err)
		}
		if got := itemTokens(t, it, "rpm", until); got != 0 {
			t.Errorf("shard %d holds %d millitokens at the penalty's end, want 0", shard, got)
		}
		if got := itemTokens(t, it, "rpm", until-1); got >= 0 {
			t.Errorf("shard %d holds %d millitokens just before the end, want a debt", shard, got)
		}
	}
	if mustConsume(t, s, "ns", consumeReq(until-1, p, 1, k)) {
		t.Error("a millitoken granted before the penalty ended")
	}
	if got := balanceAt(t, s, "ns", k, "rpm", until+4_000); got != 4_000 {
		t.Errorf("balance 4 s after the penalty = %d, want 4000 (refilled from zero)", got)
	}
}
