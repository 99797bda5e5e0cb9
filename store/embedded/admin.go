package embedded

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/internal/buckettable"
	"github.com/tollgate-rl/tollgate/store/internal/codec"
)

// Configuration, entities and audit events are read and written in bbolt
// transactions directly: every write commits (fsync) before it returns, and
// a change and its audit event are one transaction. The limiter caches what
// it reads, so these calls are off the hot path.

// view runs f in a read transaction unless ctx is done or the store closed.
func (s *Store) view(ctx context.Context, f func(tx *bolt.Tx) error) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.mapErr(s.db.View(f))
}

// update runs f in a write transaction on the namespace's bucket (created if
// need be) and commits, unless ctx is done or the store closed. Every
// caller changes the control plane, so a commit raises the generation.
func (s *Store) update(ctx context.Context, ns string, f func(nsb *bolt.Bucket) error) error {
	return s.updateTx(ctx, ns, func(_ *bolt.Tx, nsb *bolt.Bucket) error { return f(nsb) })
}

// updateTx is update for changes that also reach outside the namespace's
// bucket (the stored keys' index by hash).
func (s *Store) updateTx(ctx context.Context, ns string, f func(tx *bolt.Tx, nsb *bolt.Bucket) error) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := checkNS(ns); err != nil {
		return err
	}
	err := s.mapErr(s.db.Update(func(tx *bolt.Tx) error {
		nsb, err := nsBucketForWrite(tx, ns)
		if err != nil {
			return err
		}
		return f(tx, nsb)
	}))
	return s.changed(err)
}

// GetConfigs implements store.Configs.
func (s *Store) GetConfigs(ctx context.Context, ns string, scopes []model.Scope) ([]*model.Config, error) {
	out := make([]*model.Config, len(scopes))
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := sub(nsBucket(tx, ns), bktConfigs)
		if b == nil {
			return nil
		}
		for i, sc := range scopes {
			v := b.Get(pairKey(sc.Entity, sc.Resource))
			if v == nil {
				continue
			}
			c, err := codec.DecodeConfig(v)
			if err != nil {
				return fmt.Errorf("embedded: config %+v: %w", sc, err)
			}
			out[i] = &c
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PutConfig implements store.Configs: the config replaced is read, its
// version checked and the next one written, in one transaction.
func (s *Store) PutConfig(ctx context.Context, ns string, scope model.Scope, cfg model.Config, ev model.AuditEvent, pre ...store.Precondition) error {
	if err := checkPair("scope", scope.Entity, scope.Resource); err != nil {
		return err
	}
	return s.update(ctx, ns, func(nsb *bolt.Bucket) error {
		if scope.Entity != "" && nsb.Bucket(bktEntities).Get([]byte(scope.Entity)) == nil {
			return model.ErrEntityNotFound
		}
		b, k := nsb.Bucket(bktConfigs), pairKey(scope.Entity, scope.Resource)
		have, err := configVersion(b.Get(k))
		if err != nil {
			return err
		}
		if err := store.CheckVersion(have, pre); err != nil {
			return err
		}
		cfg.Version = have + 1
		v, err := codec.EncodeConfig(cfg)
		if err != nil {
			return err
		}
		if err := b.Put(k, v); err != nil {
			return err
		}
		return appendAudit(nsb, ev)
	})
}

// configVersion is the version of a stored config, 0 for none (nil).
func configVersion(v []byte) (int64, error) {
	if v == nil {
		return 0, nil
	}
	c, err := codec.DecodeConfig(v)
	return c.Version, err
}

// DeleteConfig implements store.Configs.
func (s *Store) DeleteConfig(ctx context.Context, ns string, scope model.Scope, ev model.AuditEvent, pre ...store.Precondition) error {
	return s.update(ctx, ns, func(nsb *bolt.Bucket) error {
		b, k := nsb.Bucket(bktConfigs), pairKey(scope.Entity, scope.Resource)
		v := b.Get(k)
		if v == nil {
			return model.ErrNotFound
		}
		if store.Expects(pre) {
			have, err := configVersion(v)
			if err != nil {
				return err
			}
			if err := store.CheckVersion(have, pre); err != nil {
				return err
			}
		}
		if err := b.Delete(k); err != nil {
			return err
		}
		return appendAudit(nsb, ev)
	})
}

// CreateEntity implements store.Entities.
func (s *Store) CreateEntity(ctx context.Context, ns string, e model.Entity, ev model.AuditEvent) error {
	if e.ID == "" || len(e.ID) > maxKey/2 || len(e.ParentID) > maxKey/2 {
		return model.Invalid("entity", e.ID, fmt.Sprintf("ids must be 1 to %d bytes", maxKey/2))
	}
	e.Version = 1
	v, err := codec.EncodeEntity(e)
	if err != nil {
		return err
	}
	return s.update(ctx, ns, func(nsb *bolt.Bucket) error {
		ents := nsb.Bucket(bktEntities)
		if ents.Get([]byte(e.ID)) != nil {
			return model.ErrEntityExists
		}
		if e.ParentID != "" {
			if ents.Get([]byte(e.ParentID)) == nil {
				return model.ErrEntityNotFound
			}
			if err := nsb.Bucket(bktChildren).Put(pairKey(e.ParentID, e.ID), nil); err != nil {
				return err
			}
		}
		if err := ents.Put([]byte(e.ID), v); err != nil {
			return err
		}
		return appendAudit(nsb, ev)
	})
}

// GetEntity implements store.Entities.
func (s *Store) GetEntity(ctx context.Context, ns, id string) (model.Entity, error) {
	var e model.Entity
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := sub(nsBucket(tx, ns), bktEntities)
		if b == nil || id == "" {
			return model.ErrEntityNotFound
		}
		v := b.Get([]byte(id))
		if v == nil {
			return model.ErrEntityNotFound
		}
		var err error
		e, err = codec.DecodeEntity(v)
		return err
	})
	return e, err
}

// DeleteEntity implements store.Entities. The entity, its configs, its
// bucket records, its usage snapshots and its child-index entry go in one
// transaction; its buckets then leave memory. flushMu keeps a flush from
// writing a bucket back in between. Usage goes with the entity as in the
// DynamoDB backend, which keeps it under the entity's partition.
func (s *Store) DeleteEntity(ctx context.Context, ns, id string, ev model.AuditEvent, pre ...store.Precondition) error {
	if id == "" {
		return model.ErrEntityNotFound
	}
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	err := s.update(ctx, ns, func(nsb *bolt.Bucket) error {
		ents := nsb.Bucket(bktEntities)
		v := ents.Get([]byte(id))
		if v == nil {
			return model.ErrEntityNotFound
		}
		e, err := codec.DecodeEntity(v)
		if err != nil {
			return err
		}
		if err := store.CheckVersion(e.Version, pre); err != nil {
			return err
		}
		if err := ents.Delete([]byte(id)); err != nil {
			return err
		}
		if e.ParentID != "" {
			if err := nsb.Bucket(bktChildren).Delete(pairKey(e.ParentID, id)); err != nil {
				return err
			}
		}
		for _, name := range [][]byte{bktConfigs, bktBuckets} {
			if _, err := deletePrefix(nsb.Bucket(name), entityPrefix(id)); err != nil {
				return err
			}
		}
		if err := deleteEntityUsage(nsb, id); err != nil {
			return err
		}
		return appendAudit(nsb, ev)
	})
	if err != nil {
		return err
	}
	s.dropBuckets(func(b buckettable.ID) bool { return b.NS == ns && b.Entity == id })
	return nil
}

// ListChildren implements store.Entities.
func (s *Store) ListChildren(ctx context.Context, ns, id string) ([]model.Entity, error) {
	var out []model.Entity
	err := s.view(ctx, func(tx *bolt.Tx) error {
		nsb := nsBucket(tx, ns)
		kids, ents := sub(nsb, bktChildren), sub(nsb, bktEntities)
		if kids == nil {
			return nil
		}
		prefix := entityPrefix(id)
		c := kids.Cursor()
		// Keys sort by child id under the parent's prefix.
		for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
			v := ents.Get(k[len(prefix):])
			if v == nil {
				continue
			}
			e, err := codec.DecodeEntity(v)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListAudit implements store.Audit.
func (s *Store) ListAudit(ctx context.Context, ns, entity, after string, limit int) ([]model.AuditEvent, error) {
	var out []model.AuditEvent
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := sub(nsBucket(tx, ns), bktAudit)
		if b == nil {
			return nil
		}
		prefix, from := entityPrefix(entity), pairKey(entity, after)
		c := b.Cursor()
		for k, v := c.Seek(from); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
			if string(k[len(prefix):]) == after {
				continue // ids strictly greater than after
			}
			if limit > 0 && len(out) == limit {
				break
			}
			ev, err := codec.DecodeEvent(v)
			if err != nil {
				return err
			}
			out = append(out, ev)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// appendAudit stores ev under its entity, in id order.
func appendAudit(nsb *bolt.Bucket, ev model.AuditEvent) error {
	if err := checkPair("audit event", ev.Entity, ev.ID); err != nil {
		return err
	}
	v, err := codec.EncodeEvent(ev)
	if err != nil {
		return err
	}
	idx, err := indexAudit(nsb)
	if err != nil {
		return err
	}
	if err := idx.Put([]byte(ev.ID), []byte(ev.Entity)); err != nil {
		return err
	}
	return nsb.Bucket(bktAudit).Put(pairKey(ev.Entity, ev.ID), v)
}
