package memory

import (
	"context"

	"github.com/tollgate-rl/tollgate/store"
)

var _ store.BucketLister = (*Store)(nil)

// ListBuckets implements store.BucketLister by scanning every shard of the
// bucket table.
func (s *Store) ListBuckets(ctx context.Context, ns, resource, after string, limit int) ([]store.ListedBucket, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.ValidateBucketPage(resource, limit); err != nil {
		return nil, err
	}
	return s.buckets.List(ns, resource, after, limit), nil
}
