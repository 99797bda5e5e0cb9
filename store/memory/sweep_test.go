package memory

import (
	"context"
	"strconv"
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// Idle buckets are forgotten (a full bucket is the same as a missing one),
// so memory follows the buckets in use, and no answer changes.
func TestIdleBucketsAreForgotten(t *testing.T) {
	ctx := context.Background()
	s := New()
	p := bucket.Params{Capacity: 10_000, Amount: 10_000, Period: 1_000} // full again 1 s after use
	req := func(now int64, entity string, amount int64) *store.ConsumeRequest {
		return &store.ConsumeRequest{Now: now, Buckets: []store.BucketRequest{{
			Key:    store.BucketKey{Entity: entity, Resource: "api"},
			Limits: []store.LimitRequest{{Name: "rps", Params: p, Check: true, Amount: amount}},
		}}}
	}
	count := s.buckets.Len
	const t0, keys = 1_700_000_000_000, 50_000
	// One key stays in debt-free use but not full: it must survive.
	if ok, _ := s.Consume(ctx, "ns", req(t0, "busy", 10_000)); !ok {
		t.Fatal("busy: denied")
	}
	for i := range keys {
		if ok, _ := s.Consume(ctx, "ns", req(t0, "k"+strconv.Itoa(i), 1_000)); !ok {
			t.Fatalf("k%d denied", i)
		}
	}
	// Ten seconds later every k* bucket is full again, and so is busy.
	// Creating as many new buckets makes every shard sweep.
	later := int64(t0 + 10_000)
	for i := range keys {
		s.Consume(ctx, "ns", req(later, "n"+strconv.Itoa(i), 1_000))
	}
	if n := count(); n > keys+keys/4 {
		t.Errorf("%d buckets kept after %d idle ones refilled, want about %d", n, keys, keys)
	}
	// A forgotten bucket answers as before: full.
	r := req(later, "k7", 10_000)
	if ok, _ := s.Consume(ctx, "ns", r); !ok || r.Buckets[0].Limits[0].Observed.Tokens != 10_000 {
		t.Errorf("forgotten bucket: granted %v, observed %+v; want granted from full", ok, r.Buckets[0].Limits[0].Observed)
	}
	// A bucket in use (not full) is never forgotten.
	if ok, _ := s.Consume(ctx, "ns", req(later, "n1", 10_000)); ok {
		t.Error("n1 was used 1 token ago and must not have been forgotten with its debit")
	}
}
