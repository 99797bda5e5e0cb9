package dynamodb

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/tollgate-rl/tollgate/store"
)

// What this process knows of bucket items.
//
// The lanes of the items it writes (lane.go), which hold their images,
// and the shard counts of split buckets; both are bounded
// (WithKnownBuckets), and forgetting either costs at most one write whose
// failed condition returns what was forgotten.

// shardsOf returns the shard count of a bucket as cached (1 if not known).
func (en *engine) shardsOf(id bucketID) int { return en.shardCounts.load(id) }

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

// forget forgets what this process knows of every bucket for which match
// is true: its items' images and its shard count (a deleted entity's, a
// purged namespace's).
func (en *engine) forget(match func(ns string, k store.BucketKey) bool) {
	en.lanes.forgetIf(func(id itemID) bool { return match(id.ns, id.key) })
	en.shardCounts.forgetIf(func(id bucketID) bool { return match(id.ns, id.k) })
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

// laneShards is how many independently locked parts the lane table has.
const laneShards = 64

// laneTable holds the lanes of the items this process has used, at most a
// bound: beyond it, idle lanes are dropped (their next write plans as for
// an item never seen).
type laneTable struct {
	seed     maphash.Seed
	perShard int
	shards   [laneShards]struct {
		mu sync.Mutex
		m  map[itemID]*lane
	}
}

func newLaneTable(limit int) *laneTable {
	t := &laneTable{seed: maphash.MakeSeed(), perShard: max(limit/laneShards, 1)}
	for i := range t.shards {
		t.shards[i].m = map[itemID]*lane{}
	}
	return t
}

func (t *laneTable) shardOf(id itemID) int {
	h := maphash.String(t.seed, id.ns) ^ maphash.String(t.seed, id.key.Entity)*31 ^ maphash.String(t.seed, id.key.Resource)*1_000_003
	return int((h + uint64(id.shard)*0x9e3779b97f4a7c15) % laneShards)
}

// get returns the lane of id, creating it.
func (t *laneTable) get(id itemID) *lane {
	sh := &t.shards[t.shardOf(id)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if l := sh.m[id]; l != nil {
		return l
	}
	if len(sh.m) >= t.perShard {
		t.evict(sh.m)
	}
	l := &lane{}
	sh.m[id] = l
	return l
}

// lookup returns the lane of id, or nil.
func (t *laneTable) lookup(id itemID) *lane {
	sh := &t.shards[t.shardOf(id)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.m[id]
}

// evict drops about an eighth of m's idle lanes (the map's iteration
// order picks them at random).
func (t *laneTable) evict(m map[itemID]*lane) {
	n := max(len(m)/8, 1)
	for id, l := range m {
		if n == 0 {
			return
		}
		l.mu.Lock()
		if !l.running && len(l.queue) == 0 {
			l.gone = true
			delete(m, id)
			n--
		}
		l.mu.Unlock()
	}
}

// forgetIf drops what is known of every item for which match is true (a
// deleted entity's, a purged namespace's).
func (t *laneTable) forgetIf(match func(itemID) bool) {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for id, l := range sh.m {
			if match(id) {
				l.mu.Lock()
				l.img = nil
				l.mu.Unlock()
			}
		}
		sh.mu.Unlock()
	}
}

// len returns how many lanes the table holds.
func (t *laneTable) len() int {
	n := 0
	for i := range t.shards {
		t.shards[i].mu.Lock()
		n += len(t.shards[i].m)
		t.shards[i].mu.Unlock()
	}
	return n
}

// image returns a copy of the image the lane of id holds, or nil.
func (t *laneTable) image(id itemID) *image {
	l := t.lookup(id)
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.img == nil {
		return nil
	}
	return l.img.clone()
}

// remember is offer for an item this process may not have written yet (a
// read): the lane is created if need be.
func (t *laneTable) remember(id itemID, img *image) {
	t.get(id)
	t.offer(id, img)
}

// offer gives the lane of id a fresher image (a read's, a delta's), unless
// a write is under way there, whose outcome will be fresher still.
func (t *laneTable) offer(id itemID, img *image) {
	l := t.lookup(id)
	if l == nil {
		return
	}
	l.mu.Lock()
	if !l.running {
		l.img = img
	}
	l.mu.Unlock()
}
