package tollgate

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// CacheStats reports how the limiter's config cache has served lookups.
type CacheStats struct {
	Hits    uint64
	Misses  uint64
	Entries int // cached limit resolutions and entities, including negative ones
}

// cache holds resolved limits per (entity, resource) and entities by id,
// including negative results, each for ttl. A write made through the limiter
// clears it: writes are rare, and a config change at the resource or system
// level affects many resolutions.
type cache struct {
	ttl          time.Duration
	hits, misses atomic.Uint64

	// modeExpires is when the stored unavailable mode should be read again
	// (Unix nanoseconds).
	modeExpires atomic.Int64

	mu sync.RWMutex
	// limits holds resolutions by keyHash of their key; resolutions whose
	// keys share a hash are chained through resolution.next. Two string
	// hashes, which the processor overlaps, cost about half the lookup of
	// a map keyed by store.BucketKey, which hashes the struct field by
	// field.
	limits   map[uint64]*resolution
	nlimits  int // resolutions in limits, chained ones included
	seed     maphash.Seed
	entities map[string]*entityEntry
}

// resolution is the outcome of resolving one entity and resource: the limits
// in effect, or none (found == false).
type resolution struct {
	key store.BucketKey
	// next is another resolution whose key has the same hash. It changes
	// under cache.mu held for writing, and is read under it held for
	// reading; the other fields never change once cached.
	next    *resolution
	expires int64 // Unix nanoseconds
	found   bool
	scope   model.Scope
	limits  []prepared
}

// prepared is a validated limit with its bucket parameters precomputed.
type prepared struct {
	limit  model.Limit
	params bucket.Params
}

type entityEntry struct {
	expires int64
	found   bool
	entity  model.Entity
}

func newCache(ttl time.Duration) *cache {
	return &cache{ttl: ttl, limits: make(map[uint64]*resolution), seed: maphash.MakeSeed(), entities: make(map[string]*entityEntry)}
}

func prepare(limits []model.Limit) []prepared {
	out := make([]prepared, len(limits))
	for i, l := range limits {
		out[i] = prepared{limit: l, params: l.Params()}
	}
	return out
}

func (c *cache) resolution(k store.BucketKey, now int64) *resolution {
	if c.ttl == 0 {
		return nil
	}
	h := c.keyHash(k)
	c.mu.RLock()
	r := c.findResolution(h, k)
	c.mu.RUnlock()
	if r == nil || r.expires <= now {
		c.misses.Add(1)
		return nil
	}
	c.hits.Add(1)
	return r
}

func (c *cache) putResolution(k store.BucketKey, r *resolution, now int64) {
	if c.ttl == 0 {
		return
	}
	r.key, r.expires = k, now+int64(c.ttl)
	h := c.keyHash(k)
	c.mu.Lock()
	c.linkResolution(h, r)
	c.mu.Unlock()
}

// findResolution returns the cached resolution of k, whose hash is h, or
// nil. The caller holds c.mu.
func (c *cache) findResolution(h uint64, k store.BucketKey) *resolution {
	r := c.limits[h]
	for r != nil && r.key != k {
		r = r.next
	}
	return r
}

// linkResolution caches r, whose key hashes to h, in place of the
// resolution of its key cached before, if any. The caller holds c.mu for
// writing.
func (c *cache) linkResolution(h uint64, r *resolution) {
	head, replaced := c.limits[h], false
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
		c.nlimits++
	}
	r.next = head
	c.limits[h] = r
}

// keyHash is the hash under which the resolution of k is cached.
func (c *cache) keyHash(k store.BucketKey) uint64 {
	return maphash.String(c.seed, k.Entity) ^ bits.RotateLeft64(maphash.String(c.seed, k.Resource), 32)
}

func (c *cache) entity(id string, now int64) *entityEntry {
	if c.ttl == 0 {
		return nil
	}
	c.mu.RLock()
	e := c.entities[id]
	c.mu.RUnlock()
	if e == nil || e.expires <= now {
		c.misses.Add(1)
		return nil
	}
	c.hits.Add(1)
	return e
}

func (c *cache) putEntity(e *entityEntry, now int64) {
	if c.ttl == 0 {
		return
	}
	e.expires = now + int64(c.ttl)
	c.mu.Lock()
	c.entities[e.entity.ID] = e
	c.mu.Unlock()
}

func (c *cache) clear() {
	c.mu.Lock()
	clear(c.limits)
	c.nlimits = 0
	clear(c.entities)
	c.mu.Unlock()
	c.modeExpires.Store(0)
}

func (c *cache) modeStale(now int64) bool { return c.ttl == 0 || c.modeExpires.Load() <= now }

func (c *cache) modeRead(now int64) { c.modeExpires.Store(now + int64(c.ttl)) }

func (c *cache) stats() CacheStats {
	c.mu.RLock()
	n := c.nlimits + len(c.entities)
	c.mu.RUnlock()
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Entries: n}
}

// CacheStats returns the config cache's counters.
func (l *Limiter) CacheStats() CacheStats { return l.cache.stats() }

// InvalidateCache drops every cached limit resolution and entity, and the
// resolved namespace, so the next calls read the store.
func (l *Limiter) InvalidateCache() {
	l.cache.clear()
	l.nsCache.Store(nil)
}
