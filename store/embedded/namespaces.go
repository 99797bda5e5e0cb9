package embedded

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/internal/buckettable"
	"github.com/tollgate-rl/tollgate/store/internal/codec"
)

// The registry maps names to namespaces (bucket registry) and ids back to
// names (bucket nsids), so that both uniqueness checks are one lookup.

// CreateNamespace implements store.Namespaces.
func (s *Store) CreateNamespace(ctx context.Context, n model.Namespace) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if n.Name == "" || len(n.Name) > maxKey {
		return model.Invalid("namespace", n.Name, fmt.Sprintf("names must be 1 to %d bytes", maxKey))
	}
	if err := checkNS(n.ID); err != nil {
		return err
	}
	v, err := codec.EncodeNamespace(n)
	if err != nil {
		return err
	}
	return s.changed(s.mapErr(s.db.Update(func(tx *bolt.Tx) error {
		reg, ids := tx.Bucket(bktRegistry), tx.Bucket(bktNSIDs)
		if reg.Get([]byte(n.Name)) != nil || ids.Get([]byte(n.ID)) != nil {
			return model.ErrNamespaceExists
		}
		if err := reg.Put([]byte(n.Name), v); err != nil {
			return err
		}
		return ids.Put([]byte(n.ID), []byte(n.Name))
	})))
}

// GetNamespace implements store.Namespaces.
func (s *Store) GetNamespace(ctx context.Context, name string) (model.Namespace, error) {
	var n model.Namespace
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		n, err = getNamespace(tx, name)
		return err
	})
	return n, err
}

// getNamespace reads the registration of name.
func getNamespace(tx *bolt.Tx, name string) (model.Namespace, error) {
	if name == "" {
		return model.Namespace{}, model.ErrNamespaceNotFound
	}
	v := tx.Bucket(bktRegistry).Get([]byte(name))
	if v == nil {
		return model.Namespace{}, model.ErrNamespaceNotFound
	}
	return codec.DecodeNamespace(v)
}

// ListNamespaces implements store.Namespaces. bbolt keeps the registry
// sorted by name.
func (s *Store) ListNamespaces(ctx context.Context) ([]model.Namespace, error) {
	var out []model.Namespace
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bktRegistry).ForEach(func(_, v []byte) error {
			n, err := codec.DecodeNamespace(v)
			out = append(out, n)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SetNamespaceDeleted implements store.Namespaces.
func (s *Store) SetNamespaceDeleted(ctx context.Context, name string, at time.Time) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.updateNamespace(name, func(n *model.Namespace) { n.DeletedAt = at })
}

// updateNamespace applies change to the registration of name, in one
// transaction.
func (s *Store) updateNamespace(name string, change func(*model.Namespace)) error {
	return s.changed(s.mapErr(s.db.Update(func(tx *bolt.Tx) error {
		n, err := getNamespace(tx, name)
		if err != nil {
			return err
		}
		change(&n)
		v, err := codec.EncodeNamespace(n)
		if err != nil {
			return err
		}
		return tx.Bucket(bktRegistry).Put([]byte(name), v)
	})))
}

// PurgeNamespace implements store.Namespaces. The namespace's bucket and its
// registration go in one transaction (bbolt frees the pages of a deleted
// bucket without visiting every key); its buckets then leave memory, with
// flushMu held so that no flush writes one back in between.
func (s *Store) PurgeNamespace(ctx context.Context, name string, progress func(int)) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	var id string
	deleted := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		n, err := getNamespace(tx, name)
		if err != nil {
			return err
		}
		id = n.ID
		root := tx.Bucket(bktNS)
		if nsb := root.Bucket([]byte(id)); nsb != nil {
			// Bucket records are counted from memory below, which holds
			// every bucket of the namespace.
			// Usage snapshots count once (not their index entries).
			for _, name := range [][]byte{bktEntities, bktConfigs, bktAudit, bktUsage, bktNSKeys} {
				if b := nsb.Bucket(name); b != nil {
					deleted += b.Stats().KeyN
				}
			}
			// The keys' records by hash are outside the namespace's
			// bucket: its index of them by name lists what to delete.
			if err := deleteKeyHashes(tx, nsb); err != nil {
				return err
			}
			if err := root.DeleteBucket([]byte(id)); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bktRegistry).Delete([]byte(name)); err != nil {
			return err
		}
		return tx.Bucket(bktNSIDs).Delete([]byte(id))
	})
	if err := s.changed(s.mapErr(err)); err != nil {
		return err
	}
	deleted += s.dropBuckets(func(b buckettable.ID) bool { return b.NS == id })
	deleted += s.buckets.DeleteLeases(id)
	if progress != nil {
		progress(deleted)
	}
	return nil
}
