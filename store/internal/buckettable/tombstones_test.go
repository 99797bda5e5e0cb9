package buckettable

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/tollgate-rl/tollgate/store"
)

// Tombstones go once their KeepUntil has passed, in any order of
// KeepUntil, and not before; a tombstone replaced since (a record of the
// id created again) is not deleted in its place.
func TestTombstonesAreSweptPastKeepUntil(t *testing.T) {
	tab := New(Options{})
	keep := map[string]int64{}
	for i := range 500 {
		id := "lease-" + strconv.Itoa(i)
		k := int64(1000 + rand.IntN(10_000))
		keep[id] = k
		tab.leases.mu.Lock()
		tab.setLease(leaseKey{"ns", id}, &store.LeaseRecord{ID: id, Version: 2, EndedAt: 1, KeepUntil: k})
		tab.leases.mu.Unlock()
	}
	// A tombstone whose id was taken again by an open record.
	tab.leases.mu.Lock()
	tab.setLease(leaseKey{"ns", "lease-0"}, &store.LeaseRecord{ID: "lease-0", Version: 1})
	tab.leases.mu.Unlock()
	for _, now := range []int64{999, 3000, 6000, 11_000} {
		tab.leases.mu.Lock()
		tab.sweepEnded(now)
		tab.leases.mu.Unlock()
		for id, k := range keep {
			_, ok := tab.GetLease("ns", id)
			switch {
			case id == "lease-0":
				if !ok {
					t.Fatalf("at %d: the open record of lease-0 was swept with the tombstone it replaced", now)
				}
			case ok != (k > now):
				t.Fatalf("at %d: %s (KeepUntil %d) present = %v", now, id, k, ok)
			}
		}
	}
}
