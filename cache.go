package tollgate

import (
	"context"
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

// DefaultCacheSize is how many limit resolutions and entities the config
// cache holds at most, unless WithCacheSize says otherwise.
const DefaultCacheSize = 100_000

// maxCacheShards is how many shards the config cache is split into (fewer
// when its size is smaller): each has its own lock, so that lookups of
// different keys do not queue on one.
const maxCacheShards = 64

// CacheStats reports how the limiter's config cache has served lookups.
type CacheStats struct {
	Hits    uint64
	Misses  uint64
	Entries int // cached limit resolutions and entities, including negative ones
}

// cache holds resolved limits per (entity, resource) and entities by id,
// including negative results, each for ttl. A change the limiter observes
// (observeChanges: an Admin's write, through its ChangeWatch or the store's
// change generation) clears it: writes are rare, and a config change at the
// resource or system level affects many resolutions.
//
// It holds at most size entries, in shards picked by the hash of the key,
// each bounded by its share of size. A shard that is full when a new key
// comes first drops its expired entries (at most once every ttl/16, see
// makeRoom), then, if still full, one entry picked at random. A hit takes
// its shard's read lock and writes nothing but the shard's counters.
type cache struct {
	ttl  time.Duration
	size int // the bound on entries, set before init
	seed maphash.Seed
	// The shards in use are the first mask+1, picked by the low bits of a
	// key's hash; init makes them.
	shards [maxCacheShards]cacheShard
	mask   uint64
	// epoch grows with every clear. A lookup that missed notes it before
	// reading the store, and its put is dropped if a clear came in
	// between: what it read may predate the change that cleared.
	epoch atomic.Uint64
	// memoHits counts the hits served by lease states' memos
	// (entityVia, resolutionVia), in the states' stripes.
	memoHits [counterStripes]paddedCount
}

// paddedCount is a counter on a cache line of its own.
type paddedCount struct {
	n atomic.Uint64
	_ [56]byte
}

// cacheShard is one lock's share of the cache, padded to whole cache lines
// so that shards next to each other do not share one.
type cacheShard struct {
	shardState
	_ [128 - unsafe.Sizeof(shardState{})%128]byte
}

type shardState struct {
	mu sync.RWMutex
	// limits holds resolutions by keyHash of their key; resolutions whose
	// keys share a hash are chained through resolution.next. Two string
	// hashes, which the processor overlaps, cost about half the lookup of
	// a map keyed by store.BucketKey, which hashes the struct field by
	// field.
	limits  map[uint64]*resolution
	nlimits int // resolutions in limits, chained ones included
	// entities holds entities by the hash of their id. Two ids of equal
	// hash (never seen: 64 bits) would take turns: each lookup checks the
	// id.
	entities map[uint64]*entityEntry
	max      int      // the bound on nlimits+len(entities)
	sweepAt  unixNano // before it makeRoom does not sweep
	// The counters sit beside the lock, whose cache line a hit writes
	// anyway (RLock).
	hits, misses atomic.Uint64
}

// resolution is the outcome of resolving one entity and resource: the limits
// in effect, or none (found == false).
type resolution struct {
	key store.BucketKey
	// next is another resolution whose key has the same hash. It changes
	// under the shard's lock held for writing, and is read under it held
	// for reading; the other fields never change once cached.
	next    *resolution
	expires unixNano
	found   bool
	scope   model.Scope
	limits  []prepared
}

// prepared is a validated limit with its bucket parameters precomputed,
// and whether its configuration enforces it in shadow.
type prepared struct {
	limit  model.Limit
	params bucket.Params
	shadow bool
	source source // the level that supplied it
	// alertAt are its configuration's alert thresholds (Config.AlertAt).
	alertAt [model.MaxAlertAt]float64
}

// source is a limit's Status.Source, as a small number: plan keeps one
// per limit of a request in a slice without pointers.
type source uint8

const (
	sourceUnknown source = iota
	sourceCall
	sourceSystem
	sourceResource
	sourceEntityDefault
	sourceEntity
)

var sourceNames = [...]string{sourceUnknown: "", sourceCall: model.SourceCall, sourceSystem: "system",
	sourceResource: "resource", sourceEntityDefault: "entity-default", sourceEntity: "entity"}

// sourceOf is the source of the limits stored at scope.
func sourceOf(scope model.Scope) source {
	switch scope.Level() {
	case "system":
		return sourceSystem
	case "resource":
		return sourceResource
	case "entity-default":
		return sourceEntityDefault
	}
	return sourceEntity
}

type entityEntry struct {
	expires unixNano
	found   bool
	entity  model.Entity
	// keys are the lease keys of the last lease of entity of a state of
	// each stripe (leaseData.keyOf), for that state's next leases of the
	// same resource to share.
	keys [counterStripes]atomic.Pointer[leaseKey]
}

// newCache returns a cache of entries that live for ttl, at most size
// (positive) of them, split into shards: as many as maxCacheShards, or
// the largest power of two that leaves each at least one entry.
func newCache(ttl time.Duration, size int) *cache {
	c := &cache{ttl: ttl, size: size, seed: maphash.MakeSeed()}
	n := min(maxCacheShards, 1<<(bits.Len(uint(c.size))-1))
	c.mask = uint64(n - 1)
	for i := range c.shards[:n] {
		s := &c.shards[i]
		s.limits, s.entities, s.max = make(map[uint64]*resolution), make(map[uint64]*entityEntry), c.size/n
	}
	return c
}

// prepare returns the limits of cfg, stored at scope, with their bucket
// parameters, their source, and those it enforces in shadow marked.
func prepare(cfg *model.Config, scope model.Scope) []prepared {
	out := prepareInto(make([]prepared, 0, len(cfg.Limits)), cfg.Limits)
	for i := range out {
		out[i].shadow = cfg.InShadow(out[i].limit.Name)
		out[i].source = sourceOf(scope)
		out[i].alertAt = alertThresholds(cfg)
	}
	return out
}

// prepareInto appends limits with their bucket parameters to dst.
func prepareInto(dst []prepared, limits []model.Limit) []prepared {
	for _, l := range limits {
		dst = append(dst, prepared{limit: l, params: paramsOf(l)})
	}
	return dst
}

// paramsOf converts a valid limit to the bucket arithmetic's units
// (millitokens and milliseconds), which its validation keeps in range. A
// calendar quota's period is one window.
func paramsOf(l model.Limit) bucket.Params {
	if !l.Window.IsZero() {
		a := l.RefillAmount * bucket.MilliPerToken
		return bucket.Params{Capacity: l.Capacity * bucket.MilliPerToken, Amount: a, Period: 1, Window: l.Window}
	}
	return bucket.Params{
		Capacity: l.Capacity * bucket.MilliPerToken,
		Amount:   l.RefillAmount * bucket.MilliPerToken,
		Period:   l.RefillPeriod.Milliseconds(),
	}
}

// shard returns the shard of a key whose hash is h.
func (c *cache) shard(h uint64) *shardState {
	return &c.shards[h&c.mask%maxCacheShards].shardState // no bounds check
}

func (c *cache) resolution(k store.BucketKey, now unixNano) *resolution {
	return c.resolutionVia(k, now, nil, nil)
}

// resolutionMemo is entityMemo for a resolution.
type resolutionMemo struct {
	r     *resolution
	epoch uint64
}

// fresh returns the resolution m remembers if it is still k's, cached in
// the cache's epoch and not expired at now; nil otherwise.
func (m *resolutionMemo) fresh(epoch uint64, now unixNano, k store.BucketKey) *resolution {
	if r := m.r; r != nil && m.epoch == epoch && r.expires > now && r.key == k {
		return r
	}
	return nil
}

// resolutionVia is resolution through m (nil: none), as entityVia is
// entity.
//
// A hit through m is not counted here but added to *pending (non-nil
// with m), which the caller counts (leaseData.memoHits).
func (c *cache) resolutionVia(k store.BucketKey, now unixNano, m *resolutionMemo, pending *uint64) *resolution {
	if c.ttl == 0 {
		return nil
	}
	epoch := c.epoch.Load() // before the lookup: see entityVia
	if m != nil {
		if r := m.fresh(epoch, now, k); r != nil {
			*pending++
			return r
		}
	}
	h := c.keyHash(k)
	s := c.shard(h)
	s.mu.RLock()
	r := s.findResolution(h, k)
	s.mu.RUnlock()
	if r == nil || r.expires <= now {
		s.misses.Add(1)
		return nil
	}
	s.hits.Add(1)
	if m != nil {
		setIfChanged(&m.r, r)
		m.epoch = epoch
	}
	return r
}

// putResolution caches r for k, unless the cache was cleared since epoch
// (the caller's c.epoch.Load() before it read r from the store).
func (c *cache) putResolution(k store.BucketKey, r *resolution, now unixNano, epoch uint64) {
	if c.ttl == 0 {
		return
	}
	r.key, r.expires = k, now.add(c.ttl)
	h := c.keyHash(k)
	s := c.shard(h)
	s.mu.Lock()
	if c.epoch.Load() != epoch {
		s.mu.Unlock()
		return
	}
	if s.full() && s.findResolution(h, k) == nil {
		c.makeRoom(s, now, true)
	}
	s.linkResolution(h, r)
	s.mu.Unlock()
}

// keyHash is the hash under which the resolution of k is cached.
func (c *cache) keyHash(k store.BucketKey) uint64 {
	return maphash.String(c.seed, k.Entity) ^ bits.RotateLeft64(maphash.String(c.seed, k.Resource), 32)
}

func (c *cache) entity(id string, now unixNano) *entityEntry { return c.entityVia(id, now, nil, nil) }

// entityMemo remembers the cache entry of an entity that a recycled lease
// state last found (e), the cache's epoch before that lookup, and the
// stripe of memoHits that counts its hits. While the epoch is the same, nothing
// cleared the cache since (a change the limiter observed clears it), so
// the entry is still what the cache would answer, or an equally valid
// one, until it expires: looking it up again, which takes the shard's
// read lock (two atomic writes to a line every core shares), can be
// skipped. The entry may have been evicted meanwhile (the cache is full):
// it is still valid for its TTL, as a hit on it would have been.
type entityMemo struct {
	e     *entityEntry
	epoch uint64
}

// entityVia is entity, through m (nil: none), which it reads first and
// fills on a hit in the cache. A hit through m counts as any hit, in
// memoHits' stripe.
func (c *cache) entityVia(id string, now unixNano, m *entityMemo, pending *uint64) *entityEntry {
	if c.ttl == 0 {
		return nil
	}
	// The epoch is read before the lookup: a clear racing with it
	// leaves the memo stale at once.
	epoch := c.epoch.Load()
	if m != nil {
		if e := m.e; e != nil && m.epoch == epoch && e.expires > now && e.entity.ID == id {
			*pending++ // counted by the caller, see resolutionVia
			return e
		}
	}
	h := maphash.String(c.seed, id)
	s := c.shard(h)
	s.mu.RLock()
	e := s.entities[h]
	s.mu.RUnlock()
	if e == nil || e.expires <= now || e.entity.ID != id {
		s.misses.Add(1)
		return nil
	}
	s.hits.Add(1)
	if m != nil {
		setIfChanged(&m.e, e)
		m.epoch = epoch
	}
	return e
}

// putEntity caches e, unless the cache was cleared since epoch (see
// putResolution).
func (c *cache) putEntity(e *entityEntry, now unixNano, epoch uint64) {
	if c.ttl == 0 {
		return
	}
	e.expires = now.add(c.ttl)
	h := maphash.String(c.seed, e.entity.ID)
	s := c.shard(h)
	s.mu.Lock()
	if c.epoch.Load() != epoch {
		s.mu.Unlock()
		return
	}
	if s.full() && s.entities[h] == nil {
		c.makeRoom(s, now, false)
	}
	s.entities[h] = e
	s.mu.Unlock()
}

// makeRoom frees one entry or more in s, which is full, for a new one (a
// resolution if forLimits): it drops the expired entries, unless it swept
// s less than ttl/16 ago, and if that freed none, one entry at random, of
// the new entry's kind when s holds any. The caller holds s.mu for writing.
//
// A sweep reads the whole shard, so it happens only once something may
// have expired (the earliest expiry it saw last time) and at most 16 times
// per TTL: a shard that is always full, whose entries expire one by one,
// would otherwise be swept for each insert.
func (c *cache) makeRoom(s *shardState, now unixNano, forLimits bool) {
	if now >= s.sweepAt {
		s.sweepAt = max(s.sweep(now), now.add(c.ttl/16))
		if !s.full() {
			return
		}
	}
	if forLimits && s.nlimits > 0 || len(s.entities) == 0 {
		s.evictResolution()
	} else {
		s.evictEntity()
	}
}

func (s *shardState) full() bool { return s.nlimits+len(s.entities) >= s.max }

// sweep drops the entries of s that expired by now and returns the earliest
// expiry of those it keeps (math.MaxInt64 if none). The caller holds s.mu
// for writing.
func (s *shardState) sweep(now unixNano) (next unixNano) {
	next = math.MaxInt64
	for h, head := range s.limits {
		var kept *resolution
		for r := head; r != nil; {
			after := r.next
			if r.expires > now {
				r.next, kept = kept, r
				next = min(next, r.expires)
			} else {
				s.nlimits--
			}
			r = after
		}
		if kept == nil {
			delete(s.limits, h)
		} else {
			s.limits[h] = kept
		}
	}
	for h, e := range s.entities {
		if e.expires <= now {
			delete(s.entities, h)
		} else {
			next = min(next, e.expires)
		}
	}
	return next
}

// evictResolution drops one resolution, the first that ranging over the
// map finds (its start is random). The caller holds s.mu for writing.
func (s *shardState) evictResolution() {
	for h, r := range s.limits {
		if r.next == nil {
			delete(s.limits, h)
		} else {
			s.limits[h] = r.next
		}
		s.nlimits--
		return
	}
}

// evictEntity drops one entity, the first that ranging over the map finds.
// The caller holds s.mu for writing.
func (s *shardState) evictEntity() {
	for h := range s.entities {
		delete(s.entities, h)
		return
	}
}

// findResolution returns the cached resolution of k, whose hash is h, or
// nil. The caller holds s.mu.
func (s *shardState) findResolution(h uint64, k store.BucketKey) *resolution {
	r := s.limits[h]
	for r != nil && r.key != k {
		r = r.next
	}
	return r
}

// linkResolution caches r, whose key hashes to h, in place of the
// resolution of its key cached before, if any. The caller holds s.mu for
// writing.
func (s *shardState) linkResolution(h uint64, r *resolution) {
	head, replaced := s.limits[h], false
	if head != nil && head.key == r.key {
		head, replaced = head.next, true
	} else {
		for p := head; p != nil && p.next != nil; p = p.next {
			if p.next.key == r.key {
				p.next, replaced = p.next.next, true
				break
			}
		}
	}
	if !replaced {
		s.nlimits++
	}
	r.next = head
	s.limits[h] = r
}

// clear drops every entry. The epoch grows first, so that a put racing
// with it is dropped either by its epoch check or by the clearing of its
// shard, which it holds the lock of.
func (c *cache) clear() {
	c.epoch.Add(1)
	for i := range c.mask + 1 {
		s := &c.shards[i]
		s.mu.Lock()
		clear(s.limits)
		s.nlimits = 0
		clear(s.entities)
		s.sweepAt = 0
		s.mu.Unlock()
	}
}

func (c *cache) stats() CacheStats {
	var st CacheStats
	for i := range c.mask + 1 {
		s := &c.shards[i]
		s.mu.RLock()
		st.Entries += s.nlimits + len(s.entities)
		s.mu.RUnlock()
		st.Hits += s.hits.Load()
		st.Misses += s.misses.Load()
	}
	for i := range c.memoHits {
		st.Hits += c.memoHits[i].n.Load()
	}
	return st // plus the grants' (decisionCounts.memoHits)
}

// invalidate drops every cached limit resolution and entity, and the
// resolved namespace, so the next calls read the store.
func (l *Limiter) invalidate() {
	l.forgetConfig()
	l.nsCache.Store(nil)
}

// forgetConfig drops what the limiter knows of the stored configuration and
// entities, when observeChanges sees the generation move: the cached
// resolutions and entities, and the freshness of the unavailable mode.
//
// The generation is noted first, so that the clear covers every change up
// to it and observeChanges does not clear again for those; a change made
// in between is newer than the generation noted, and clears again when
// observed.
func (l *Limiter) forgetConfig() {
	g := l.changes.known(context.Background())
	l.cache.clear()
	l.forgetDenials()
	l.fail.expire()
	l.seenGen.Store(g)
}

// cacheStats is the config cache's counters, with the hits that grants
// counted (decisionCounts.memoHits).
func (l *Limiter) cacheStats() CacheStats {
	st := l.cache.stats()
	st.Hits += l.decisions.memoHits()
	return st
}
