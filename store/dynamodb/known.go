package dynamodb

import (
	"sync"
	"sync/atomic"
)

// DefaultKnownBuckets is how many buckets a Store remembers by default
// (see WithKnownBuckets).
const DefaultKnownBuckets = 200_000

// WithKnownBuckets bounds how many buckets the Store remembers as existing,
// with their shard counts (default DefaultKnownBuckets). Acquires on a
// remembered bucket go out as one speculative write; when the set is full
// it starts afresh, and each forgotten bucket's next acquire takes the read
// path once (1 read + 1 write). Each entry costs about 200 bytes. n must be
// at least 1.
func WithKnownBuckets(n int) Option {
	return func(s *Store) {
		if n < 1 {
			s.invalid("WithKnownBuckets", n, "must be at least 1")
			return
		}
		s.known.limit = int64(n)
	}
}

// knownBuckets is the set of buckets known to exist: bucketID -> shard
// count. Entries are never wrong for long: a write planned against a
// deleted bucket or another shard count fails and plans again.
type knownBuckets struct {
	m     sync.Map // bucketID -> int
	n     atomic.Int64
	limit int64
}

func (k *knownBuckets) load(id bucketID) (shards int, ok bool) {
	v, ok := k.m.Load(id)
	if !ok {
		return 0, false
	}
	return v.(int), true
}

func (k *knownBuckets) store(id bucketID, shards int) {
	if _, loaded := k.m.Swap(id, shards); !loaded && k.n.Add(1) > k.limit {
		// Starting afresh is cheaper than tracking recency on the hot
		// path; a concurrent store may survive it, which only keeps a
		// little more than the limit.
		k.m.Clear()
		k.n.Store(0)
	}
}

func (k *knownBuckets) forget(id bucketID) {
	if _, loaded := k.m.LoadAndDelete(id); loaded {
		k.n.Add(-1)
	}
}

// forgetIf forgets every bucket for which match is true.
func (k *knownBuckets) forgetIf(match func(bucketID) bool) {
	k.m.Range(func(key, _ any) bool {
		if id := key.(bucketID); match(id) {
			k.forget(id)
		}
		return true
	})
}
