package dynamodb

import (
	"context"
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// A normal write prepared from an item must not apply once a refund or
// another normal write has changed that item, even when neither moved the
// refill time: both would otherwise add a change of the full-time bound
// computed from the same read (see writeInput).
func TestNormalWriteLosesToRefundAndTwin(t *testing.T) {
	ctx := context.Background()
	s := newTable(t)
	p := bucket.Params{Capacity: 100_000, Amount: 1_000, Period: 1_000} // 100 tokens, 1 per second
	k := store.BucketKey{Entity: "e", Resource: "api"}
	const t0 = 1_700_000_000_000
	req := func(amount int64) *store.BucketRequest {
		return &store.BucketRequest{Key: k, Limits: []store.LimitRequest{{Name: "rpm", Params: p, Check: true, Amount: amount}}}
	}
	if ok, err := s.Consume(ctx, "ns", &store.ConsumeRequest{Now: t0, Buckets: []store.BucketRequest{*req(50_000)}}); err != nil || !ok {
		t.Fatalf("Consume: %v %v", ok, err)
	}

	stale, err := s.getItem(ctx, "ns", &target{key: k})
	if err != nil {
		t.Fatal(err)
	}
	// A refund lands after the read.
	if err := s.ApplyDeltas(ctx, "ns", []store.Delta{{Key: k, Limit: "rpm", Amount: -10_000}}); err != nil {
		t.Fatal(err)
	}
	granted, retry, err := s.writeOne(ctx, "ns", s.newTarget(req(1_000), 0, 1), t0, stale)
	if err != nil || granted || retry == nil {
		t.Fatalf("write from a read older than a refund: granted %v, retry %v, err %v; want a lost race", granted, retry != nil, err)
	}

	// Two writes built from one read, at the refill time (rf unchanged):
	// the first applies, the second must lose.
	fresh := retry.old
	if granted, retry, err := s.writeOne(ctx, "ns", s.newTarget(req(1_000), 0, 1), t0, fresh); err != nil || !granted || retry != nil {
		t.Fatalf("first write: granted %v, retry %v, err %v", granted, retry != nil, err)
	}
	if granted, retry, err := s.writeOne(ctx, "ns", s.newTarget(req(1_000), 0, 1), t0, fresh); err != nil || granted || retry == nil {
		t.Fatalf("twin write from the same read: granted %v, retry %v, err %v; want a lost race", granted, retry != nil, err)
	}

	// The balance shows exactly: 100 - 50 + 10 - 1 tokens.
	recs, err := s.ReadBuckets(ctx, "ns", []store.BucketKey{k})
	if err != nil {
		t.Fatal(err)
	}
	if got := recs[0].Limits[0].State.Tokens; got != 59_000 {
		t.Errorf("balance %d millitokens, want 59000", got)
	}
	// And the full-time bound is a lower bound of the true full time:
	// 41 tokens short at 1 per second from t0.
	it, _ := s.getItem(ctx, "ns", &target{key: k})
	if fa, _ := getN(it, limitAttr("rpm", fieldFullAt)); fa > t0+41_000 {
		t.Errorf("full-time bound %+d ms, beyond the true full time +41000", fa-t0)
	}
}
