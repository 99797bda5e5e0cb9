package embedded

import (
	"context"

	"github.com/tollgate-rl/tollgate/store"
)

var _ store.BucketLister = (*Store)(nil)

// ListBuckets implements store.BucketLister from the buckets in memory
// (the file holds the same, as of the last flush).
func (s *Store) ListBuckets(ctx context.Context, ns, resource, after string, limit int) ([]store.ListedBucket, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if err := store.ValidateBucketPage(resource, limit); err != nil {
		return nil, err
	}
	var out []store.ListedBucket
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for id, e := range sh.buckets {
			if id.ns == ns && id.resource == resource && id.entity > after {
				out = append(out, store.ListedBucket{Entity: id.entity, Record: e.rec.Clone()})
			}
		}
		sh.mu.Unlock()
	}
	return store.FirstBuckets(out, limit), nil
}
