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
	cold := mustNew(b, localConfig(), s.table, []Option{WithSpeculative(false)}, atLocal)
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
	write := func() { rawWrite(b, rawKey) }
	pair := func() { parallel(2, func(i int) { rawWrite(b, rawKeys[i]) }) }
	get := func() {
		if _, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: rawKey, ConsistentRead: aws.Bool(true)}); err != nil {
			b.Error(err)
		}
	}
	// Each case runs in alternation with its baseline (see paired).
	b.Run("write/baseline", func(b *testing.B) { latencies(b, write) })
	// Two raw writes in parallel, to two items: what DynamoDB Local makes of
	// the warm cascade's two parallel writes, without Tollgate.
	b.Run("write/parallel-pair", func(b *testing.B) { paired(b, write, pair) })
	b.Run("write/speculative-acquire", func(b *testing.B) { paired(b, write, func() { consume(s, key) }) })
	b.Run("write/warm-cascade", func(b *testing.B) { paired(b, write, func() { consume(s, key, parent) }) })
	b.Run("write/warm-cascade-vs-pair", func(b *testing.B) { paired(b, pair, func() { consume(s, key, parent) }) })
	b.Run("write/cold-acquire", func(b *testing.B) { paired(b, write, func() { consume(cold, key) }) })
	b.Run("read/baseline", func(b *testing.B) { latencies(b, get) })
	b.Run("read/available", func(b *testing.B) {
		paired(b, get, func() {
			if _, err := lim.Available(ctx, "k", "api", limits); err != nil {
				b.Error(err)
			}
		})
	})
	// Throughput at 1, 8 and 32 goroutines, each on its own key: acquires
	// (and commits) through the limiter, in alternation with raw writes of
	// the same concurrency, each goroutine on its own item (see
	// pairedThroughput). As above, the buckets never fill (a bucket full
	// again cannot take a speculative debit: docs/dynamodb.md 4.2), so every
	// acquire is one speculative write.
	neverFull := tollgate.WithLimits(tollgate.Limit{Name: "rps", Capacity: 1_000_000_000, RefillAmount: 1, RefillPeriod: time.Second})
	rawItems := make([]item, 32)
	for w := range rawItems {
		rawItems[w] = item{attrPK: str("raw-w" + strconv.Itoa(w)), attrSK: str(skState)}
		if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: item{attrPK: rawItems[w][attrPK], attrSK: rawItems[w][attrSK], "n": num(1 << 60)}}); err != nil {
			b.Fatal(err)
		}
	}
	for _, g := range []int{1, 8, 32} {
		b.Run("throughput/goroutines-"+strconv.Itoa(g), func(b *testing.B) {
			pairedThroughput(b, g, func(w int) { rawWrite(b, rawItems[w]) }, func(w int) {
				lease, err := lim.Acquire(ctx, "t"+strconv.Itoa(w), "api", tollgate.Consume{"rps": 1}, neverFull)
				if err != nil {
					b.Error(err)
					return
				}
				_ = lease.Commit(ctx)
			})
		})
	}
}

// pairedThroughput measures op's throughput with g goroutines (op(w) is
// goroutine w's call) in alternation with base's at the same concurrency:
// b.N calls of each, in 8 rounds of base then op, so that both see the same
// moments of DynamoDB Local's drift. It reports op's rate (acquires/s),
// base's (base-writes/s) and base's rate over op's (x-paired: like the
// latency ratios, how many base calls' time one op call costs).
func pairedThroughput(b *testing.B, g int, base, op func(w int)) {
	const rounds = 8
	var baseTime, opTime time.Duration
	for r := range rounds {
		n := b.N / rounds
		if r == rounds-1 {
			n = b.N - n*(rounds-1)
		}
		baseTime += concurrently(g, n, base)
		opTime += concurrently(g, n, op)
	}
	opRate := float64(b.N) / opTime.Seconds()
	baseRate := float64(b.N) / baseTime.Seconds()
	b.ReportMetric(opRate, "acquires/s")
	b.ReportMetric(baseRate, "base-writes/s")
	b.ReportMetric(baseRate/opRate, "x-paired")
}

// concurrently makes n calls of f from g goroutines (f(w) for goroutine w)
// and returns how long they took.
func concurrently(g, n int, f func(w int)) time.Duration {
	if n == 0 {
		return 0
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range g {
		wg.Go(func() {
			for int(next.Add(1)) <= n {
				f(w)
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// latencies runs op b.N times and reports the median and 99th percentile.
func latencies(b *testing.B, op func()) {
	d := make([]time.Duration, 0, b.N)
	for b.Loop() {
		d = append(d, timed(op))
	}
	p50, p99 := percentiles(d)
	b.ReportMetric(p50, "p50-us")
	b.ReportMetric(p99, "p99-us")
}

// paired runs op b.N times, each time right after one run of base, and
// reports op's median and 99th percentile, base's median, and the ratio of
// the medians (x-paired). DynamoDB Local's speed drifts during a run (the
// JVM, the machine's other load), so a baseline measured seconds apart
// from its case is not a fair one: measured in alternation, both see the
// same moments. ns/op counts both.
func paired(b *testing.B, base, op func()) {
	bd := make([]time.Duration, 0, b.N)
	d := make([]time.Duration, 0, b.N)
	for b.Loop() {
		bd = append(bd, timed(base))
		d = append(d, timed(op))
	}
	p50, p99 := percentiles(d)
	base50, _ := percentiles(bd)
	b.ReportMetric(p50, "p50-us")
	b.ReportMetric(p99, "p99-us")
	b.ReportMetric(base50, "base-p50-us")
	b.ReportMetric(p50/base50, "x-paired")
}

func timed(op func()) time.Duration {
	t := time.Now()
	op()
	return time.Since(t)
}

// percentiles returns the 50th and 99th percentiles of d in microseconds.
func percentiles(d []time.Duration) (p50, p99 float64) {
	slices.Sort(d)
	return float64(d[len(d)/2].Microseconds()), float64(d[len(d)*99/100].Microseconds())
}
