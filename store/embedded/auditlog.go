package embedded

import (
	"bytes"
	"context"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/internal/codec"
)

// The namespace-wide audit log (store.AuditLog) reads the sub-bucket
// audit-by-id of each namespace: event id -> its entity. Ids are ULIDs, so
// bbolt's key order is time order and a range is one cursor walk; the
// event itself stays in audit under its entity. A file written before the
// index existed gets it, filled from audit, on the first write of an event
// or the first read of the range (indexAudit).
var bktAuditByID = []byte("audit-by-id")

var _ store.AuditLog = (*Store)(nil)

// indexAudit returns the namespace's audit-by-id bucket, creating it and
// filling it from the audit bucket if it is missing.
func indexAudit(nsb *bolt.Bucket) (*bolt.Bucket, error) {
	if b := nsb.Bucket(bktAuditByID); b != nil {
		return b, nil
	}
	idx, err := nsb.CreateBucket(bktAuditByID)
	if err != nil {
		return nil, err
	}
	audit := nsb.Bucket(bktAudit)
	if audit == nil {
		return idx, nil
	}
	err = audit.ForEach(func(k, v []byte) error {
		ev, err := codec.DecodeEvent(v)
		if err != nil {
			return err
		}
		return idx.Put([]byte(ev.ID), []byte(ev.Entity))
	})
	return idx, err
}

// ensureAuditIndex creates the audit-by-id index of namespace ns if it has
// events and no index (a file from before it), in a write transaction of
// its own.
func (s *Store) ensureAuditIndex(ctx context.Context, ns string) error {
	missing := false
	if err := s.view(ctx, func(tx *bolt.Tx) error {
		nsb := nsBucket(tx, ns)
		missing = nsb != nil && nsb.Bucket(bktAuditByID) == nil && nsb.Bucket(bktAudit) != nil
		return nil
	}); err != nil || !missing {
		return err
	}
	return s.mapErr(s.db.Update(func(tx *bolt.Tx) error {
		_, err := indexAudit(nsBucket(tx, ns))
		return err
	}))
}

// ListAuditRange implements store.AuditLog.
func (s *Store) ListAuditRange(ctx context.Context, ns string, q store.AuditRange) ([]model.AuditEvent, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if err := s.ensureAuditIndex(ctx, ns); err != nil {
		return nil, err
	}
	after, before := q.Bounds()
	var out []model.AuditEvent
	err := s.view(ctx, func(tx *bolt.Tx) error {
		nsb := nsBucket(tx, ns)
		idx, audit := sub(nsb, bktAuditByID), sub(nsb, bktAudit)
		if idx == nil || audit == nil {
			return nil
		}
		return rangeIDs(idx, after, before, q.Limit, func(id, entity []byte) error {
			v := audit.Get(pairKey(string(entity), string(id)))
			if v == nil {
				return nil
			}
			ev, err := codec.DecodeEvent(v)
			if err != nil {
				return err
			}
			out = append(out, ev)
			return nil
		})
	})
	return out, err
}

// rangeIDs calls f with each id of idx (and its value) with after < id <
// before, in order, at most limit.
func rangeIDs(idx *bolt.Bucket, after, before string, limit int, f func(id, v []byte) error) error {
	c := idx.Cursor()
	n := 0
	for k, v := c.Seek([]byte(after)); k != nil && bytes.Compare(k, []byte(before)) < 0 && n < limit; k, v = c.Next() {
		if string(k) == after {
			continue
		}
		if err := f(k, v); err != nil {
			return err
		}
		n++
	}
	return nil
}

// SweepAudit implements store.AuditLog: the oldest events go from both
// buckets in one transaction.
func (s *Store) SweepAudit(ctx context.Context, ns string, before time.Time, limit int) (int, error) {
	if limit < 1 {
		return 0, s.check(ctx)
	}
	if err := s.ensureAuditIndex(ctx, ns); err != nil {
		return 0, err
	}
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		nsb := nsBucket(tx, ns)
		idx, audit := sub(nsb, bktAuditByID), sub(nsb, bktAudit)
		if idx == nil || audit == nil {
			return nil
		}
		var ids, entities [][]byte
		if err := rangeIDs(idx, "", store.AuditIDAt(before), limit, func(id, entity []byte) error {
			ids, entities = append(ids, bytes.Clone(id)), append(entities, bytes.Clone(entity))
			return nil
		}); err != nil {
			return err
		}
		for i, id := range ids {
			if err := audit.Delete(pairKey(string(entities[i]), string(id))); err != nil {
				return err
			}
			if err := idx.Delete(id); err != nil {
				return err
			}
		}
		n = len(ids)
		return nil
	})
	return n, s.mapErr(err)
}

// SetAuditRetention implements store.AuditLog.
func (s *Store) SetAuditRetention(ctx context.Context, name string, d time.Duration) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.updateNamespace(name, func(n *model.Namespace) { n.AuditRetention = d })
}
