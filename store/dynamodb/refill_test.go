package dynamodb

import (
	"context"
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// paceOf is an itemRate consuming perSec millitokens per second of limit
// rpm, debit millitokens an acquire.
func paceOf(perSec float64, debit int64) itemRate {
	return itemRate{consumed: map[string]float64{"rpm": perSec}, debit: map[string]int64{"rpm": debit}}
}

// The refill rule: an item is due when a rate limit's stored balance will
// not cover what its observed rate consumes within the lookahead, and
// refill has earned at least a mean acquire's worth since the item's
// refill time.
func TestRefillDue(t *testing.T) {
	const rf, lookahead = hotEpoch, 2_000
	rec := func(tokens int64, p bucket.Params) *store.Record {
		return &store.Record{Refilled: rf, Limits: []store.LimitState{
			{Name: "rpm", Params: p, State: bucket.State{Tokens: tokens}},
			// A meter far in debt is no reason to refill.
			{Name: pressureLimit, Params: bucket.Params{Capacity: 10_000, Amount: 10_000, Period: 1_000}, State: bucket.State{Tokens: -50_000}},
		}}
	}
	// hotParams: 1,000 tokens, 100 a second (100 millitokens a ms).
	for _, c := range []struct {
		name   string
		tokens int64
		at     int64
		p      bucket.Params
		pace   itemRate
		want   bool
	}{
		{"balance covers the lookahead", 200_000, rf + 1_000, hotParams, paceOf(100_000, 1_000), false},
		{"balance short, refill earned a debit", 199_999, rf + 10, hotParams, paceOf(100_000, 1_000), true},
		{"balance short, refill earned less than a debit", 100_000, rf + 9, hotParams, paceOf(100_000, 1_000), false},
		{"no consumption", 0, rf + 1_000, hotParams, paceOf(0, 0), false},
		{"refunds only", 0, rf + 1_000, hotParams, paceOf(-5_000, 0), false},
		{"no time since the refill", 0, rf, hotParams, paceOf(100_000, 1_000), false},
		{"a time before the refill", 0, rf - 1_000, hotParams, paceOf(100_000, 1_000), false},
		{"full", hotParams.Capacity, rf + 1_000, bucket.Params{Capacity: 1_000_000, Amount: 1_000, Period: 1_000}, paceOf(1e9, 1_000), false},
		{"a concurrency limit", 0, rf + 1_000, bucket.Params{Capacity: 10_000}, paceOf(100_000, 1_000), false},
		{"in debt", -5_000, rf + 10, hotParams, paceOf(1_000, 1_000), true},
	} {
		if got := refillDue(rec(c.tokens, c.p), c.at, lookahead, c.pace); got != c.want {
			t.Errorf("%s: refillDue = %v, want %v", c.name, got, c.want)
		}
	}
}

// hotItem consumes n tokens from bucket k (hotParams) at hotEpoch: after
// the first, speculative writes that leave rf alone.
func hotItem(t *testing.T, s *Store, k store.BucketKey, n int) {
	t.Helper()
	for range n {
		if !mustConsume(t, s, "ns", consumeReq(hotEpoch, hotParams, 100_000, k)) {
			t.Fatal("refused")
		}
	}
}

// itemAttrs reads rf, the rpm balance, the consumed and acquire counters,
// and the version of one item.
func itemAttrs(t *testing.T, s *Store, k store.BucketKey, shard int) (rf, tk, tc, ev, v int64) {
	t.Helper()
	it, err := s.getItem(context.Background(), "ns", &target{key: k, shard: shard})
	if err != nil || it == nil {
		t.Fatalf("read %v shard %d: %v %v", k, shard, it, err)
	}
	rf, _ = getN(it, attrRefilled)
	tk, _ = getN(it, limitAttr("rpm", fieldTokens))
	tc, _ = getN(it, limitAttr("rpm", fieldConsumed))
	ev, _ = getN(it, attrEvents)
	v, _ = getN(it, attrVersion)
	return
}

// A due item is refilled to the time given, exactly, without a debit; an
// item not due, or missing, is not written.
func TestRefillWrites(t *testing.T) {
	s := newTable(t)
	ctx := context.Background()
	k := store.BucketKey{Entity: "hot", Resource: "api"}
	hotItem(t, s, k, 5)              // 500 of 1,000 tokens left
	pace := paceOf(300_000, 100_000) // 300 tokens a second: 600 in the lookahead
	if wrote, err := s.refill(ctx, "ns", k, 0, hotEpoch+2_000, 2_000, paceOf(100_000, 100_000)); err != nil || wrote {
		t.Fatalf("refill of an item whose balance covers the lookahead: wrote %v, %v", wrote, err)
	}
	if wrote, err := s.refill(ctx, "ns", k, 0, hotEpoch+2_000, 2_000, pace); err != nil || !wrote {
		t.Fatalf("refill of a due item: wrote %v, %v", wrote, err)
	}
	rf, tk, tc, ev, _ := itemAttrs(t, s, k, 0)
	if rf != hotEpoch+2_000 || tk != 700_000 || tc != 500_000 || ev != 5 {
		t.Errorf("after the refill: rf %+d ms, balance %d, consumed %d, events %d; want +2000, 700000, 500000, 5", rf-hotEpoch, tk, tc, ev)
	}
	if got := balanceAt(t, s, "ns", k, "rpm", hotEpoch+2_000); got != 700_000 {
		t.Errorf("balance read %d, want 700000", got)
	}
	if wrote, err := s.refill(ctx, "ns", store.BucketKey{Entity: "none", Resource: "api"}, 0, hotEpoch, 2_000, pace); err != nil || wrote {
		t.Errorf("refill of a missing bucket: %v, %v", wrote, err)
	}
}

// The optimistic lock: a client's normal write (which refills too) between
// the refill's read and its write makes the refill write nothing, so the
// time between the item's old refill time and the client's is refilled
// once; a speculative debit in between commutes with the refill.
func TestRefillLockConflict(t *testing.T) {
	s := newTable(t)
	ctx := context.Background()
	pace := paceOf(300_000, 100_000)
	k := store.BucketKey{Entity: "hot", Resource: "api"}
	hotItem(t, s, k, 5) // 500 tokens left at hotEpoch
	tr := &target{key: k}
	old, err := s.getItem(ctx, "ns", tr)
	if err != nil {
		t.Fatal(err)
	}
	// A client that does not know the bucket reads it and writes through
	// the normal path at +1 s: refill 100 tokens, debit 100.
	client := mustNew(t, localConfig(), s.table, []Option{WithSpeculative(false)}, atLocal)
	if !mustConsume(t, client, "ns", consumeReq(hotEpoch+1_000, hotParams, 100_000, k)) {
		t.Fatal("client refused")
	}
	_, _, _, _, v := itemAttrs(t, s, k, 0)
	if wrote, err := s.refillFrom(ctx, "ns", tr, old, hotEpoch+2_000, 2_000, pace); err != nil || wrote {
		t.Fatalf("refill from a read older than a client's normal write: wrote %v, %v; want nothing", wrote, err)
	}
	rf, tk, _, ev, v2 := itemAttrs(t, s, k, 0)
	if rf != hotEpoch+1_000 || tk != 500_000 || ev != 6 || v2 != v {
		t.Errorf("after the lost refill: rf %+d ms, balance %d, events %d, version %d (was %d); want +1000, 500000, 6, unchanged",
			rf-hotEpoch, tk, ev, v2, v)
	}
	// At +2 s: 500 + 100 refilled since the client's write, counted once.
	if got := balanceAt(t, s, "ns", k, "rpm", hotEpoch+2_000); got != 600_000 {
		t.Errorf("balance at +2 s: %d, want 600000 (a double refill would show 700000)", got)
	}

	// A speculative debit between the read and the write: the refill
	// writes, and both count.
	tr = &target{key: k}
	if old, err = s.getItem(ctx, "ns", tr); err != nil {
		t.Fatal(err)
	}
	if !mustConsume(t, s, "ns", consumeReq(hotEpoch+3_000, hotParams, 100_000, k)) {
		t.Fatal("speculative debit refused")
	}
	if _, tk, _, _, _ := itemAttrs(t, s, k, 0); tk != 400_000 {
		t.Fatalf("balance %d after a speculative debit of 100 tokens, want 400000 (not the speculative path?)", tk)
	}
	if wrote, err := s.refillFrom(ctx, "ns", tr, old, hotEpoch+3_000, 2_000, pace); err != nil || !wrote {
		t.Fatalf("refill around a speculative debit: wrote %v, %v", wrote, err)
	}
	// 500 at +1 s, +200 refilled to +3 s, -100 debited.
	if rf, tk, _, _, _ := itemAttrs(t, s, k, 0); rf != hotEpoch+3_000 || tk != 600_000 {
		t.Errorf("after the refill: rf %+d ms, balance %d; want +3000, 600000", rf-hotEpoch, tk)
	}
}

// A split bucket is refilled shard by shard, at the parameters each shard
// stores (a quarter of the bucket's), and no further than its capacity.
func TestRefillSplitBucket(t *testing.T) {
	s := newTable(t, WithWritePressureLimit(2), WithMaxShards(4))
	ctx := context.Background()
	k := store.BucketKey{Entity: "hot", Resource: "api"}
	splitTo(t, s, k, hotParams, hotEpoch, 4)
	shard := hotParams.Capacity / 4 // 250 tokens, 25 a second
	for i := range 4 {
		// Drain the shard at hotEpoch, through a normal write so that
		// nothing is left for refill to account for before hotEpoch.
		it, err := s.getItem(ctx, "ns", &target{key: k, shard: i})
		if err != nil {
			t.Fatal(err)
		}
		tk, _ := getN(it, limitAttr("rpm", fieldTokens))
		if cp, _ := getN(it, limitAttr("rpm", fieldCapacity)); cp != shard {
			t.Fatalf("shard %d has capacity %d, want %d", i, cp, shard)
		}
		if tk > 0 {
			if err := s.ApplyDeltas(ctx, "ns", []store.Delta{{Key: k, Limit: "rpm", Amount: tk, Placement: i}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	pace := paceOf(1_000, 1_000)
	for i, at := range []int64{hotEpoch + 4_000, hotEpoch + 60_000} {
		wrote, err := s.refill(ctx, "ns", k, i, at, 2_000, pace)
		if err != nil || !wrote {
			t.Fatalf("refill of shard %d: wrote %v, %v", i, wrote, err)
		}
	}
	it, err := s.getItem(ctx, "ns", &target{key: k, shard: 0})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := decodeRecord(it)
	if err != nil {
		t.Fatal(err)
	}
	if j := rec.Find("rpm"); j < 0 || rec.Limits[j].Params != shardParams(hotParams, 4) {
		t.Errorf("shard 0 after the refill: %+v; want the parameters of a quarter, %+v", rec.Limits, shardParams(hotParams, 4))
	}
	// Shard 0: 4 s at 25 tokens a second; shard 1: a minute, capped at 250.
	for i, want := range []int64{100_000, shard} {
		if _, tk, _, _, _ := itemAttrs(t, s, k, i); tk != want {
			t.Errorf("shard %d balance %d after the refill, want %d", i, tk, want)
		}
	}
}
