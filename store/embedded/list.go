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
	return s.buckets.List(ns, resource, after, limit), nil
}
