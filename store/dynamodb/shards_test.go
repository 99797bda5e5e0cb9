package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store"
)

func TestShardParams(t *testing.T) {
	tests := []struct {
		p    bucket.Params
		n    int
		want bucket.Params
	}{
		{bucket.Params{Capacity: 100_000, Amount: 1_000, Period: 1_000}, 1, bucket.Params{Capacity: 100_000, Amount: 1_000, Period: 1_000}},
		{bucket.Params{Capacity: 100_000, Amount: 1_000, Period: 1_000}, 4, bucket.Params{Capacity: 25_000, Amount: 250, Period: 1_000}},
		// A rate that does not divide takes a longer period: exact.
		{bucket.Params{Capacity: 10_000, Amount: 1_001, Period: 60_000}, 8, bucket.Params{Capacity: 1_250, Amount: 1_001, Period: 480_000}},
		// Capacity rounds down: the shards never hold more than the bucket.
		{bucket.Params{Capacity: 10_001, Amount: 1_000, Period: 1_000}, 2, bucket.Params{Capacity: 5_000, Amount: 500, Period: 1_000}},
		// A period that cannot grow further divides the amount, rounding down.
		{bucket.Params{Capacity: 10_000, Amount: 1_001, Period: bucket.MaxPeriod}, 2, bucket.Params{Capacity: 5_000, Amount: 500, Period: bucket.MaxPeriod}},
	}
	for _, tt := range tests {
		got := shardParams(tt.p, tt.n)
		if got != tt.want {
			t.Errorf("shardParams(%+v, %d) = %+v, want %+v", tt.p, tt.n, got, tt.want)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("shardParams(%+v, %d) invalid: %v", tt.p, tt.n, err)
		}
		if back := bucketParams(got, tt.n); back.Capacity > tt.p.Capacity || back.Amount*tt.p.Period > tt.p.Amount*back.Period {
			t.Errorf("bucketParams(%+v, %d) = %+v: more than the bucket %+v", got, tt.n, back, tt.p)
		}
	}
}

func TestHalve(t *testing.T) {
	tests := []struct{ tokens, c, kept, given int64 }{
		{10, 5, 5, 5},
		{9, 5, 5, 4},
		{11, 5, 5, 5}, // 11 > 2c: an odd capacity rounded down loses the extra
		{0, 5, 0, 0},
		{-7, 5, -7, 0}, // debt stays where it is
		{1, 5, 1, 0},
	}
	for _, tt := range tests {
		kept, given := halve(tt.tokens, tt.c)
		if kept != tt.kept || given != tt.given {
			t.Errorf("halve(%d, %d) = %d, %d; want %d, %d", tt.tokens, tt.c, kept, given, tt.kept, tt.given)
		}
	}
}

// hotParams is 1,000 tokens, 100 per second.
var hotParams = bucket.Params{Capacity: 1_000_000, Amount: 100_000, Period: 1_000}

const hotEpoch = 1_700_000_000_000

// mustItem reads shard 0 of bucket k, failing if it is missing.
func mustItem(t testing.TB, s *Store, ns string, k store.BucketKey) item {
	t.Helper()
	it, err := s.eng().getItem(context.Background(), ns, &target{key: k})
	if err != nil || it == nil {
		t.Fatalf("read %v: %v %v", k, it, err)
	}
	return it
}

// shardItems reads the raw shard items of bucket k, 0 to the count shard 0
// names, failing on a missing one.
func shardItems(t testing.TB, s *Store, ns string, k store.BucketKey) []item {
	t.Helper()
	ctx := context.Background()
	first, err := s.eng().getItem(ctx, ns, &target{key: k})
	if err != nil || first == nil {
		t.Fatalf("read shard 0 of %v: %v %v", k, first, err)
	}
	n := shardCount(first)
	its, err := s.batchGet(ctx, shardKeys(ns, k, n))
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range its {
		if it == nil {
			t.Fatalf("shard %d of %d missing", i, n)
		}
		if got := shardCount(it); got != n {
			t.Errorf("shard %d says %d shards, shard 0 says %d", i, got, n)
		}
	}
	return its
}

// A bucket written faster than its pressure limit doubles its shard count,
// up to the maximum, and every split conserves the balance exactly.
func TestHotBucketSplitsAndConserves(t *testing.T) {
	s := newTable(t, WithWritePressureLimit(4), WithMaxShards(8))
	k := store.BucketKey{Entity: "hot", Resource: "api"}
	grants := int64(0)
	// All at one instant: no refill, so the exact balance is 1000 - grants.
	for range 120 {
		if mustConsume(t, s, "ns", consumeReq(hotEpoch, hotParams, 1_000, k)) {
			grants++
		}
	}
	if grants != 120 {
		t.Fatalf("%d of 120 one-token requests granted from a bucket of 1000", grants)
	}
	its := shardItems(t, s, "ns", k)
	if len(its) != 8 || s.eng().splits.Load() != 3 {
		t.Fatalf("%d shards after %d splits; want 8 after 3", len(its), s.eng().splits.Load())
	}
	for i, it := range its {
		if cp, _ := getN(it, limitAttr("rpm", fieldCapacity)); cp != hotParams.Capacity/8 {
			t.Errorf("shard %d capacity %d, want %d", i, cp, hotParams.Capacity/8)
		}
	}
	if got, want := balanceAt(t, s, "ns", k, "rpm", hotEpoch), hotParams.Capacity-grants*1_000; got != want {
		t.Errorf("balance over the shards %d, want exactly %d", got, want)
	}
	recs, err := s.ReadBuckets(context.Background(), "ns", []store.BucketKey{k})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs[0].Limits) != 1 || recs[0].Limits[0].Name != "rpm" || recs[0].Limits[0].Params != hotParams {
		t.Errorf("ReadBuckets of a sharded bucket = %+v; want the one limit rpm at its bucket parameters", recs[0].Limits)
	}
}

// Many goroutines on a bucket that splits under them, at one instant (no
// refill), until it is empty: exactly its 300 tokens are granted, never
// more, and nothing is lost or left over across the splits.
func TestShardedNeverOverAdmits(t *testing.T) {
	if testing.Short() {
		t.Skip("hammers DynamoDB Local")
	}
	s := newTable(t, WithWritePressureLimit(8), WithMaxShards(8))
	k := store.BucketKey{Entity: "hot", Resource: "api"}
	p := bucket.Params{Capacity: 300_000, Amount: 1_000, Period: 1_000}
	ctx := context.Background()
	// left is the balance summed over the shards (exact: the clock stands
	// still).
	left := func() (int64, error) {
		recs, err := s.ReadBuckets(ctx, "ns", []store.BucketKey{k})
		if err != nil || recs[0] == nil {
			return 0, fmt.Errorf("read %v: %v %v", k, recs, err)
		}
		return recs[0].Limits[recs[0].Find("rpm")].State.Tokens, nil
	}
	var grants, refusals atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			// A refusal may come from 3 empty shards while others still
			// hold tokens: stop only once the bucket cannot cover 1 token.
			for i := 0; ; i++ {
				if i == 1_000 {
					t.Error("no end after 1000 requests")
					return
				}
				ok, err := s.Consume(ctx, "ns", consumeReq(hotEpoch, p, 1_000, k))
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					grants.Add(1)
					continue
				}
				refusals.Add(1)
				n, err := left()
				if err != nil {
					t.Error(err)
					return
				}
				if n < 1_000 {
					return
				}
			}
		})
	}
	wg.Wait()
	rest, err := left()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d grants, %d refusals, %d millitokens left, %d splits", grants.Load(), refusals.Load(), rest, s.eng().splits.Load())
	if grants.Load() != 300 || rest != 0 {
		t.Errorf("%d grants and %d millitokens left; want exactly 300 grants from a bucket of 300, 0 left", grants.Load(), rest)
	}
	if s.eng().splits.Load() == 0 {
		t.Error("the bucket never split")
	}
}

// splitTo drives bucket k (rpm at p) to n shards with one-token requests
// at now, and returns how many were granted.
func splitTo(t testing.TB, s *Store, k store.BucketKey, p bucket.Params, now int64, n int) int64 {
	t.Helper()
	var grants int64
	for i := 0; s.eng().shardsOf(bucketID{"ns", k}) < n; i++ {
		if i > 200 {
			t.Fatalf("bucket did not reach %d shards", n)
		}
		if mustConsume(t, s, "ns", consumeReq(now, p, 1_000, k)) {
			grants++
		}
	}
	return grants
}

// A request larger than one shard gathers from all of them.
func TestShardedGathersLargeRequest(t *testing.T) {
	s := newTable(t, WithWritePressureLimit(2), WithMaxShards(4))
	k := store.BucketKey{Entity: "hot", Resource: "api"}
	p := bucket.Params{Capacity: 100_000, Amount: 1_000, Period: 1_000} // 25 tokens a shard
	grants := splitTo(t, s, k, p, hotEpoch, 4)
	left := p.Capacity - grants*1_000
	req := consumeReq(hotEpoch, p, 40_000, k)
	if !mustConsume(t, s, "ns", req) {
		t.Fatalf("40 tokens refused with %d left", left/1000)
	}
	if got := req.Buckets[0].Limits[0].Observed.Tokens; got != left {
		t.Errorf("gathered request observed %d, want the exact sum %d", got, left)
	}
	if got := balanceAt(t, s, "ns", k, "rpm", hotEpoch); got != left-40_000 {
		t.Errorf("balance %d after gathering 40 tokens, want %d", got, left-40_000)
	}
	// More than is left is refused, with the sum observed.
	req = consumeReq(hotEpoch, p, left, k)
	if mustConsume(t, s, "ns", req) {
		t.Fatal("granted more than the shards hold together")
	}
	if got := req.Buckets[0].Limits[0].Observed.Tokens; got != left-40_000 {
		t.Errorf("refused gather observed %d, want %d", got, left-40_000)
	}
}

// A process that cached an old shard count finds the new one on its first
// write and never over-admits.
func TestStaleShardCount(t *testing.T) {
	s := newTable(t, WithWritePressureLimit(2), WithMaxShards(4))
	other := mustNew(t, localConfig(), s.table, []Option{WithWritePressureLimit(0)}, atLocal)
	k := store.BucketKey{Entity: "hot", Resource: "api"}
	grants := int64(0)
	if mustConsume(t, other, "ns", consumeReq(hotEpoch, hotParams, 1_000, k)) {
		grants++
	}
	grants += splitTo(t, s, k, hotParams, hotEpoch, 4)
	if other.eng().shardsOf(bucketID{"ns", k}) != 1 {
		t.Fatal("the other store already knows the split")
	}
	if !mustConsume(t, other, "ns", consumeReq(hotEpoch, hotParams, 1_000, k)) {
		t.Fatal("refused after a split")
	}
	grants++
	if got := other.eng().shardsOf(bucketID{"ns", k}); got != 4 {
		t.Errorf("other store caches %d shards, want 4", got)
	}
	if got, want := balanceAt(t, s, "ns", k, "rpm", hotEpoch), hotParams.Capacity-grants*1_000; got != want {
		t.Errorf("balance %d, want exactly %d", got, want)
	}
	for i, it := range shardItems(t, s, "ns", k) {
		if cp, _ := getN(it, limitAttr("rpm", fieldCapacity)); cp != hotParams.Capacity/4 {
			t.Errorf("shard %d capacity %d after a stale writer, want %d", i, cp, hotParams.Capacity/4)
		}
	}
}

// A refund goes back to the shard the debit came from.
func TestDeltaReturnsToPlacement(t *testing.T) {
	s := newTable(t, WithWritePressureLimit(2), WithMaxShards(4))
	k := store.BucketKey{Entity: "hot", Resource: "api"}
	splitTo(t, s, k, hotParams, hotEpoch, 4)
	req := consumeReq(hotEpoch, hotParams, 5_000, k)
	if !mustConsume(t, s, "ns", req) {
		t.Fatal("refused")
	}
	shard := req.Buckets[0].Placement
	before := itemTokens(t, shardItems(t, s, "ns", k)[shard], "rpm", hotEpoch)
	if err := s.ApplyDeltas(context.Background(), "ns", []store.Delta{{Key: k, Limit: "rpm", Amount: -5_000, Placement: shard}}); err != nil {
		t.Fatal(err)
	}
	after := itemTokens(t, shardItems(t, s, "ns", k)[shard], "rpm", hotEpoch)
	if after-before != 5_000 {
		t.Errorf("shard %d balance moved by %d, want the 5000 refunded", shard, after-before)
	}
}

// A bucket with a concurrency limit is not split.
func TestConcurrencyBucketDoesNotSplit(t *testing.T) {
	s := newTable(t, WithWritePressureLimit(2))
	k := store.BucketKey{Entity: "hot", Resource: "api"}
	slots := bucket.Params{Capacity: 1_000_000}
	for range 20 {
		req := consumeReq(hotEpoch, hotParams, 1_000, k)
		req.Buckets[0].Limits = append(req.Buckets[0].Limits, store.LimitRequest{Name: "inflight", Params: slots, Check: true, Amount: 1_000})
		if !mustConsume(t, s, "ns", req) {
			t.Fatal("refused")
		}
	}
	if n := s.eng().shardsOf(bucketID{"ns", k}); n != 1 || s.eng().splits.Load() != 0 {
		t.Errorf("%d shards, %d splits; want a single item", n, s.eng().splits.Load())
	}
}

// Through the limiter, a sharded bucket shows only its own limits, at
// bucket scale, and a refusal carries a retry hint.
func TestShardedBucketThroughLimiter(t *testing.T) {
	s := newTable(t, WithWritePressureLimit(2), WithMaxShards(4))
	clk := clock.NewFake(time.UnixMilli(hotEpoch))
	lim, err := tollgate.New(s, tollgate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	limits := tollgate.WithLimits(tollgate.Limit{Name: "rpm", Capacity: 40, RefillAmount: 40, RefillPeriod: time.Minute})
	granted := 0
	var denied *tollgate.RateLimitExceeded
	for range 60 {
		le, err := lim.Acquire(ctx, "hot", "api", tollgate.Consume{"rpm": 1}, limits)
		if errors.As(err, &denied) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range le.Statuses() {
			if st.Limit != "rpm" || st.Capacity != 40 {
				t.Errorf("status %+v: want only rpm, capacity 40", st)
			}
		}
		if err := le.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		granted++
	}
	if s.eng().splits.Load() == 0 {
		t.Fatal("the bucket never split")
	}
	if denied == nil {
		t.Fatalf("60 acquires of a 40-token bucket all granted")
	}
	if granted > 40 {
		t.Errorf("%d granted from 40 tokens", granted)
	}
	for _, st := range denied.Statuses {
		if st.Limit != "rpm" {
			t.Errorf("refusal lists limit %q", st.Limit)
		}
	}
	if denied.RetryAfter <= 0 {
		t.Errorf("refusal RetryAfter %v, want a positive hint", denied.RetryAfter)
	}
	sts, err := lim.Available(ctx, "hot", "api", limits)
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != 1 || sts[0].Limit != "rpm" || sts[0].Capacity != 40 || sts[0].Available != int64(40-granted) {
		t.Errorf("Available = %+v; want rpm with %d of 40", sts, 40-granted)
	}
}

// A cascade through a sharded parent gives back what it took there when
// the child refuses.
func TestCascadeThroughShardedBucket(t *testing.T) {
	s := newTable(t, WithWritePressureLimit(2), WithMaxShards(4))
	parent := store.BucketKey{Entity: "org", Resource: "api"}
	child := store.BucketKey{Entity: "key", Resource: "api"}
	grants := splitTo(t, s, parent, hotParams, hotEpoch, 4)
	small := bucket.Params{Capacity: 2_000, Amount: 1_000, Period: 60_000}
	req := func() *store.ConsumeRequest {
		r := consumeReq(hotEpoch, small, 1_000, child)
		r.Buckets = append(r.Buckets, consumeReq(hotEpoch, hotParams, 1_000, parent).Buckets...)
		return r
	}
	for range 2 {
		if !mustConsume(t, s, "ns", req()) {
			t.Fatal("cascade refused")
		}
		grants++
	}
	if mustConsume(t, s, "ns", req()) {
		t.Fatal("cascade granted past the child's 2 tokens")
	}
	if got, want := balanceAt(t, s, "ns", parent, "rpm", hotEpoch), hotParams.Capacity-grants*1_000; got != want {
		t.Errorf("parent balance %d, want %d: the refused cascade was not given back", got, want)
	}
}

// A parent that cascades make hot splits like any bucket, and the cascade
// keeps both levels exact.
func TestCascadeSplitsHotParent(t *testing.T) {
	s := newTable(t, WithWritePressureLimit(2), WithMaxShards(4))
	parent := store.BucketKey{Entity: "org", Resource: "api"}
	child := store.BucketKey{Entity: "key", Resource: "api"}
	const n = 20
	for i := range n {
		if !mustConsume(t, s, "ns", consumeReq(hotEpoch, hotParams, 1_000, child, parent)) {
			t.Fatalf("cascade %d refused", i)
		}
	}
	if got := s.eng().shardsOf(bucketID{"ns", parent}); got < 2 {
		t.Errorf("hot parent has %d shards after %d cascades", got, n)
	}
	for _, k := range []store.BucketKey{child, parent} {
		if got, want := balanceAt(t, s, "ns", k, "rpm", hotEpoch), hotParams.Capacity-n*1_000; got != want {
			t.Errorf("%s balance %d, want %d", k.Entity, got, want)
		}
	}
}

// An acquire on a sharded bucket tries up to 3 shards: refused by the
// first, it is granted by the second or the third; refused by all three
// (and their balances show the bucket could not cover it), it is refused
// without trying the fourth. Each empty shard costs one call and nothing
// else: the read that confirms what this process's image shows, or the
// failed write of a guess where it has none.
func TestShardRetriesOtherShards(t *testing.T) {
	tt := newTestTable(t)
	c := tt.client(t, 5*time.Second, WithWritePressureLimit(2), WithMaxShards(4))
	k := store.BucketKey{Entity: "hot", Resource: "api"}
	splitTo(t, c.Store, k, hotParams, hotEpoch, 4)
	ctx := context.Background()
	tokens := func() []int64 {
		t.Helper()
		var out []int64
		for _, it := range shardItems(t, tt.admin, "ns", k) {
			out = append(out, itemTokens(t, it, "rpm", hotEpoch))
		}
		return out
	}
	// Empty shards 1 and 2 (the clock stands still: no refill).
	drain := func(shards ...int) {
		t.Helper()
		have := tokens()
		for _, i := range shards {
			if err := c.ApplyDeltas(ctx, "ns", []store.Delta{{Key: k, Limit: "rpm", Amount: have[i], Placement: i}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	drain(1, 2)

	for _, order := range [][]int{{1, 0, 2}, {1, 2, 0}} {
		c.eng().pick = func(int) []int { return order }
		before := tokens()
		c.calls.take()
		req := consumeReq(hotEpoch, hotParams, 1_000, k)
		if !mustConsume(t, c, "ns", req) {
			t.Fatalf("shards %v: refused with shard 0 holding %d", order, before[0])
		}
		tried := slices.Index(order, 0) + 1
		expectCallCount(t, fmt.Sprintf("grant from shard %d of the order %v", tried, order), c.calls.take(), tried)
		if p := req.Buckets[0].Placement; p != 0 {
			t.Errorf("granted on shard %d, want 0", p)
		}
		after := tokens()
		before[0] -= 1_000
		if !slices.Equal(after, before) {
			t.Errorf("shard balances %v, want %v: one token from shard 0 only", after, before)
		}
	}

	drain(0)
	c.eng().pick = func(int) []int { return []int{0, 1, 2} }
	before := tokens()
	c.calls.take()
	req := consumeReq(hotEpoch, hotParams, 1_000, k)
	if mustConsume(t, c, "ns", req) {
		t.Fatal("granted although the 3 shards tried are empty")
	}
	expectCallCount(t, "refusal after 3 shards", c.calls.take(), 3)
	if after := tokens(); !slices.Equal(after, before) {
		t.Errorf("shard balances %v after a refusal, want %v", after, before)
	}
	if w := req.Buckets[0].Limits[0].Wait; w <= 0 {
		t.Errorf("refusal carries wait %d ms, want a positive hint", w)
	}
}

// A split bucket's refusal is an estimate (the shards tried): the store
// says so (BucketRequest.Estimated), and a limiter with the deny cache
// never answers its refusals from memory, each goes to the store.
func TestShardedBucketNotRememberedByDenyCache(t *testing.T) {
	s := newTable(t, WithWritePressureLimit(2), WithMaxShards(4))
	clk := clock.NewFake(time.UnixMilli(hotEpoch))
	lim, err := tollgate.New(s, tollgate.WithClock(clk), tollgate.WithDenyCache(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	limits := tollgate.WithLimits(tollgate.Limit{Name: "rpm", Capacity: 40, RefillAmount: 40, RefillPeriod: time.Minute})
	refused := 0
	for range 60 {
		le, err := lim.Acquire(ctx, "hot", "api", tollgate.Consume{"rpm": 1}, limits)
		if errors.Is(err, tollgate.ErrRateLimited) {
			refused++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s.eng().splits.Load() == 0 {
		t.Fatal("the bucket never split")
	}
	if refused == 0 {
		t.Fatal("60 acquires of a 40-token bucket all granted")
	}
	if st := lim.Stats().Deny; st.Served != 0 || st.Remembered != 0 {
		t.Errorf("deny cache %+v after %d refusals of a split bucket, want none remembered or served", st, refused)
	}
	// The store's own answer, on a bucket split to 4 shards and drained.
	k := store.BucketKey{Entity: "hot2", Resource: "api"}
	p := bucket.Params{Capacity: 40_000, Amount: 40_000, Period: 60_000}
	splitTo(t, s, k, p, hotEpoch, 4)
	for range 100 {
		req := consumeReq(hotEpoch, p, 1_000, k)
		if mustConsume(t, s, "ns", req) {
			continue
		}
		if !req.Buckets[0].Estimated {
			t.Error("a split bucket's refusal: Estimated false, want true")
		}
		return
	}
	t.Fatal("100 acquires of a 40-token bucket all granted")
}
