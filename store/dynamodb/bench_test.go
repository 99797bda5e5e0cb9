package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/internal/cputime"
	"github.com/tollgate-rl/tollgate/internal/measure"
	"github.com/tollgate-rl/tollgate/limitertest"
	"github.com/tollgate-rl/tollgate/store"
)

// BenchmarkDynamoDB measures the backend where users call it: Acquire and
// Commit through a tollgate.Limiter, on DynamoDB Local, in the cases users
// live in. Every case runs in alternation with its baseline, measured in
// the same run: one raw conditional UpdateItem (ADD with a condition, on a
// small item) for acquires, one consistent GetItem for reads. It reports
// the case's median latency (p50-us), the baseline's (base-p50-us), their
// ratio (x-paired), and the DynamoDB calls each acquire made, counted at
// the HTTP transport (calls/acquire: SDK retries count).
//
// Latency cases, one goroutine:
//   - idle-entities: 1,000 keys of 10/s in turn, the clock moving a second
//     per acquire: every bucket is full again when its key comes back;
//   - busy-bucket: one key of 10,000/min, the clock moving 1 ms per
//     acquire: the bucket is below capacity, drained faster than it fills;
//   - generous-limit: one key of 1,000,000/s on the wall clock: full again
//     before every acquire;
//   - cascade-idle: 100 keys cascading into one organisation (two buckets
//     an acquire), the clock moving a second per acquire: both full again;
//   - cascade-busy: one key cascading into its organisation, both of
//     10,000/min, the clock moving 1 ms per acquire: both below capacity;
//   - concurrency-slot: one key with a concurrency slot and 10,000/min,
//     the clock moving 1 ms per acquire: a durable lease, whose acquire and
//     commit are a transaction each (also against two raw two-item
//     transactions: -vs-transactions);
//   - available: Limiter.Available of a warm key, against one GetItem.
//
// The cascades are also measured against two raw writes in parallel
// (-vs-pair): on this 2-core machine DynamoDB Local does not overlap two
// writes, so one write is not their floor.
//
// Throughput (hot/...): one key acquired from 1, 8 and 32 goroutines on
// the wall clock, in 8 rounds alternating with raw conditional UpdateItems
// of one item at the same concurrency (acquires/s, base-writes/s, and
// x-paired: the raw rate over the acquire rate); generous: 1,000,000/s,
// always full; busy: 6,000/min, so most acquires are refused;
// generous-4shards: the generous key split into 4 shards first (what
// sharding costs or buys when the limit is generous).
//
// The fake clocks are the limiter's (WithClock), with a config cache as
// long as the run (WithCacheTTL), so that the namespace is resolved once as
// on the wall clock within its 60 s TTL.
func BenchmarkDynamoDB(b *testing.B) {
	ctx := context.Background()
	tbl := newTable(b)
	rawKey := item{attrPK: str("raw"), attrSK: str(skState)}
	if _, err := tbl.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tbl.table, Item: item{attrPK: rawKey[attrPK], attrSK: rawKey[attrSK], "n": num(1 << 60)}}); err != nil {
		b.Fatal(err)
	}
	// rawWriteTo is the floor of a warm acquire: one conditional
	// UpdateItem of a counter item k.
	rawWriteTo := func(k item) {
		_, err := tbl.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &tbl.table, Key: k,
			UpdateExpression:          aws.String("ADD n :m"),
			ConditionExpression:       aws.String("attribute_exists(PK) AND n >= :one"),
			ExpressionAttributeValues: item{":m": num(-1), ":one": num(1)},
		})
		if err != nil {
			b.Error(err)
		}
	}
	rawWrite := func() { rawWriteTo(rawKey) }
	rawKey2 := item{attrPK: str("raw2"), attrSK: str(skState)}
	if _, err := tbl.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tbl.table, Item: item{attrPK: rawKey2[attrPK], attrSK: rawKey2[attrSK], "n": num(1 << 60)}}); err != nil {
		b.Fatal(err)
	}
	// Two raw writes in parallel, to two items: what DynamoDB Local makes
	// of a cascade's two parallel writes, without Tollgate (on this 2-core
	// machine it does not overlap them).
	rawPair := func() {
		parallel(2, func(i int) {
			k := []item{rawKey, rawKey2}[i]
			if _, err := tbl.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: &tbl.table, Key: k,
				UpdateExpression:          aws.String("ADD n :m"),
				ConditionExpression:       aws.String("attribute_exists(PK) AND n >= :one"),
				ExpressionAttributeValues: item{":m": num(-1), ":one": num(1)},
			}); err != nil {
				b.Error(err)
			}
		})
	}
	// What a durable lease's acquire and commit are without Tollgate: two
	// transactions, each a conditional update of an item and the put (or
	// the delete) of a small record item.
	rawLeaseKey := item{attrPK: str("raw-lease"), attrSK: str("x")}
	rawTransactions := func() {
		for _, other := range []types.TransactWriteItem{
			{Put: &types.Put{TableName: &tbl.table, Item: item{attrPK: rawLeaseKey[attrPK], attrSK: rawLeaseKey[attrSK], "v": num(1)}}},
			{Delete: &types.Delete{TableName: &tbl.table, Key: rawLeaseKey}},
		} {
			_, err := tbl.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Update: &types.Update{TableName: &tbl.table, Key: rawKey,
					UpdateExpression:          aws.String("ADD n :m"),
					ConditionExpression:       aws.String("attribute_exists(PK) AND n >= :one"),
					ExpressionAttributeValues: item{":m": num(-1), ":one": num(1)}}},
				other,
			}})
			if err != nil {
				b.Error(err)
			}
		}
	}
	rawRead := func() {
		if _, err := tbl.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &tbl.table, Key: rawKey, ConsistentRead: aws.Bool(true)}); err != nil {
			b.Error(err)
		}
	}
	// DynamoDB Local runs on the JVM: warm it up (JIT) before measuring.
	for range 2000 {
		rawWrite()
	}

	for _, c := range latencyCases() {
		b.Run("latency/"+c.name, func(b *testing.B) {
			env := newBenchEnv(b, tbl.table, c.clock)
			op := c.setup(b, env)
			measure.Paired(b, rawWrite, op)
			env.reportCalls(b)
		})
		if c.pair {
			b.Run("latency/"+c.name+"-vs-pair", func(b *testing.B) {
				env := newBenchEnv(b, tbl.table, c.clock)
				op := c.setup(b, env)
				measure.Paired(b, rawPair, op)
				env.reportCalls(b)
			})
		}
		if c.transactions {
			b.Run("latency/"+c.name+"-vs-transactions", func(b *testing.B) {
				env := newBenchEnv(b, tbl.table, c.clock)
				op := c.setup(b, env)
				measure.Paired(b, rawTransactions, op)
				env.reportCalls(b)
			})
		}
	}
	b.Run("latency/available", func(b *testing.B) {
		env := newBenchEnv(b, tbl.table, false)
		limits := tollgate.WithLimits(tollgate.PerSecond("rps", 10))
		env.acquire(b, "reader", limits)
		measure.Paired(b, rawRead, func() {
			if _, err := env.lim.Available(ctx, "reader", "api", limits); err != nil {
				b.Error(err)
			}
		})
	})

	for _, hot := range []struct {
		name   string
		limit  tollgate.Limit
		shards int
	}{
		{"generous", tollgate.PerSecond("rps", 1_000_000), 1},
		{"busy", tollgate.PerMinute("rps", 6_000), 1},
		{"generous-4shards", tollgate.PerSecond("rps", 1_000_000), 4},
	} {
		for _, g := range []int{1, 8, 32} {
			if hot.shards > 1 && g != 32 {
				continue
			}
			b.Run(fmt.Sprintf("hot/%s/goroutines-%d", hot.name, g), func(b *testing.B) {
				var opts []Option
				if hot.shards > 1 {
					// A meter of one write a second, so that the warm-up
					// splits the bucket to its shards at once.
					opts = []Option{WithWritePressureLimit(1), WithMaxShards(hot.shards)}
				}
				env := newBenchEnv(b, tbl.table, false, opts...)
				limits := tollgate.WithLimits(hot.limit)
				key := uniquePrefix("hot-" + hot.name)
				env.acquire(b, key, limits) // registers the namespace
				id := bucketID{env.ns(b), store.BucketKey{Entity: key, Resource: "api"}}
				for i := 0; env.s.eng().shardsOf(id) < hot.shards; i++ {
					if i == 100 {
						b.Fatalf("%s did not split to %d shards", key, hot.shards)
					}
					env.acquire(b, key, limits)
				}
				env.reset()
				pairedThroughput(b, g, func(int) { rawWrite() }, func(int) {
					env.tryAcquire(b, key, limits)
				})
				env.reportCalls(b)
			})
		}
	}
	// Own keys: each goroutine acquires on a warm key of its own, against
	// raw conditional UpdateItems each on an item of its own, at the same
	// concurrency (issue 26: the rate and the client's CPU per acquire
	// against the raw write's).
	for _, g := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("own/goroutines-%d", g), func(b *testing.B) {
			env := newBenchEnv(b, tbl.table, false)
			limits := tollgate.WithLimits(tollgate.PerSecond("rps", 1_000_000))
			prefix := uniquePrefix("own")
			raws := make([]item, g)
			for w := range g {
				env.acquire(b, prefix+strconv.Itoa(w), limits)
				raws[w] = item{attrPK: str(prefix + "raw" + strconv.Itoa(w)), attrSK: str(skState)}
				if _, err := tbl.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tbl.table,
					Item: item{attrPK: raws[w][attrPK], attrSK: raws[w][attrSK], "n": num(1 << 60)}}); err != nil {
					b.Fatal(err)
				}
			}
			env.reset()
			pairedThroughput(b, g, func(w int) { rawWriteTo(raws[w]) }, func(w int) {
				env.tryAcquire(b, prefix+strconv.Itoa(w), limits)
			})
			env.reportCalls(b)
		})
	}
}

// BenchmarkDynamoDBLeaseForms measures the forms of a durable lease's
// store calls against each other (docs/dynamodb.md 4.13), on one warm
// concurrency bucket: every iteration runs each form once, in turn, so
// that all see the same moments of DynamoDB Local, and reports each one's
// median (p50-us metrics, named for the form):
//   - acquire: a leased acquire (bucket + record, one transaction);
//   - acquire-reused: the same with a reused id (+ a ConditionCheck);
//   - end-delete: an ending that deletes the record (the only ending
//     before tombstones; a reservation's still);
//   - end-tombstone: an ending that keeps a tombstone (+ its Put), by the
//     process that acquired the lease;
//   - end-tombstone-unseen: the same by a process that never saw the
//     record (a GetItem first);
//   - resume-open / resume-ended: GetLease of an open lease (one GetItem)
//     and of an ended one (two);
//   - resume-batch: a BatchGetItem of both keys of the open lease, the
//     alternative to resume-open;
//   - getitem: a raw consistent GetItem of the open record, the floor.
func BenchmarkDynamoDBLeaseForms(b *testing.B) {
	ctx := context.Background()
	s := newTable(b)
	cold := mustNew(b, localConfig(), s.table, nil, atLocal) // never sees the records it ends
	const ns = "bench-leases"
	now := time.Now().UnixMilli()
	k := store.BucketKey{Entity: "job", Resource: "batch"}
	n := 0
	acquire := func(reused bool) *store.LeaseRecord {
		n++
		req := &store.ConsumeRequest{Now: now, ReusedID: reused, Buckets: []store.BucketRequest{{Key: k, Limits: []store.LimitRequest{
			{Name: "slots", Params: bucket.Params{Capacity: 1 << 40}, Check: true, Amount: 1000},
		}}}}
		req.Lease = store.NewLeaseRecord(fmt.Sprintf("%032x", n), "bench", req, now+600_000)
		if ok, err := s.Consume(ctx, ns, req); !ok || err != nil {
			b.Fatalf("Consume = %v, %v", ok, err)
		}
		return req.Lease
	}
	end := func(st *Store, rec *store.LeaseRecord, keep int64) {
		e := store.LeaseEnding{ID: rec.ID, Version: rec.Version, Deltas: rec.EndDeltas(store.Commit), As: store.Commit, At: now}
		if keep > 0 {
			e.KeepUntil = now + keep
		}
		if err := st.EndLease(ctx, ns, e); err != nil {
			b.Fatal(err)
		}
	}
	resume := func(id string) {
		if _, err := s.GetLease(ctx, ns, id); err != nil {
			b.Fatal(err)
		}
	}
	open := acquire(false)
	keys := []item{leaseKey(ns, open.ID), tombstoneKey(ns, open.ID)}
	batch := func() {
		if _, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			s.table: {Keys: keys, ConsistentRead: aws.Bool(true)},
		}}); err != nil {
			b.Fatal(err)
		}
	}
	get := func() {
		if _, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: keys[0], ConsistentRead: aws.Bool(true)}); err != nil {
			b.Fatal(err)
		}
	}
	for range 500 { // DynamoDB Local's JIT
		end(s, acquire(false), 600_000)
	}
	forms := []string{"acquire", "acquire-reused", "end-delete", "end-tombstone", "end-tombstone-unseen",
		"resume-open", "resume-ended", "resume-batch", "getitem"}
	d := make([][]time.Duration, len(forms))
	for b.Loop() {
		var recs [3]*store.LeaseRecord
		d[0] = append(d[0], measure.Timed(func() { recs[0] = acquire(false) }))
		d[1] = append(d[1], measure.Timed(func() { recs[1] = acquire(true) }))
		recs[2] = acquire(false)
		d[2] = append(d[2], measure.Timed(func() { end(s, recs[0], 0) }))
		d[3] = append(d[3], measure.Timed(func() { end(s, recs[1], 600_000) }))
		d[4] = append(d[4], measure.Timed(func() { end(cold, recs[2], 600_000) }))
		d[5] = append(d[5], measure.Timed(func() { resume(open.ID) }))
		d[6] = append(d[6], measure.Timed(func() { resume(recs[1].ID) }))
		d[7] = append(d[7], measure.Timed(batch))
		d[8] = append(d[8], measure.Timed(get))
	}
	for i, f := range forms {
		p50, _ := measure.Percentiles(d[i])
		b.ReportMetric(p50, f+"-p50-us")
	}
}

// latencyCase is one case of BenchmarkDynamoDB's latency group: setup
// warms its buckets and returns one acquire + commit.
type latencyCase struct {
	name  string
	clock bool // a fake clock (moved by the case) instead of the wall clock
	pair  bool // a cascade: also measured against two raw writes in parallel
	// transactions: a durable lease, also measured against two raw
	// two-item transactions (its acquire's and its commit's)
	transactions bool
	setup        func(b *testing.B, env *benchEnv) func()
}

func latencyCases() []latencyCase {
	return []latencyCase{
		{"idle-entities", true, false, false, func(b *testing.B, env *benchEnv) func() {
			limits := tollgate.WithLimits(tollgate.PerSecond("rps", 10))
			return env.inTurn(b, uniquePrefix("idle"), 1000, time.Second, limits)
		}},
		{"busy-bucket", true, false, false, func(b *testing.B, env *benchEnv) func() {
			limits := tollgate.WithLimits(tollgate.PerMinute("rps", 10_000))
			return env.inTurn(b, uniquePrefix("busy"), 1, time.Millisecond, limits)
		}},
		{"generous-limit", false, false, false, func(b *testing.B, env *benchEnv) func() {
			limits := tollgate.WithLimits(tollgate.PerSecond("rps", 1_000_000))
			return env.inTurn(b, uniquePrefix("generous"), 1, 0, limits)
		}},
		{"cascade-idle", true, true, false, func(b *testing.B, env *benchEnv) func() {
			p := uniquePrefix("ci")
			env.cascade(b, p, 100)
			limits := tollgate.WithLimits(tollgate.PerSecond("rps", 10))
			return env.inTurn(b, p, 100, time.Second, limits)
		}},
		{"cascade-busy", true, true, false, func(b *testing.B, env *benchEnv) func() {
			p := uniquePrefix("cb")
			env.cascade(b, p, 1)
			limits := tollgate.WithLimits(tollgate.PerMinute("rps", 10_000))
			return env.inTurn(b, p, 1, time.Millisecond, limits)
		}},
		// The busy bucket again, each acquire with an idempotency key of
		// its own (as the clients send): AcquireAndCommit grants, commits
		// and remembers in one transaction of the bucket's write and the
		// record born committed, instead of one conditional write.
		{"busy-bucket-idempotent", true, false, false, func(b *testing.B, env *benchEnv) func() {
			env.keyed = true
			limits := tollgate.WithLimits(tollgate.PerMinute("rps", 10_000))
			return env.inTurn(b, uniquePrefix("busyk"), 1, time.Millisecond, limits)
		}},
		// A concurrency slot and a rate limit: the acquire writes the
		// lease's record with the debit (one transaction), the commit
		// deletes it with the slot's return (another).
		{"concurrency-slot", true, false, true, func(b *testing.B, env *benchEnv) func() {
			env.consume = tollgate.Consume{"rps": 1, "slots": 1}
			limits := tollgate.WithLimits(tollgate.PerMinute("rps", 10_000), tollgate.ConcurrencyLimit("slots", 100))
			return env.inTurn(b, uniquePrefix("slot"), 1, time.Millisecond, limits)
		}},
	}
}

// benchEnv is a limiter over a Store of its own on the benchmark's table,
// whose HTTP transport counts the calls it makes.
type benchEnv struct {
	consume  tollgate.Consume // what each acquire takes (newBenchEnv: one rps)
	s        *Store
	lim      *tollgate.Limiter
	adm      *tollgate.Admin
	clk      *clock.Fake // nil: the wall clock
	calls    atomic.Int64
	acquires atomic.Int64
	keyed    bool // each acquire with an idempotency key of its own
}

func newBenchEnv(b *testing.B, table string, fake bool, opts ...Option) *benchEnv {
	b.Helper()
	env := &benchEnv{consume: tollgate.Consume{"rps": 1}}
	env.s = mustNew(b, localConfig(func(c *aws.Config) {
		c.HTTPClient = &http.Client{Transport: countingRT{NewHTTPClient().Transport, &env.calls}}
	}), table, opts, atLocal)
	limOpts := []tollgate.Option{tollgate.WithCacheTTL(24 * time.Hour)}
	if fake {
		env.clk = clock.NewFake(time.Now())
		limOpts = append(limOpts, tollgate.WithClock(env.clk))
	}
	env.lim, env.adm = limitertest.Planes(b, env.s, time.Second, limOpts...)
	return env
}

// ns returns the id of the limiter's namespace.
func (env *benchEnv) ns(b *testing.B) string {
	n, err := env.s.GetNamespace(context.Background(), env.lim.Namespace())
	if err != nil {
		b.Fatal(err)
	}
	return n.ID
}

// tryAcquire acquires one token of entity on api and commits; a refusal
// is a fine outcome, an error is not.
func (env *benchEnv) tryAcquire(b *testing.B, entity string, limits tollgate.AcquireOption) {
	n := env.acquires.Add(1)
	if env.keyed {
		_, err := env.lim.AcquireAndCommit(context.Background(), entity, "api", env.consume, limits,
			tollgate.WithIdempotencyKey(entity+"-"+strconv.FormatInt(n, 10)))
		if err != nil && !errors.Is(err, tollgate.ErrRateLimited) {
			b.Error(err)
		}
		return
	}
	le, err := env.lim.Acquire(context.Background(), entity, "api", env.consume, limits)
	switch {
	case err == nil:
		if err := le.Commit(context.Background()); err != nil {
			b.Error(err)
		}
	case !errors.Is(err, tollgate.ErrRateLimited):
		b.Error(err)
	}
}

// acquire is tryAcquire that must be granted.
func (env *benchEnv) acquire(b *testing.B, entity string, limits tollgate.AcquireOption) {
	b.Helper()
	le, err := env.lim.Acquire(context.Background(), entity, "api", env.consume, limits)
	if err != nil {
		b.Fatal(err)
	}
	if err := le.Commit(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// inTurn warms n keys (prefix0 ...) and returns an op that acquires them
// in turn, moving the fake clock by step before each (step 0: the wall
// clock). Counting starts afresh.
func (env *benchEnv) inTurn(b *testing.B, prefix string, n int, step time.Duration, limits tollgate.AcquireOption) func() {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
		if env.clk != nil {
			env.clk.Advance(step)
		}
		env.acquire(b, keys[i], limits)
	}
	env.reset()
	i := 0
	return func() {
		if env.clk != nil {
			env.clk.Advance(step)
		}
		env.tryAcquire(b, keys[i%n], limits)
		i++
	}
}

var benchRuns atomic.Int64

// uniquePrefix returns a prefix of entity ids no other run of a case has
// used (the benchmark function runs several times, on one table).
func uniquePrefix(name string) string { return name + strconv.FormatInt(benchRuns.Add(1), 10) + "-" }

// cascade creates an organisation and n keys (prefix0 ...) cascading into
// it.
func (env *benchEnv) cascade(b *testing.B, prefix string, n int) {
	ctx := context.Background()
	if _, err := env.adm.CreateEntity(ctx, tollgate.Entity{ID: prefix + "org"}); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		if _, err := env.adm.CreateEntity(ctx, tollgate.Entity{ID: prefix + strconv.Itoa(i), ParentID: prefix + "org", Cascade: true}); err != nil {
			b.Fatal(err)
		}
	}
}

func (env *benchEnv) reset() {
	env.calls.Store(0)
	env.acquires.Store(0)
}

// reportCalls reports the DynamoDB calls per acquire since the last reset.
func (env *benchEnv) reportCalls(b *testing.B) {
	if n := env.acquires.Load(); n > 0 {
		b.ReportMetric(float64(env.calls.Load())/float64(n), "calls/acquire")
	}
}

// pairedThroughput measures op's throughput with g goroutines (op(w) is
// goroutine w's call) in alternation with base's at the same concurrency:
// b.N calls of each, in 8 rounds of base then op, so that both see the same
// moments of DynamoDB Local's drift. It reports op's rate (acquires/s),
// base's (base-writes/s) and base's rate over op's (x-paired: like the
// latency ratios, how many base calls' time one op call costs), and the
// process's CPU time per call of each (cpu-us, base-cpu-us) and their
// ratio (cpu-x): the client's, DynamoDB Local being another process.
//
// The goroutines of each side carry a profiler label (side=base, side=op),
// so that a CPU profile of the benchmark (-cpuprofile) separates the two:
// go tool pprof -tagfocus side=op. The SDK's middleware stack is deeper
// than a profile's stack, so the callers' frames cannot tell them apart.
func pairedThroughput(b *testing.B, g int, base, op func(w int)) {
	const rounds = 8
	ctx := context.Background()
	var baseTime, opTime, baseCPU, opCPU time.Duration
	for r := range rounds {
		n := b.N / rounds
		if r == rounds-1 {
			n = b.N - n*(rounds-1)
		}
		c0 := cputime.Process()
		pprof.Do(ctx, baseLabel, func(context.Context) { baseTime += concurrently(g, n, base) })
		c1 := cputime.Process()
		pprof.Do(ctx, opLabel, func(context.Context) { opTime += concurrently(g, n, op) })
		baseCPU, opCPU = baseCPU+c1-c0, opCPU+cputime.Process()-c1
	}
	opRate := float64(b.N) / opTime.Seconds()
	baseRate := float64(b.N) / baseTime.Seconds()
	b.ReportMetric(opRate, "acquires/s")
	b.ReportMetric(baseRate, "base-writes/s")
	b.ReportMetric(baseRate/opRate, "x-paired")
	b.ReportMetric(float64(opCPU.Microseconds())/float64(b.N), "cpu-us")
	b.ReportMetric(float64(baseCPU.Microseconds())/float64(b.N), "base-cpu-us")
	if baseCPU > 0 {
		b.ReportMetric(float64(opCPU)/float64(baseCPU), "cpu-x")
	}
}

var (
	baseLabel = pprof.Labels("side", "base")
	opLabel   = pprof.Labels("side", "op")
)

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

// BenchmarkDynamoDBRefusalFlood measures refused acquires of one exhausted
// key (one token an hour, spent) through a Limiter on DynamoDB Local, on
// the wall clock, from 1 and 8 goroutines: the store's refusal (the image
// refuses, one consistent GetItem confirms) and the deny cache's
// (WithDenyCache, max age 1 s: one refusal a second goes to the store).
// It reports the DynamoDB calls each refusal made (calls/acquire, counted
// per API call) besides the time.
func BenchmarkDynamoDBRefusalFlood(b *testing.B) {
	ctx := context.Background()
	tt := newTestTable(b)
	limits := tollgate.WithLimits(tollgate.RateLimit("rph", 1, time.Hour))
	one := tollgate.Consume{"rph": 1}
	runs := 0 // each run of a case (the calibrating ones too) floods a key of its own
	for _, g := range []int{1, 8} {
		for _, c := range []struct {
			name string
			opts []tollgate.Option
		}{
			{"store", nil},
			{"denycache", []tollgate.Option{tollgate.WithDenyCache(tollgate.DefaultDenyCacheMaxAge)}},
		} {
			b.Run(fmt.Sprintf("%s/goroutines-%d", c.name, g), func(b *testing.B) {
				cl := tt.client(b, 5*time.Second)
				lim, _ := limitertest.Planes(b, cl.Store, time.Hour, c.opts...)
				runs++
				key := fmt.Sprintf("abuser-%d", runs)
				if _, err := lim.AcquireAndCommit(ctx, key, "api", one, limits); err != nil {
					b.Fatal(err)
				}
				if _, err := lim.Acquire(ctx, key, "api", one, limits); !errors.Is(err, tollgate.ErrRateLimited) {
					b.Fatalf("Acquire: %v, want a refusal", err)
				}
				cl.calls.take()
				var n atomic.Int64
				b.SetParallelism(g) // GOMAXPROCS (2 here) times g goroutines
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := lim.Acquire(ctx, key, "api", one, limits); !errors.Is(err, tollgate.ErrRateLimited) {
							b.Errorf("Acquire: %v, want a refusal", err)
							return
						}
						n.Add(1)
					}
				})
				calls := 0
				for _, v := range cl.calls.take() {
					calls += v
				}
				b.ReportMetric(float64(calls)/float64(n.Load()), "calls/acquire")
			})
		}
	}
}
