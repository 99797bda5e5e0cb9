package dynamodb

import (
	"strconv"
	"testing"

	"github.com/tollgate-rl/tollgate/store"
)

// The set of known buckets stays within its bound, and forgetting keeps its
// count exact.
func TestKnownBucketsBounded(t *testing.T) {
	k := knownBuckets{limit: 100}
	id := func(i int) bucketID {
		return bucketID{"ns", store.BucketKey{Entity: "e" + strconv.Itoa(i), Resource: "api"}}
	}
	for i := range 100 {
		k.store(id(i), 1)
		k.store(id(i), 2) // an update is not a new entry
	}
	if n, ok := k.load(id(7)); !ok || n != 2 {
		t.Fatalf("load: %d %v, want 2 true", n, ok)
	}
	k.forget(id(0))
	k.forget(id(0))
	k.forgetIf(func(b bucketID) bool { return b.k.Entity == "e1" })
	if got := k.n.Load(); got != 98 {
		t.Fatalf("count %d after forgetting 2 of 100, want 98", got)
	}
	k.store(id(0), 1)
	k.store(id(1), 1)
	k.store(id(100), 1) // the 101st entry: start afresh
	if got := k.n.Load(); got != 0 {
		t.Errorf("count %d after passing the limit, want 0", got)
	}
	if _, ok := k.load(id(50)); ok {
		t.Error("an entry survived starting afresh")
	}
	count := 0
	k.m.Range(func(any, any) bool { count++; return true })
	if count != 0 {
		t.Errorf("%d entries left", count)
	}
}
