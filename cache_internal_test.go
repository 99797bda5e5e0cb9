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
		c := newCache(DefaultCacheTTL)
		byKey := map[store.BucketKey]*resolution{}
		for _, k := range keys {
			r := &resolution{key: k}
			c.linkResolution(h, r)
			byKey[k] = r
		}
		again := &resolution{key: keys[replace], found: true}
		c.linkResolution(h, again)
		byKey[keys[replace]] = again
		if c.nlimits != len(keys) || len(c.limits) != 1 {
			t.Fatalf("replace %d: %d resolutions under %d hashes, want %d under 1", replace, c.nlimits, len(c.limits), len(keys))
		}
		for _, k := range keys {
			if got := c.findResolution(h, k); got != byKey[k] {
				t.Errorf("replace %d: findResolution(%v) = %p, want %p", replace, k, got, byKey[k])
			}
		}
		if c.findResolution(h, store.BucketKey{Entity: "c", Resource: "api"}) != nil || c.findResolution(h+1, keys[0]) != nil {
			t.Errorf("replace %d: found a resolution never cached", replace)
		}
		if st := c.stats(); st.Entries != len(keys) {
			t.Errorf("replace %d: stats count %d entries, want %d", replace, st.Entries, len(keys))
		}
		c.clear()
		if st := c.stats(); st.Entries != 0 || c.findResolution(h, keys[0]) != nil {
			t.Errorf("replace %d: after clear, %d entries", replace, st.Entries)
		}
	}
}
