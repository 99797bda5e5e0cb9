package redis_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// What a bucket costs the server, measured (docs/redis.md, "Persistence
// and sizing"): 10,000 buckets of one limit, and of three, and the
// server's used memory before and after. A bucket's hash must stay in
// Redis's compact encoding (a listpack): beyond a few hundred bytes, a
// layout change has made it a hash table.
func TestMemoryPerBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("sizing skipped in -short mode")
	}
	s := newStore(t)
	c := rawClient(t, serverURL)
	ctx := context.Background()
	p := bucket.Params{Capacity: 100_000, Amount: 100_000, Period: 60_000}
	for _, limits := range []int{1, 3} {
		ns := fmt.Sprintf("mem%d", limits)
		before := usedMemory(t, c)
		const n = 10_000
		for i := range n {
			req := &store.ConsumeRequest{Now: 1_700_000_000_000, Buckets: []store.BucketRequest{{Key: store.BucketKey{Entity: "key-" + strconv.Itoa(i), Resource: "api"}}}}
			for l := range limits {
				req.Buckets[0].Limits = append(req.Buckets[0].Limits, store.LimitRequest{Name: "l" + strconv.Itoa(l), Params: p, Check: true, Amount: 1000})
			}
			if ok, err := s.Consume(ctx, ns, req); !ok || err != nil {
				t.Fatalf("Consume: %v %v", ok, err)
			}
		}
		per := (usedMemory(t, c) - before) / n
		t.Logf("%d limit(s): %d bytes per bucket, its index entry included", limits, per)
		if bound := int64(300 + 100*limits); per > bound {
			t.Errorf("%d limit(s): %d bytes per bucket, want at most %d", limits, per, bound)
		}
	}
}

func usedMemory(t *testing.T, c rueidis.Client) int64 {
	t.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("memory").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}
