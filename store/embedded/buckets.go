package embedded

import (
	"context"
	"errors"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/internal/buckettable"
)

// Bucket state lives in memory, in the memory backend's table (package
// buckettable): 256 shards, each with its own lock, so acquires on
// different keys run in parallel, and a cascade locks its shards in index
// order (atomic and deadlock-free). The memory copy is authoritative while
// the store is open (Open loads every record); the file catches up at each
// flush. The table tracks changes for it (buckettable.Options.Track): each
// shard lists the buckets changed since the last flush and those
// forgotten, so a flush costs what changed, not what exists, and a flush
// snapshot (buckettable.Table.Drain) is a consistent cut, never half a
// cascade.

// checkRequest rejects ids the file cannot hold before anything changes in
// memory: a record a flush cannot write would block every later flush.
func checkRequest(ns string, req *store.ConsumeRequest) error {
	if err := checkNS(ns); err != nil {
		return err
	}
	for i := range req.Buckets {
		k := req.Buckets[i].Key
		if err := checkPair("bucket", k.Entity, k.Resource); err != nil {
			return err
		}
	}
	return nil
}

// Consume implements store.Buckets.
func (s *Store) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := checkRequest(ns, req); err != nil {
		return false, err
	}
	if req.Lease != nil {
		if err := checkLease(ns, req.Lease.ID); err != nil {
			return false, err
		}
	}
	if req.Event != nil {
		return s.consumeAudited(ns, req)
	}
	ok, err := s.buckets.Consume(ns, req)
	if err != nil {
		return false, tableErr(err)
	}
	return ok, nil
}

// ApplyDeltas implements store.Buckets.
func (s *Store) ApplyDeltas(ctx context.Context, ns string, deltas []store.Delta) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return tableErr(s.buckets.ApplyDeltas(ns, deltas))
}

// Penalize implements store.Buckets.
func (s *Store) Penalize(ctx context.Context, ns string, req *store.PenaltyRequest) error {
	return s.withEvent(ctx, ns, req.Bucket.Key, req.Event, func() error { return s.buckets.Penalize(ns, req) })
}

// Reset implements store.Buckets, as Penalize: a missing bucket is created
// full, which is how it would read anyway.
func (s *Store) Reset(ctx context.Context, ns string, req *store.ResetRequest) error {
	return s.withEvent(ctx, ns, req.Bucket.Key, req.Event, func() error { return s.buckets.Reset(ns, req) })
}

// withEvent runs change, a change of bucket k in memory, and if ev is not
// nil writes the bucket and ev to the file in one transaction before it
// returns.
func (s *Store) withEvent(ctx context.Context, ns string, k store.BucketKey, ev *model.AuditEvent, change func() error) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := errors.Join(checkNS(ns), checkPair("bucket", k.Entity, k.Resource)); err != nil {
		return err
	}
	if ev == nil {
		return tableErr(change())
	}
	if err := checkPair("audit event", ev.Entity, ev.ID); err != nil {
		return err
	}
	// As EndLease: holding flushMu keeps other flushes out, so the flush
	// below writes the changed bucket and its event in one transaction.
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if err := change(); err != nil {
		return tableErr(err)
	}
	s.unwritten = append(s.unwritten, nsEvent{ns, *ev})
	return s.flushLocked()
}

// ReadBuckets implements store.Buckets.
func (s *Store) ReadBuckets(ctx context.Context, ns string, keys []store.BucketKey) ([]*store.Record, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return s.buckets.Read(ns, keys), nil
}

// tableErr turns the table's ErrClosed (Close ran during the call: the
// table checks it under the shard lock, see Close) into this package's.
func tableErr(err error) error {
	if errors.Is(err, buckettable.ErrClosed) {
		return ErrClosed
	}
	return err
}

// dropBuckets removes from memory every bucket match selects, and returns
// how many. The caller holds flushMu and has already deleted the records
// from the file.
func (s *Store) dropBuckets(match func(buckettable.ID) bool) int {
	return s.buckets.Delete(match)
}
