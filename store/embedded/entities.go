package embedded

import (
	"context"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/internal/codec"
)

// ListEntities implements store.Entities: the entities bucket is keyed by
// id, so a page is a cursor walk from after.
func (s *Store) ListEntities(ctx context.Context, ns, after string, limit int) ([]model.Entity, error) {
	if err := store.ValidatePage(limit, store.MaxEntityPage); err != nil {
		return nil, err
	}
	var out []model.Entity
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := sub(nsBucket(tx, ns), bktEntities)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek([]byte(after)); k != nil && len(out) < limit; k, v = c.Next() {
			if string(k) == after {
				continue
			}
			e, err := codec.DecodeEntity(v)
			if err != nil {
				return fmt.Errorf("embedded: entity %q: %w", k, err)
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

// UpdateEntity implements store.Entities: the entity, its children-index
// entries and the audit event in one transaction.
func (s *Store) UpdateEntity(ctx context.Context, ns string, e model.Entity, ev model.AuditEvent, pre ...store.Precondition) error {
	if e.ID == "" || len(e.ID) > maxKey/2 || len(e.ParentID) > maxKey/2 {
		return model.Invalid("entity", e.ID, fmt.Sprintf("ids must be 1 to %d bytes", maxKey/2))
	}
	return s.update(ctx, ns, func(nsb *bolt.Bucket) error {
		ents := nsb.Bucket(bktEntities)
		v := ents.Get([]byte(e.ID))
		if v == nil {
			return model.ErrEntityNotFound
		}
		old, err := codec.DecodeEntity(v)
		if err != nil {
			return err
		}
		if err := store.CheckVersion(old.Version, pre); err != nil {
			return err
		}
		if old.ParentID != e.ParentID {
			if err := store.CheckAncestry(e.ID, e.ParentID, parentIn(ents)); err != nil {
				return err
			}
			if err := relink(nsb.Bucket(bktChildren), e.ID, old.ParentID, e.ParentID); err != nil {
				return err
			}
		}
		e.CreatedAt, e.Version = old.CreatedAt, old.Version+1
		nv, err := codec.EncodeEntity(e)
		if err != nil {
			return err
		}
		if err := ents.Put([]byte(e.ID), nv); err != nil {
			return err
		}
		return appendAudit(nsb, ev)
	})
}

// parentIn reads entities' parents from the entities bucket, for
// store.CheckAncestry.
func parentIn(ents *bolt.Bucket) func(id string) (string, bool, error) {
	return func(id string) (string, bool, error) {
		v := ents.Get([]byte(id))
		if v == nil {
			return "", false, nil
		}
		e, err := codec.DecodeEntity(v)
		return e.ParentID, true, err
	}
}

// relink moves child's children-index entry from one parent to another.
func relink(kids *bolt.Bucket, child, from, to string) error {
	if from != "" {
		if err := kids.Delete(pairKey(from, child)); err != nil {
			return err
		}
	}
	if to == "" {
		return nil
	}
	return kids.Put(pairKey(to, child), nil)
}

// ListConfigs implements store.Configs. Config keys start with the
// entity's length, which does not sort by entity: a page reads every
// config of the namespace and sorts those after the cursor (configs are
// few; the limiter caches them).
func (s *Store) ListConfigs(ctx context.Context, ns string, after *model.Scope, limit int) ([]model.ScopedConfig, error) {
	if err := store.ValidatePage(limit, store.MaxConfigPage); err != nil {
		return nil, err
	}
	var out []model.ScopedConfig
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := sub(nsBucket(tx, ns), bktConfigs)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			entity, resource, ok := splitPair(k)
			if !ok {
				return fmt.Errorf("embedded: config key %q: %w", k, errCorrupt)
			}
			sc := model.Scope{Entity: entity, Resource: resource}
			if after != nil && model.CompareScopes(sc, *after) <= 0 {
				return nil
			}
			c, err := codec.DecodeConfig(v)
			if err != nil {
				return fmt.Errorf("embedded: config %+v: %w", sc, err)
			}
			out = append(out, model.ScopedConfig{Scope: sc, Config: c})
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b model.ScopedConfig) int { return model.CompareScopes(a.Scope, b.Scope) })
	return out[:min(len(out), limit)], nil
}
