package dynamodb

import (
	"sync"
	"sync/atomic"

	"github.com/tollgate-rl/tollgate/store"
)

// DefaultKnownBuckets is how many bucket items a Store remembers by default
// (see WithKnownBuckets).
const DefaultKnownBuckets = 100_000

// WithKnownBuckets bounds how many bucket items the Store remembers: the
// image of each item as its last write returned it, from which the next
// write is planned without a read (default DefaultKnownBuckets; each costs
// a few hundred bytes). Beyond it, idle items are forgotten at random; the
// next acquire of a forgotten item assumes it is full, which costs one
// write when it is (an idle entity) and two otherwise. n must be at least 1.
func WithKnownBuckets(n int) Option {
	return func(s *Store) {
		if n < 1 {
			s.invalid("WithKnownBuckets", n, "must be at least 1")
			return
		}
		s.knownLimit = n
	}
}

// shardsOf returns the shard count of a bucket as cached (1 if not known).
func (s *Store) shardsOf(id bucketID) int { return s.shardCounts.load(id) }

// shardCounts remembers the shard counts of split buckets (a bucket not in
// it has one item). Entries are never wrong for long: a write planned
// against another shard count, or a deleted bucket, fails and plans again.
type shardCounts struct {
	m     sync.Map // bucketID -> int
	n     atomic.Int64
	limit int64
}

func (c *shardCounts) load(id bucketID) int {
	if v, ok := c.m.Load(id); ok {
		return v.(int)
	}
	return 1
}

func (c *shardCounts) store(id bucketID, shards int) {
	if shards <= 1 {
		c.forget(id)
		return
	}
	if _, loaded := c.m.Swap(id, shards); !loaded && c.n.Add(1) > c.limit {
		// Starting afresh is cheaper than tracking recency; a forgotten
		// count is learnt again from the next write's failed condition.
		c.m.Clear()
		c.n.Store(0)
	}
}

func (c *shardCounts) forget(id bucketID) {
	if _, loaded := c.m.LoadAndDelete(id); loaded {
		c.n.Add(-1)
	}
}

// forgetIf forgets what this process knows of every bucket for which match
// is true: its items' images and its shard count (a deleted entity's, a
// purged namespace's).
func (s *Store) forgetIf(match func(ns string, k store.BucketKey) bool) {
	s.lanes.forgetIf(func(id itemID) bool { return match(id.ns, id.key) })
	s.shardCounts.forgetIf(func(id bucketID) bool { return match(id.ns, id.k) })
}

// forgetIf forgets every bucket for which match is true.
func (c *shardCounts) forgetIf(match func(bucketID) bool) {
	c.m.Range(func(key, _ any) bool {
		if id := key.(bucketID); match(id) {
			c.forget(id)
		}
		return true
	})
}
