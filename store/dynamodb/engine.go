package dynamodb

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-rl/tollgate/store"
)

// The write engine.
//
// Everything the Store writes to bucket items goes through its engine:
// acquires (single buckets, cascades, durable leases), deltas, penalties,
// resets, lease endings and splits, and the reads that warm what it
// knows of the items. The Store holds it behind bucketEngine, its only
// way in; the engine shares the Store's client (client.go) and nothing
// else of it.
//
// A rate-only acquire of one bucket reads, in order:
//
//	engine.go    Consume: which path the request takes
//	acquire.go   consumeOne, tryShards: the bucket's shards as cached, the target
//	lane.go      submit: the item's queue; one write at a time per item
//	write.go     serve: simulate the batch (plan.go), plan the write, send the UpdateItem
//
// with the pieces of the write in plan.go (the simulation), expr.go (its
// condition and update), meter.go and ttl.go (what it does to the meter
// and the ttl) and image.go (the item before and after). The other paths:
// cascade.go, durable.go and transact.go (writes in transactions),
// deltas.go, penalty.go, reset.go, leaseend.go, shards.go and split.go
// (sharded buckets), records.go (reads); known.go bounds what the engine
// remembers.
type engine struct {
	*client

	speculative     bool
	callTimeout     time.Duration // how long a part waits in its lane; 0: no bound
	bucketTTL       int64         // ms; see WithBucketTTL
	writesPerSecond int64         // the pressure limit; 0: no sharding
	maxShards       int           // a power of two, at most maxShards

	// lanes hold the images of the items this process writes and queue
	// its writes to them (lane.go); they and shardCounts are bounded
	// (known.go).
	lanes       *laneTable
	shardCounts shardCounts

	splitting sync.Map // bucketID -> struct{}: splits under way here
	splits    atomic.Int64

	pick func(n int) []int // the shards an acquire tries; tests fix them
}

var _ bucketEngine = (*engine)(nil)

// newEngine returns the write engine of a Store of client c and options o.
func newEngine(c *client, o *options) *engine {
	en := &engine{client: c, speculative: o.speculative, callTimeout: o.callTimeout, bucketTTL: o.bucketTTL,
		writesPerSecond: o.writesPerSecond, maxShards: o.maxShards, lanes: newLaneTable(o.knownBuckets), pick: pickShards}
	en.shardCounts.limit = int64(o.knownBuckets)
	return en
}

// itemID names one bucket item: a shard of a bucket.
type itemID struct {
	ns    string
	key   store.BucketKey
	shard int
}

// bucketID names a bucket: every shard of it.
type bucketID struct {
	ns string
	k  store.BucketKey
}

// Consume implements store.Buckets: a request with a lease record is one
// transaction (durable.go), a single bucket takes its lane (acquire.go),
// and a cascade each of its buckets' (cascade.go).
func (en *engine) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	b := en.newBudget()
	if req.Lease != nil {
		return en.consumeLeased(ctx, b, ns, req)
	}
	if req.Event != nil {
		return false, store.CheckConsumeEvent(req)
	}
	if len(req.Buckets) == 1 {
		return en.consumeOne(ctx, b, ns, &req.Buckets[0], req.Now)
	}
	return en.consumeMany(ctx, b, ns, req)
}
