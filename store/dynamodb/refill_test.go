package dynamodb

import (
	"context"
	"testing"

	"github.com/tollgate-rl/tollgate/store"
)

func TestProactiveRefill(t *testing.T) {
	s := newTable(t)
	ctx := context.Background()
	k := store.BucketKey{Entity: "hot", Resource: "api"}
	for range 5 { // 500 of 1000 tokens; after the first, speculative writes that leave rf alone
		if !mustConsume(t, s, "ns", consumeReq(hotEpoch, hotParams, 100_000, k)) {
			t.Fatal("refused")
		}
	}
	// 0.5 s later refill has earned 50 tokens: 5% of the capacity, not worth a write.
	if wrote, err := s.Refill(ctx, "ns", k, 0, hotEpoch+500); err != nil || wrote {
		t.Fatalf("Refill after 0.5 s: wrote %v, %v; want nothing written", wrote, err)
	}
	// 2 s later: 200 tokens earned, worth it.
	if wrote, err := s.Refill(ctx, "ns", k, 0, hotEpoch+2_000); err != nil || !wrote {
		t.Fatalf("Refill after 2 s: wrote %v, %v", wrote, err)
	}
	it, err := s.getItem(ctx, "ns", &target{key: k})
	if err != nil {
		t.Fatal(err)
	}
	rf, _ := getN(it, attrRefilled)
	tk, _ := getN(it, limitAttr("rpm", fieldTokens))
	ev, _ := getN(it, attrEvents)
	if rf != hotEpoch+2_000 || tk != 700_000 || ev != 5 {
		t.Errorf("after the refill: rf %+d ms, balance %d, events %d; want +2000, 700000, 5", rf-hotEpoch, tk, ev)
	}
	// The refilled balance is exactly what reading the bucket gives.
	if got := balanceAt(t, s, "ns", k, "rpm", hotEpoch+2_000); got != 700_000 {
		t.Errorf("balance read %d, want 700000", got)
	}
	if wrote, err := s.Refill(ctx, "ns", store.BucketKey{Entity: "none", Resource: "api"}, 0, hotEpoch); err != nil || wrote {
		t.Errorf("Refill of a missing bucket: %v, %v", wrote, err)
	}
}

// RefillHot refills the items written more than once, shard by shard.
func TestRefillHot(t *testing.T) {
	s := newTable(t)
	ctx := context.Background()
	hot := store.BucketKey{Entity: "hot", Resource: "api"}
	cold := store.BucketKey{Entity: "cold", Resource: "api"}
	for _, k := range []store.BucketKey{hot, hot, cold} {
		if !mustConsume(t, s, "ns", consumeReq(hotEpoch, hotParams, 100_000, k)) {
			t.Fatal("refused")
		}
	}
	changes := []store.Change{{NS: "ns", Key: hot}, {NS: "ns", Key: cold}, {NS: "ns", Key: hot}}
	n, err := s.RefillHot(ctx, changes, hotEpoch+5_000)
	if err != nil || n != 1 {
		t.Fatalf("RefillHot = %d, %v; want the one hot item", n, err)
	}
	for k, want := range map[store.BucketKey]int64{hot: hotEpoch + 5_000, cold: hotEpoch} {
		it, _ := s.getItem(ctx, "ns", &target{key: k})
		if rf, _ := getN(it, attrRefilled); rf != want {
			t.Errorf("%s refilled at %+d ms, want %+d", k.Entity, rf-hotEpoch, want-hotEpoch)
		}
	}
}

// SplitHot splits a bucket whose shard 0 a batch shows written at 80% of
// the pressure limit within one second, and leaves cooler ones alone.
func TestSplitHot(t *testing.T) {
	s := newTable(t, WithWritePressureLimit(10), WithMaxShards(4))
	ctx := context.Background()
	hot := store.BucketKey{Entity: "hot", Resource: "api"}
	warm := store.BucketKey{Entity: "warm", Resource: "api"}
	for _, k := range []store.BucketKey{hot, warm} {
		if !mustConsume(t, s, "ns", consumeReq(hotEpoch, hotParams, 100_000, k)) {
			t.Fatal("refused")
		}
	}
	var changes []store.Change
	for i := range 8 {
		changes = append(changes, store.Change{NS: "ns", Key: hot, Time: hotEpoch + int64(i)})
	}
	for i := range 7 { // 70%: not enough
		changes = append(changes, store.Change{NS: "ns", Key: warm, Time: hotEpoch + int64(i)})
	}
	n, err := s.SplitHot(ctx, changes, hotEpoch+100)
	if err != nil || n != 1 {
		t.Fatalf("SplitHot = %d, %v; want the hot bucket split", n, err)
	}
	if got := len(shardItems(t, s, "ns", hot)); got != 2 {
		t.Errorf("hot bucket has %d shards, want 2", got)
	}
	if got := len(shardItems(t, s, "ns", warm)); got != 1 {
		t.Errorf("warm bucket has %d shards, want 1", got)
	}
	if got, want := balanceAt(t, s, "ns", hot, "rpm", hotEpoch+100), hotParams.Capacity-100_000+10_000; got != want { // 10 tokens refilled in 100 ms
		t.Errorf("hot balance %d after the split, want %d", got, want)
	}
}
