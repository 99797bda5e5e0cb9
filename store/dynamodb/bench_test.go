package dynamodb

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// BenchmarkDynamoDB measures the backend against DynamoDB Local. Each group
// starts with a baseline measured in the same run (one raw conditional
// UpdateItem, one raw GetItem), and every case reports its median latency
// (p50-us) so that `make bench-dynamodb` can print p50 ratios.
func BenchmarkDynamoDB(b *testing.B) {
	ctx := context.Background()
	s := newTable(b)
	cold := New(localConfig(), s.table, []Option{WithSpeculative(false)}, atLocal)
	// Huge capacity, slow refill: the buckets never fill, so speculative
	// writes are always allowed.
	p := bucket.Params{Capacity: bucket.MaxTokens / 2, Amount: 1000, Period: 1000}
	req := func(keys ...store.BucketKey) *store.ConsumeRequest {
		r := &store.ConsumeRequest{Now: time.Now().UnixMilli()}
		for _, k := range keys {
			r.Buckets = append(r.Buckets, store.BucketRequest{Key: k, Limits: []store.LimitRequest{{Name: "rps", Params: p, Check: true, Amount: 1000}}})
		}
		return r
	}
	consume := func(st *Store, keys ...store.BucketKey) {
		ok, err := st.Consume(ctx, "bench", req(keys...))
		if err != nil || !ok {
			b.Fatalf("Consume: %v %v", ok, err)
		}
	}
	key, parent := store.BucketKey{Entity: "k", Resource: "api"}, store.BucketKey{Entity: "org", Resource: "api"}
	consume(s, key)
	consume(s, key, parent)
	rawKeys := []item{{attrPK: str("raw"), attrSK: str(skState)}, {attrPK: str("raw2"), attrSK: str(skState)}}
	rawKey := rawKeys[0]
	for _, k := range rawKeys {
		if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: item{attrPK: k[attrPK], attrSK: k[attrSK], "n": num(1 << 60)}}); err != nil {
			b.Fatal(err)
		}
	}
	// DynamoDB Local runs on the JVM: warm it up (JIT) before measuring.
	for range 2000 {
		consume(s, key)
	}
	lim, err := tollgate.New(s)
	if err != nil {
		b.Fatal(err)
	}
	limits := tollgate.WithLimits(tollgate.PerSecond("rps", 1))
	if _, err := lim.Available(ctx, "k", "api", limits); err != nil {
		b.Fatal(err)
	}

	rawWrite := func(b *testing.B, key item) {
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &s.table, Key: key,
			UpdateExpression:          aws.String("ADD n :m"),
			ConditionExpression:       aws.String("attribute_exists(PK) AND n >= :one"),
			ExpressionAttributeValues: item{":m": num(-1), ":one": num(1)},
		})
		if err != nil {
			b.Error(err)
		}
	}
	b.Run("write/baseline", func(b *testing.B) { latencies(b, func() { rawWrite(b, rawKey) }) })
	// Two raw writes in parallel, to two items: what DynamoDB Local makes of
	// the warm cascade's two parallel writes, without Tollgate.
	b.Run("write/baseline-parallel-pair", func(b *testing.B) {
		latencies(b, func() { parallel(2, func(i int) { rawWrite(b, rawKeys[i]) }) })
	})
	b.Run("write/speculative-acquire", func(b *testing.B) { latencies(b, func() { consume(s, key) }) })
	b.Run("write/warm-cascade", func(b *testing.B) { latencies(b, func() { consume(s, key, parent) }) })
	b.Run("write/cold-acquire", func(b *testing.B) { latencies(b, func() { consume(cold, key) }) })
	b.Run("read/baseline", func(b *testing.B) {
		latencies(b, func() {
			if _, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: rawKey, ConsistentRead: aws.Bool(true)}); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("read/available", func(b *testing.B) {
		latencies(b, func() {
			if _, err := lim.Available(ctx, "k", "api", limits); err != nil {
				b.Fatal(err)
			}
		})
	})
	// Throughput: acquires through the limiter on distinct keys.
	for _, g := range []int{1, 8, 32} {
		b.Run("throughput/goroutines-"+strconv.Itoa(g), func(b *testing.B) {
			var n atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for w := range g {
				wg.Go(func() {
					k := "t" + strconv.Itoa(w)
					for int(n.Add(1)) <= b.N {
						lease, err := lim.Acquire(ctx, k, "api", tollgate.Consume{"rps": 1}, tollgate.WithLimits(tollgate.PerSecond("rps", 1_000_000_000)))
						if err != nil {
							b.Error(err)
							return
						}
						_ = lease.Commit(ctx)
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "acquires/s")
		})
	}
}

// latencies runs op b.N times and reports the median and 99th percentile.
func latencies(b *testing.B, op func()) {
	d := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t := time.Now()
		op()
		d = append(d, time.Since(t))
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-us")
}
