package memory

import (
	"context"
	"fmt"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// GetLease implements store.Leases.
func (s *Store) GetLease(ctx context.Context, ns, id string) (store.LeaseRecord, error) {
	if err := ctx.Err(); err != nil {
		return store.LeaseRecord{}, err
	}
	rec, ok := s.buckets.GetLease(ns, id)
	if !ok {
		return rec, fmt.Errorf("lease %q: %w", id, model.ErrLeaseNotFound)
	}
	return rec, nil
}

// UpdateLease implements store.Leases.
func (s *Store) UpdateLease(ctx context.Context, ns string, rec store.LeaseRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.buckets.UpdateLease(ns, rec)
}

// EndLease implements store.Leases. The ending's audit event is appended
// after the record is gone and the deltas applied; nothing can fail in
// between, so the three happen together.
func (s *Store) EndLease(ctx context.Context, ns string, e store.LeaseEnding) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.buckets.EndLease(ns, e); err != nil {
		return err
	}
	if e.Event != nil {
		s.mu.Lock()
		s.ns(ns, true).appendAudit(*e.Event)
		s.mu.Unlock()
	}
	return nil
}

// consumeAudited is Consume of a request with an audit event (a
// reservation's): as EndLease, the event is appended after the grant and
// its record, and nothing can fail in between, so both happen; a refusal
// or an existing record appends nothing.
func (s *Store) consumeAudited(ns string, req *store.ConsumeRequest) (bool, error) {
	if err := store.CheckConsumeEvent(req); err != nil {
		return false, err
	}
	granted, err := s.buckets.Consume(ns, req)
	if err != nil || !granted {
		return false, err
	}
	return true, s.withEvent(ns, nil, req.Event)
}

// ListLeases implements store.Leases.
func (s *Store) ListLeases(ctx context.Context, ns string, q store.LeaseQuery) ([]store.LeaseRecord, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if err := q.Validate(); err != nil {
		return nil, "", err
	}
	recs, next := s.buckets.ListLeases(ns, q)
	return recs, next, nil
}

var _ store.Leases = (*Store)(nil)
