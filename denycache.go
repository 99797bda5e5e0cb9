package tollgate

import (
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// The deny cache (WithDenyCache, docs/semantics.md "Refusals from
// memory"): a refusal of the store tells this process each bucket's state
// at the request's instant, and time alone refills a rate limit at a known
// rate, so until that state refilled covers an amount no acquire of that
// amount can be granted, whatever happens meanwhile, except a refund, a
// reset or a change of limits. The cache remembers the states of the
// buckets of refused requests and refuses from memory the acquires they
// cannot cover, with the statuses the store would have given.
//
// It is exact: it only refuses, and a state it remembers bounds from above
// what the store holds (other processes' debits only lower it) as long as
// nothing gives tokens back. What gives tokens back through this limiter
// (a lease's rollback, adjustment or ending, which refund) forgets that
// bucket at once, and a reset by an Admin sharing the limiter's
// ChangeWatch, or a change of limits this limiter sees, forgets every
// bucket; a refund or reset made elsewhere is seen when the entry ages
// out, at most maxAge after the refusal it remembers.

// DefaultDenyCacheSize is how many buckets the deny cache remembers at
// most, unless WithDenyCacheSize says otherwise.
const DefaultDenyCacheSize = 10_000

// DefaultDenyCacheMaxAge is the max age to pass to WithDenyCache unless
// there is a reason to choose another: a refund or reset made by another
// process is then seen within a second, as a change of limits made there
// is (DefaultRefreshInterval).
const DefaultDenyCacheMaxAge = time.Second

// denyShards is how many independently locked parts the deny cache has
// at most (fewer when its size is smaller, so that each may hold one).
const denyShards = 64

// DenyCacheStats reports how the deny cache (WithDenyCache) has served
// acquires.
type DenyCacheStats struct {
	// Served counts the refusals answered from memory, without the store.
	Served uint64
	// Remembered counts the refusals of the store whose buckets it
	// remembered.
	Remembered uint64
	// Entries is how many buckets it remembers now.
	Entries int
}

// denyCache remembers the state of buckets of refused requests, by
// namespace id and bucket key, each until maxAge after the refusal or
// until no amount within its limits' capacities would be refused, and at
// most size of them.
type denyCache struct {
	maxAge   int64 // milliseconds
	perShard int
	seed     maphash.Seed
	shards   [denyShards]denyShard
	mask     uint64 // the shards in use are the first mask+1
	// n is how many entries the shards hold, so that a cache holding none
	// costs an acquire no lookup.
	n atomic.Int64
	// forgets numbers the forgetting of entries (a refund, a reset): a
	// shard keeps the number of the last that touched it (see put).
	forgets    atomic.Uint64
	remembered atomic.Uint64
	// resetsSeen is the ChangeWatch's count of resets when this cache was
	// last cleared for them.
	resetsSeen atomic.Uint64
}

// denyShard is one lock's share of the deny cache, padded to whole cache
// lines.
type denyShard struct {
	denyShardState
	_ [128 - unsafe.Sizeof(denyShardState{})%128]byte
}

type denyShardState struct {
	// mu orders the writers of the shard; readers take no lock.
	mu sync.Mutex
	// m holds *denial entries by the hash of their key (uint64): a
	// sync.Map, since an entry is written once per refusal of the store
	// and read by every acquire that the flood sends, from any number of
	// goroutines. An entry holds its key, and one whose key differs is a
	// miss (64-bit hashes of two keys in use never meet in practice; if
	// they did, the two would take turns).
	m       sync.Map
	size    int   // entries in m, under mu
	sweepAt int64 // before it makeRoom does not sweep
	// forgot is the number (denyCache.forgets) of the last forgetting of
	// entries of this shard. A refusal read from the store is remembered
	// only if no forgetting touched its shard since before the store was
	// asked: what it read may predate the refund.
	forgot uint64
	// served counts the refusals served from memory whose first bucket
	// is in this shard: one counter per shard, so that floods of keys in
	// different shards do not write one cache line.
	served atomic.Uint64
}

// denial is what a refusal of the store showed of one bucket. It never
// changes once stored.
type denial struct {
	ns      string
	key     store.BucketKey
	at      int64 // the request's instant, Unix ms
	expires int64 // Unix ms: maxAge after at, or sooner if nothing is refused by then
	limits  []deniedLimit
}

// deniedLimit is one limit of a remembered bucket: its parameters and its
// state at the refusal's instant.
type deniedLimit struct {
	name   string
	params bucket.Params
	state  bucket.State
}

// newDenyCache returns a deny cache of entries living at most maxAge
// (positive), at most size (positive) of them.
func newDenyCache(maxAge time.Duration, size int) *denyCache {
	n := min(denyShards, 1<<(bits.Len(uint(size))-1))
	return &denyCache{maxAge: max(maxAge.Milliseconds(), 1), perShard: size / n, mask: uint64(n - 1), seed: maphash.MakeSeed()}
}

// hash is the hash of bucket k, whatever its namespace: a limiter works in
// one, and an entry of another namespace (or of a key of the same hash) is
// told apart by the key it holds.
func (c *denyCache) hash(k store.BucketKey) uint64 {
	return maphash.String(c.seed, k.Entity) ^ bits.RotateLeft64(maphash.String(c.seed, k.Resource), 32)
}

func (c *denyCache) shard(h uint64) *denyShardState {
	return &c.shards[h&c.mask%denyShards].denyShardState // no bounds check
}

// refusesFromMemory reports whether the deny cache refuses d's request,
// planned at d.req.Now; if it does, each limit's Observed (and Wait) is
// set as the store would have set them, had nothing but time passed since
// the remembered refusals. Otherwise it notes, for remember, how many
// forgettings there were before the store is asked. Acquires with an
// idempotency key or a reservation are never refused from memory: a
// refusal of theirs may be an earlier grant to replay, or a reservation
// already held.
func (l *Limiter) refusesFromMemory(d *leaseData) bool {
	c := l.deny
	d.denyNoted = false
	if c == nil || d.opts.IdempotencyKey != "" || d.opts.Reservation != "" {
		return false
	}
	if r := l.changes.resets.Load(); r != c.resetsSeen.Load() {
		// An Admin sharing the watch reset a bucket: forget them all
		// (resets are rare), before the count of forgettings is noted,
		// so that what a refusal read before the reset is not
		// remembered after it.
		c.resetsSeen.Store(r)
		c.clear()
	}
	bs := d.req.Buckets
	d.denyStamp, d.denyNoted = c.forgets.Load(), true
	if c.n.Load() == 0 || len(bs) > model.MaxCascadeDepth {
		return false
	}
	now := d.req.Now
	var found [model.MaxCascadeDepth]*denial
	var first *denyShardState
	refused := false
	for i := range bs {
		h := c.hash(bs[i].Key)
		s := c.shard(h)
		if i == 0 {
			first = s
		}
		v, _ := s.m.Load(h)
		e, _ := v.(*denial)
		if e == nil || e.expires <= now || e.ns != d.ns || e.key != bs[i].Key {
			return false // every bucket must be known, for the statuses
		}
		found[i] = e
		for j := range bs[i].Limits {
			lr := &bs[i].Limits[j]
			dl := e.find(lr.Name, lr.Params)
			if dl == nil {
				return false
			}
			refused = refused || lr.Check && dl.refuses(lr.Amount, e.at, now)
		}
	}
	if !refused {
		return false
	}
	for i := range bs {
		e := found[i]
		for j := range bs[i].Limits {
			lr := &bs[i].Limits[j]
			lr.Observed, lr.Wait = e.find(lr.Name, lr.Params).observed(e.at, now), 0
		}
	}
	first.served.Add(1)
	return true
}

// find returns the limit of e named name with parameters p, or nil.
func (e *denial) find(name string, p bucket.Params) *deniedLimit {
	for i := range e.limits {
		if dl := &e.limits[i]; dl.name == name && dl.params == p {
			return dl
		}
	}
	return nil
}

// refuses reports whether the limit, remembered at the instant at,
// certainly refuses amount at now (Unix ms). A limit that time does not
// refill (concurrency, reserved) never does: its tokens come back when any
// holder ends its lease, in any process, at any moment.
func (dl *deniedLimit) refuses(amount, at, now int64) bool {
	return dl.params.Refills() && dl.observed(at, now).Tokens < amount
}

// observed is what the store would report at now of the limit remembered
// at the instant at, had nothing but time passed: its state refilled (a
// concurrency or reserved limit's as it was).
func (dl *deniedLimit) observed(at, now int64) bucket.State {
	return refilled(dl.state, dl.params, at, now)
}

// refilled is s, observed at the instant from, refilled until the instant
// to, and fullAfter the milliseconds from at until s, observed then, is
// full: the two places the deny cache does bucket arithmetic, in instants
// (Unix ms), so that a calendar quota's windows count as its refill does.
func refilled(s bucket.State, p bucket.Params, from, to int64) bucket.State {
	return bucket.RefillBetween(s, p, from, to)
}

func fullAfter(s bucket.State, p bucket.Params, at int64) int64 {
	return bucket.RetryAt(s, p, p.Capacity, at)
}

// remember keeps what the store's refusal of d's request observed of its
// buckets, each unless entries of its shard were forgotten since
// refusesFromMemory looked.
func (l *Limiter) remember(d *leaseData) {
	c := l.deny
	if c == nil || !d.denyNoted {
		return
	}
	d.denyNoted = false
	now := d.req.Now
	// Every bucket is remembered until the same instant, so that the
	// request is known whole (statuses name every bucket): until maxAge
	// has passed, or the last of its limits that could refuse anything
	// is full again.
	useful, byRate := int64(0), false
	for i := range d.req.Buckets {
		b := &d.req.Buckets[i]
		if b.Estimated {
			// A split bucket's refusal is decided by the parts tried;
			// another may hold more: nothing it shows is a bound.
			return
		}
		for _, lr := range b.Limits {
			if lr.Wait > 0 {
				return // the backend predicts better than Observed: no bound either
			}
			byRate = byRate || lr.Check && lr.Params.Refills() && lr.Observed.Tokens < lr.Amount
			if lr.Params.Refills() {
				useful = max(useful, fullAfter(lr.Observed, lr.Params, now))
			}
		}
	}
	if !byRate || useful == 0 {
		// Refused by concurrency or reserved limits alone, which the
		// cache never refuses by: nothing to remember that would serve.
		return
	}
	expires := now + min(c.maxAge, useful)
	for i := range d.req.Buckets {
		b := &d.req.Buckets[i]
		e := &denial{ns: d.ns, key: b.Key, at: now, expires: expires, limits: make([]deniedLimit, len(b.Limits))}
		for j, lr := range b.Limits {
			e.limits[j] = deniedLimit{name: lr.Name, params: lr.Params, state: lr.Observed}
		}
		c.put(c.hash(b.Key), d.denyStamp, e, now)
	}
	c.remembered.Add(1)
}

// put stores e under hash h unless entries of its shard were forgotten
// after the stamp (the count of forgettings) was taken.
func (c *denyCache) put(h, stamp uint64, e *denial, now int64) {
	s := c.shard(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.forgot > stamp {
		return
	}
	if _, loaded := s.m.Swap(h, e); !loaded {
		s.size++
		c.n.Add(1)
		if s.size > c.perShard {
			c.makeRoom(s, h, now)
		}
	}
}

// makeRoom brings s, one entry over its bound, back within it: it drops
// the expired entries, unless it swept less than maxAge/16 ago, and if
// that freed none, one other than kept (the entry just put), the first
// that ranging over the map finds. The caller holds s.mu.
func (c *denyCache) makeRoom(s *denyShardState, kept uint64, now int64) {
	if now >= s.sweepAt {
		next := int64(math.MaxInt64)
		s.m.Range(func(k, v any) bool {
			if e := v.(*denial); e.expires <= now && k.(uint64) != kept {
				c.drop(s, k.(uint64))
			} else {
				next = min(next, e.expires)
			}
			return true
		})
		s.sweepAt = max(next, now+c.maxAge/16)
	}
	s.m.Range(func(k, _ any) bool {
		if s.size <= c.perShard {
			return false
		}
		if k.(uint64) != kept {
			c.drop(s, k.(uint64))
		}
		return true
	})
}

// drop forgets the entry of hash h of s. The caller holds s.mu.
func (c *denyCache) drop(s *denyShardState, h uint64) {
	if _, loaded := s.m.LoadAndDelete(h); loaded {
		s.size--
		c.n.Add(-1)
	}
}

// forget drops what the cache remembers of bucket k of namespace ns, after
// tokens were given back to it.
func (c *denyCache) forget(ns string, k store.BucketKey) {
	h := c.hash(k)
	s := c.shard(h)
	s.mu.Lock()
	s.forgot = c.forgets.Add(1)
	c.drop(s, h)
	s.mu.Unlock()
}

// clear drops every entry.
func (c *denyCache) clear() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		s.forgot = c.forgets.Add(1)
		c.n.Add(-int64(s.size))
		s.m.Clear()
		s.size, s.sweepAt = 0, 0
		s.mu.Unlock()
	}
}

func (c *denyCache) stats() DenyCacheStats {
	if c == nil {
		return DenyCacheStats{}
	}
	st := DenyCacheStats{Remembered: c.remembered.Load(), Entries: int(c.n.Load())}
	for i := range c.shards {
		st.Served += c.shards[i].served.Load()
	}
	return st
}

// refunded tells the deny cache that deltas were written (or may have
// been: after an error too): the buckets that any of them gives tokens
// back to are forgotten.
func (l *Limiter) refunded(ns string, deltas []store.Delta) {
	if l.deny == nil {
		return
	}
	for i := range deltas {
		if deltas[i].Amount < 0 {
			l.deny.forget(ns, deltas[i].Key)
		}
	}
}

// forgetDenials drops every remembered refusal (a change of limits seen).
func (l *Limiter) forgetDenials() {
	if l.deny != nil {
		l.deny.clear()
	}
}
