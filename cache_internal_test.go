package tollgate

import (
	"testing"

	"github.com/tollgate-rl/tollgate/store"
)

// Resolutions whose keys share a hash are chained: each is found by its
// own key, caching one again replaces it wherever it sits in the chain,
// and the entry count follows. (maphash collisions cannot be provoked, so
// the chain is driven with a chosen hash.)
func TestCachedResolutionsChainEqualHashes(t *testing.T) {
	const h = 7
	keys := []store.BucketKey{{Entity: "a", Resource: "api"}, {Entity: "b", Resource: "api"}, {Entity: "a", Resource: "web"}}
	for replace := range keys {
		c := newCache(DefaultCacheTTL, DefaultCacheSize)
		s := c.shard(h)
		byKey := map[store.BucketKey]*resolution{}
		for _, k := range keys {
			r := &resolution{key: k}
			s.linkResolution(h, r)
			byKey[k] = r
		}
		again := &resolution{key: keys[replace], found: true}
		s.linkResolution(h, again)
		byKey[keys[replace]] = again
		if s.nlimits != len(keys) || len(s.limits) != 1 {
			t.Fatalf("replace %d: %d resolutions under %d hashes, want %d under 1", replace, s.nlimits, len(s.limits), len(keys))
		}
		for _, k := range keys {
			if got := s.findResolution(h, k); got != byKey[k] {
				t.Errorf("replace %d: findResolution(%v) = %p, want %p", replace, k, got, byKey[k])
			}
		}
		if s.findResolution(h, store.BucketKey{Entity: "c", Resource: "api"}) != nil || s.findResolution(h+1, keys[0]) != nil {
			t.Errorf("replace %d: found a resolution never cached", replace)
		}
		if st := c.stats(); st.Entries != len(keys) {
			t.Errorf("replace %d: stats count %d entries, want %d", replace, st.Entries, len(keys))
		}
		c.clear()
		if st := c.stats(); st.Entries != 0 || s.findResolution(h, keys[0]) != nil {
			t.Errorf("replace %d: after clear, %d entries", replace, st.Entries)
		}
	}
}

// A full shard first drops every expired entry, chained resolutions and
// entities alike, keeping the live ones; if none has expired, or it swept
// less than ttl/16 ago, it drops one entry of the kind coming in.
func TestCacheMakeRoomSweepsThenEvicts(t *testing.T) {
	c := newCache(DefaultCacheTTL, 1)
	s := c.shard(0)
	s.max = 4
	const h, now = 7, unixNano(1000)
	s.linkResolution(h, &resolution{key: store.BucketKey{Entity: "a"}, expires: now})
	s.linkResolution(h, &resolution{key: store.BucketKey{Entity: "b"}, expires: now + 1})
	s.linkResolution(h+1, &resolution{key: store.BucketKey{Entity: "c"}, expires: now - 1})
	s.entities[9] = &entityEntry{expires: now + 2}
	if !s.full() {
		t.Fatal("4 entries in a shard of 4: not full")
	}
	c.makeRoom(s, now, true)
	if s.nlimits != 1 || len(s.limits) != 1 || s.findResolution(h, store.BucketKey{Entity: "b"}) == nil || s.entities[9] == nil {
		t.Fatalf("after the sweep: %d resolutions under %d hashes, entity d %v; want b and d alone", s.nlimits, len(s.limits), s.entities[9])
	}
	if want := now.add(c.ttl / 16); s.sweepAt != want {
		t.Errorf("sweepAt = %d, want %d (not before ttl/16)", s.sweepAt, want)
	}
	s.max = 2 // full again; nothing expired and the sweep is not due
	c.makeRoom(s, now+1, false)
	if s.nlimits != 1 || len(s.entities) != 0 {
		t.Errorf("evicting for an entity: %d resolutions and %d entities left, want 1 and 0", s.nlimits, len(s.entities))
	}
	c.makeRoom(s, now+1, false) // no entity left: a resolution goes
	if s.nlimits != 0 || len(s.limits) != 0 {
		t.Errorf("evicting with no entity left: %d resolutions left, want 0", s.nlimits)
	}
}
