package embedded

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/internal/codec"
)

// Stored API keys live twice: by hash in the top-level bucket keys (how a
// request's key is found before its namespace is known) and by name in the
// namespace's own keys bucket, pointing at the hash (how the namespace
// lists and revokes them, and how a purge finds them). Both change in one
// transaction with the audit event.

// CreateKey implements store.Keys.
func (s *Store) CreateKey(ctx context.Context, ns string, k model.Key, ev model.AuditEvent) error {
	if err := checkKey(k.Name, k.Hash); err != nil {
		return err
	}
	v, err := codec.EncodeKey(ns, k)
	if err != nil {
		return err
	}
	return s.updateTx(ctx, ns, func(tx *bolt.Tx, nsb *bolt.Bucket) error {
		names, hashes := nsb.Bucket(bktNSKeys), tx.Bucket(bktKeys)
		if names.Get([]byte(k.Name)) != nil || hashes.Get([]byte(k.Hash)) != nil {
			return model.ErrKeyExists
		}
		if err := names.Put([]byte(k.Name), []byte(k.Hash)); err != nil {
			return err
		}
		if err := hashes.Put([]byte(k.Hash), v); err != nil {
			return err
		}
		return appendAudit(nsb, ev)
	})
}

// KeyByHash implements store.Keys.
func (s *Store) KeyByHash(ctx context.Context, hash string) (model.Key, error) {
	var k model.Key
	err := s.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bktKeys).Get([]byte(hash))
		if v == nil || hash == "" {
			return model.ErrKeyNotFound
		}
		var err error
		k, err = codec.DecodeKey(v)
		return err
	})
	return k, err
}

// ListKeys implements store.Keys: the namespace's keys bucket is keyed by
// name, so a page is a cursor walk from after.
func (s *Store) ListKeys(ctx context.Context, ns, after string, limit int) ([]model.Key, error) {
	if err := store.ValidatePage(limit, model.MaxKeyPage); err != nil {
		return nil, err
	}
	var out []model.Key
	err := s.view(ctx, func(tx *bolt.Tx) error {
		names := sub(nsBucket(tx, ns), bktNSKeys)
		if names == nil {
			return nil
		}
		hashes := tx.Bucket(bktKeys)
		c := names.Cursor()
		for name, hash := c.Seek([]byte(after)); name != nil && len(out) < limit; name, hash = c.Next() {
			if string(name) == after {
				continue
			}
			v := hashes.Get(hash)
			if v == nil {
				return fmt.Errorf("embedded: key %q: no record of its hash: %w", name, errCorrupt)
			}
			k, err := codec.DecodeKey(v)
			if err != nil {
				return fmt.Errorf("embedded: key %q: %w", name, err)
			}
			out = append(out, k)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteKey implements store.Keys.
func (s *Store) DeleteKey(ctx context.Context, ns, name string, ev model.AuditEvent) error {
	if name == "" {
		return model.ErrKeyNotFound
	}
	return s.updateTx(ctx, ns, func(tx *bolt.Tx, nsb *bolt.Bucket) error {
		names := nsb.Bucket(bktNSKeys)
		hash := names.Get([]byte(name))
		if hash == nil {
			return model.ErrKeyNotFound
		}
		// hash points into the page names.Delete may rewrite.
		if err := tx.Bucket(bktKeys).Delete(append([]byte(nil), hash...)); err != nil {
			return err
		}
		if err := names.Delete([]byte(name)); err != nil {
			return err
		}
		return appendAudit(nsb, ev)
	})
}

// deleteKeyHashes deletes the records by hash of every key of the
// namespace nsb (PurgeNamespace, which then deletes nsb itself).
func deleteKeyHashes(tx *bolt.Tx, nsb *bolt.Bucket) error {
	names := nsb.Bucket(bktNSKeys)
	if names == nil {
		return nil
	}
	hashes := tx.Bucket(bktKeys)
	return names.ForEach(func(_, hash []byte) error { return hashes.Delete(hash) })
}

// checkKey rejects a key bbolt cannot store (the limiter validates keys
// much more strictly before they get here).
func checkKey(name, hash string) error {
	if name == "" || len(name) > maxKey {
		return model.Invalid("name", name, fmt.Sprintf("must be 1 to %d bytes", maxKey))
	}
	if hash == "" || len(hash) > maxKey {
		return model.Invalid("hash", hash, fmt.Sprintf("must be 1 to %d bytes", maxKey))
	}
	return nil
}

// changed raises the generation if err, the outcome of a control-plane
// write, is nil, and returns err.
func (s *Store) changed(err error) error {
	if err == nil {
		s.gen.Add(1)
	}
	return err
}

// Generation implements store.Changes.
func (s *Store) Generation(ctx context.Context) (uint64, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	return s.gen.Load(), nil
}

// LocalGeneration implements store.Changes: the file is locked by this
// process (Open), so every change goes through this Store.
func (s *Store) LocalGeneration() bool { return true }
