package memory

import (
	"context"
	"sort"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// CreateKey implements store.Keys.
func (s *Store) CreateKey(ctx context.Context, ns string, k model.Key, ev model.AuditEvent) error {
	return s.update(ctx, ns, func(n *namespace) error {
		if _, ok := n.keys[k.Name]; ok {
			return model.ErrKeyExists
		}
		if _, ok := s.keys[k.Hash]; ok {
			return model.ErrKeyExists
		}
		n.keys[k.Name] = k.Hash
		s.keys[k.Hash] = k
		n.appendAudit(ev)
		return nil
	})
}

// KeyByHash implements store.Keys.
func (s *Store) KeyByHash(ctx context.Context, hash string) (model.Key, error) {
	if err := ctx.Err(); err != nil {
		return model.Key{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.keys[hash]
	if !ok {
		return model.Key{}, model.ErrKeyNotFound
	}
	return k, nil
}

// ListKeys implements store.Keys.
func (s *Store) ListKeys(ctx context.Context, ns, after string, limit int) ([]model.Key, error) {
	if err := store.ValidatePage(limit, model.MaxKeyPage); err != nil {
		return nil, err
	}
	return read(ctx, s, ns, func(n *namespace) ([]model.Key, error) {
		if n == nil {
			return nil, nil
		}
		names := make([]string, 0, len(n.keys))
		for name := range n.keys {
			if name > after {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		out := make([]model.Key, 0, min(len(names), limit))
		for _, name := range names[:min(len(names), limit)] {
			out = append(out, s.keys[n.keys[name]])
		}
		return out, nil
	})
}

// DeleteKey implements store.Keys.
func (s *Store) DeleteKey(ctx context.Context, ns, name string, ev model.AuditEvent) error {
	return s.update(ctx, ns, func(n *namespace) error {
		hash, ok := n.keys[name]
		if !ok {
			return model.ErrKeyNotFound
		}
		delete(n.keys, name)
		delete(s.keys, hash)
		n.appendAudit(ev)
		return nil
	})
}
