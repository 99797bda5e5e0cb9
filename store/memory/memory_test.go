package memory_test

import (
	"context"
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/limitertest"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
	"github.com/tollgate-rl/tollgate/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return memory.New() })
}

// One shared store for every case: the suite keeps cases apart by namespace,
// as a shared DynamoDB table would need.
func TestConformanceSharedStore(t *testing.T) {
	s := memory.New()
	storetest.Run(t, func(t *testing.T) store.Store { return s })
}

// The limiter's suite, with a store for every case, then with one store
// for every case.
func TestLimiterConformance(t *testing.T) {
	limitertest.Run(t, func(t *testing.T) store.Store { return memory.New() })
}

func TestLimiterConformanceSharedStore(t *testing.T) {
	s := memory.New()
	limitertest.Run(t, func(t *testing.T) store.Store { return s })
}

// Once a bucket exists, the acquire path of the store allocates nothing.
func TestConsumeDoesNotAllocate(t *testing.T) {
	s := memory.New()
	ctx := context.Background()
	p := bucket.Params{Capacity: 1 << 40, Amount: 1000, Period: 1000}
	one := &store.ConsumeRequest{Now: 1_700_000_000_000, Buckets: []store.BucketRequest{{
		Key:    store.BucketKey{Entity: "e1", Resource: "api"},
		Limits: []store.LimitRequest{{Name: "rpm", Params: p, Check: true, Amount: 1000}, {Name: "tpm", Params: p, Check: true, Amount: 500}},
	}}}
	cascade := &store.ConsumeRequest{Now: 1_700_000_000_000, Buckets: []store.BucketRequest{
		{Key: store.BucketKey{Entity: "key", Resource: "api"}, Limits: []store.LimitRequest{{Name: "rpm", Params: p, Check: true, Amount: 1000}}},
		{Key: store.BucketKey{Entity: "proj", Resource: "api"}, Limits: []store.LimitRequest{{Name: "rpm", Params: p, Check: true, Amount: 1000}}},
		{Key: store.BucketKey{Entity: "org", Resource: "api"}, Limits: []store.LimitRequest{{Name: "rpm", Params: p, Check: true, Amount: 1000}}},
	}}
	deltas := []store.Delta{{Key: store.BucketKey{Entity: "e1", Resource: "api"}, Limit: "tpm", Amount: -200}}
	for name, fn := range map[string]func(){
		"single": func() {
			one.Now++
			if ok, err := s.Consume(ctx, "default", one); !ok || err != nil {
				t.Fatalf("Consume = %v, %v", ok, err)
			}
		},
		"cascade": func() {
			cascade.Now++
			if ok, err := s.Consume(ctx, "default", cascade); !ok || err != nil {
				t.Fatalf("Consume = %v, %v", ok, err)
			}
		},
		"deltas": func() {
			if err := s.ApplyDeltas(ctx, "default", deltas); err != nil {
				t.Fatal(err)
			}
		},
	} {
		fn() // create the buckets
		if n := testing.AllocsPerRun(200, fn); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}

func TestUsageConformance(t *testing.T) {
	s := memory.New()
	storetest.RunUsage(t, func(t *testing.T) store.UsageStore { return s })
}

func TestBucketListerConformance(t *testing.T) {
	storetest.RunBucketLister(t, func(t *testing.T) storetest.ListerStore { return memory.New() })
}
