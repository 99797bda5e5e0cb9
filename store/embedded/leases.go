package embedded

import (
	"context"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Durable lease records live in the bucket table beside the buckets they
// debited (package buckettable), and reach the file with them: a flush
// writes a debit and its record, or an ending's give-back and the record's
// deletion, in the same transaction, so a crash loses both or neither. An
// ending that carries an audit event flushes at once, with the event in
// the same transaction, and so does a reservation's grant, which carries
// its audit event too (ConsumeRequest.Event).

var _ store.Leases = (*Store)(nil)

// GetLease implements store.Leases.
func (s *Store) GetLease(ctx context.Context, ns, id string) (store.LeaseRecord, error) {
	if err := s.check(ctx); err != nil {
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
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := checkLease(ns, rec.ID); err != nil {
		return err
	}
	return tableErr(s.buckets.UpdateLease(ns, rec))
}

// EndLease implements store.Leases.
func (s *Store) EndLease(ctx context.Context, ns string, e store.LeaseEnding) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if e.Event == nil {
		return tableErr(s.buckets.EndLease(ns, e))
	}
	if err := checkPair("audit event", e.Event.Entity, e.Event.ID); err != nil {
		return err
	}
	// Holding flushMu keeps other flushes out, so the flush below writes
	// the deletion and its event in one transaction.
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if err := s.buckets.EndLease(ns, e); err != nil {
		return tableErr(err)
	}
	s.unwritten = append(s.unwritten, nsEvent{ns, *e.Event})
	return s.flushLocked()
}

// consumeAudited is Consume of a request with an audit event (a
// reservation's). As EndLease: holding flushMu keeps other flushes out,
// so the flush below writes the debit, its record and the event in one
// transaction, and the call returns when they are on disk. If that flush
// fails, the grant stands in memory (granted is true, with the error) and
// the three stay queued together for the next flush.
func (s *Store) consumeAudited(ns string, req *store.ConsumeRequest) (bool, error) {
	if err := store.CheckConsumeEvent(req); err != nil {
		return false, err
	}
	if err := checkPair("audit event", req.Event.Entity, req.Event.ID); err != nil {
		return false, err
	}
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	granted, err := s.buckets.Consume(ns, req)
	if err != nil || !granted {
		return false, tableErr(err)
	}
	s.unwritten = append(s.unwritten, nsEvent{ns, *req.Event})
	return true, s.flushLocked()
}

// ListLeases implements store.Leases.
func (s *Store) ListLeases(ctx context.Context, ns string, q store.LeaseQuery) ([]store.LeaseRecord, string, error) {
	if err := s.check(ctx); err != nil {
		return nil, "", err
	}
	if err := q.Validate(); err != nil {
		return nil, "", err
	}
	recs, next := s.buckets.ListLeases(ns, q)
	return recs, next, nil
}

// checkLease rejects a namespace or lease id the file cannot hold.
func checkLease(ns, id string) error {
	if err := checkNS(ns); err != nil {
		return err
	}
	if len(id) > maxKey {
		return model.Invalid("lease_id", id, fmt.Sprintf("longer than %d bytes", maxKey))
	}
	return nil
}

// encodeLease encodes a record for the file. A record holds only numbers
// and identifiers: encoding cannot fail.
func encodeLease(rec *store.LeaseRecord) []byte {
	v, err := json.Marshal(rec)
	if err != nil {
		panic(fmt.Sprintf("embedded: encode lease %q: %v", rec.ID, err))
	}
	return v
}

// writeLeases writes a flush's lease records and lease audit events.
func writeLeases(tx *bolt.Tx, leases []leasePut, events []nsEvent) error {
	for _, p := range leases {
		if p.val == nil {
			if b := sub(nsBucket(tx, p.ns), bktLeases); b != nil {
				if err := b.Delete([]byte(p.id)); err != nil {
					return err
				}
			}
			continue
		}
		nsb, err := nsBucketForWrite(tx, p.ns)
		if err != nil {
			return err
		}
		if err := nsb.Bucket(bktLeases).Put([]byte(p.id), p.val); err != nil {
			return err
		}
	}
	for _, e := range events {
		nsb, err := nsBucketForWrite(tx, e.ns)
		if err != nil {
			return err
		}
		if err := appendAudit(nsb, e.ev); err != nil {
			return err
		}
	}
	return nil
}

// readLeases decodes a namespace's lease records, handing each to put
// unless it is nil (readRecords).
func readLeases(ns string, nsb *bolt.Bucket, put func(string, store.LeaseRecord)) error {
	b := nsb.Bucket(bktLeases)
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error {
		var rec store.LeaseRecord
		if err := json.Unmarshal(v, &rec); err != nil || rec.ID != string(k) {
			return fmt.Errorf("namespace %q, lease %q: %w", ns, k, errCorrupt)
		}
		if put != nil {
			put(ns, rec)
		}
		return nil
	})
}
