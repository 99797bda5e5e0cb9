package memory

import (
	"context"

	"github.com/tollgate-rl/tollgate/store"
)

var _ store.BucketLister = (*Store)(nil)

// ListBuckets implements store.BucketLister by scanning every shard.
func (s *Store) ListBuckets(ctx context.Context, ns, resource, after string, limit int) ([]store.ListedBucket, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.ValidateBucketPage(resource, limit); err != nil {
		return nil, err
	}
	var out []store.ListedBucket
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for id, rec := range sh.buckets {
			if id.ns == ns && id.resource == resource && id.entity > after {
				out = append(out, store.ListedBucket{Entity: id.entity, Record: rec.Clone()})
			}
		}
		sh.mu.Unlock()
	}
	return store.FirstBuckets(out, limit), nil
}
