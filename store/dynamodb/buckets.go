package dynamodb

import (
	"context"

	"github.com/tollgate-rl/tollgate/store"
)

// bucketEngine is what the Store asks of its write engine (engine.go):
// the bucket half of the store contract (store.Buckets), the one lease
// operation that writes buckets (EndLease gives back what a lease holds),
// the split of a hot bucket and its test (Split, SplitDue: the stream's
// upkeep calls them through the Store), and forget, for the control
// plane's deletes. Every write of a bucket item goes through it.
type bucketEngine interface {
	store.Buckets
	EndLease(ctx context.Context, ns string, e store.LeaseEnding) error
	Split(ctx context.Context, ns string, key store.BucketKey, shards int, at int64) bool
	SplitDue(img Image, writesPerSecond float64) bool
	// forget drops what the engine knows of the bucket items for which
	// match is true (a deleted entity's, a purged namespace's).
	forget(match func(ns string, k store.BucketKey) bool)
}

// Consume implements store.Buckets (docs/dynamodb.md 4).
func (s *Store) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	return s.engine.Consume(ctx, ns, req)
}

// ApplyDeltas implements store.Buckets: one unconditional-ADD UpdateItem
// per bucket item (docs/dynamodb.md 4.7).
func (s *Store) ApplyDeltas(ctx context.Context, ns string, deltas []store.Delta) error {
	return s.engine.ApplyDeltas(ctx, ns, deltas)
}

// ReadBuckets implements store.Buckets: consistent reads of every shard.
func (s *Store) ReadBuckets(ctx context.Context, ns string, keys []store.BucketKey) ([]*store.Record, error) {
	return s.engine.ReadBuckets(ctx, ns, keys)
}

// Penalize implements store.Buckets (docs/dynamodb.md 4.14).
func (s *Store) Penalize(ctx context.Context, ns string, req *store.PenaltyRequest) error {
	return s.engine.Penalize(ctx, ns, req)
}

// Reset implements store.Buckets (docs/dynamodb.md 4.14).
func (s *Store) Reset(ctx context.Context, ns string, req *store.ResetRequest) error {
	return s.engine.Reset(ctx, ns, req)
}

// Split doubles the shards of bucket key of namespace ns, which has shards
// shards now, as a writer does when it finds the bucket's write pressure
// too high; at (Unix ms) dates the split. The stream's upkeep (package
// stream) calls it to split a bucket ahead of its writers, once SplitDue
// says so. It reports whether it split: a split that loses a race to
// another write or another split does nothing, and so does one beyond
// WithMaxShards or of a bucket with a concurrency limit.
func (s *Store) Split(ctx context.Context, ns string, key store.BucketKey, shards int, at int64) bool {
	return s.engine.Split(ctx, ns, key, shards, at)
}

// SplitDue reports whether the bucket item img shows (a stream record's
// image of a bucket's shard 0), taking writesPerSecond writes a second,
// should be split ahead of its writers: its shards can still double within
// WithMaxShards, and the pace is at 80% or more of its write-pressure
// limit (the meter its writers set, with WithWritePressureLimit). An
// image that is not a complete bucket item never is.
func (s *Store) SplitDue(img Image, writesPerSecond float64) bool {
	return s.engine.SplitDue(img, writesPerSecond)
}
