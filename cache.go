package tollgate

import (
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

	mu       sync.RWMutex
	limits   map[store.BucketKey]*resolution
	entities map[string]*entityEntry
}

// resolution is the outcome of resolving one entity and resource: the limits
// in effect, or none (found == false).
type resolution struct {
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
	return &cache{ttl: ttl, limits: make(map[store.BucketKey]*resolution), entities: make(map[string]*entityEntry)}
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
	c.mu.RLock()
	r := c.limits[k]
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
	r.expires = now + int64(c.ttl)
	c.mu.Lock()
	c.limits[k] = r
	c.mu.Unlock()
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
	clear(c.entities)
	c.mu.Unlock()
	c.modeExpires.Store(0)
}

func (c *cache) modeStale(now int64) bool { return c.ttl == 0 || c.modeExpires.Load() <= now }

func (c *cache) modeRead(now int64) { c.modeExpires.Store(now + int64(c.ttl)) }

func (c *cache) stats() CacheStats {
	c.mu.RLock()
	n := len(c.limits) + len(c.entities)
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
