package memory

import (
	"context"
	"slices"
	"sort"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// ListEntities implements store.Entities by sorting the namespace's ids.
func (s *Store) ListEntities(ctx context.Context, ns, after string, limit int) ([]model.Entity, error) {
	if err := store.ValidatePage(limit, store.MaxEntityPage); err != nil {
		return nil, err
	}
	return read(ctx, s, ns, func(n *namespace) ([]model.Entity, error) {
		if n == nil {
			return nil, nil
		}
		ids := make([]string, 0, len(n.entities))
		for id := range n.entities {
			if id > after {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		out := make([]model.Entity, 0, min(len(ids), limit))
		for _, id := range ids[:min(len(ids), limit)] {
			e := n.entities[id]
			e.Metadata = cloneMap(e.Metadata)
			out = append(out, e)
		}
		return out, nil
	})
}

// UpdateEntity implements store.Entities.
func (s *Store) UpdateEntity(ctx context.Context, ns string, e model.Entity, ev model.AuditEvent, pre ...store.Precondition) error {
	return s.update(ctx, ns, func(n *namespace) error {
		old, ok := n.entities[e.ID]
		if !ok {
			return model.ErrEntityNotFound
		}
		if err := store.CheckVersion(old.Version, pre); err != nil {
			return err
		}
		if old.ParentID != e.ParentID {
			err := store.CheckAncestry(e.ID, e.ParentID, func(id string) (string, bool, error) {
				p, ok := n.entities[id]
				return p.ParentID, ok, nil
			})
			if err != nil {
				return err
			}
			n.unlinkChild(old.ParentID, e.ID)
			n.linkChild(e.ParentID, e.ID)
		}
		e.CreatedAt, e.Version = old.CreatedAt, old.Version+1
		e.Metadata = cloneMap(e.Metadata)
		n.entities[e.ID] = e
		n.appendAudit(ev)
		return nil
	})
}

// linkChild records child under parent in the children index.
func (n *namespace) linkChild(parent, child string) {
	if parent == "" {
		return
	}
	kids := n.children[parent]
	if kids == nil {
		kids = make(map[string]struct{})
		n.children[parent] = kids
	}
	kids[child] = struct{}{}
}

// unlinkChild removes child from parent's entry in the children index.
func (n *namespace) unlinkChild(parent, child string) {
	if kids := n.children[parent]; kids != nil {
		delete(kids, child)
		if len(kids) == 0 {
			delete(n.children, parent)
		}
	}
}

// ListConfigs implements store.Configs by sorting the namespace's scopes.
func (s *Store) ListConfigs(ctx context.Context, ns string, after *model.Scope, limit int) ([]model.ScopedConfig, error) {
	if err := store.ValidatePage(limit, store.MaxConfigPage); err != nil {
		return nil, err
	}
	return read(ctx, s, ns, func(n *namespace) ([]model.ScopedConfig, error) {
		if n == nil {
			return nil, nil
		}
		var out []model.ScopedConfig
		for sc, c := range n.configs {
			if after == nil || model.CompareScopes(sc, *after) > 0 {
				out = append(out, model.ScopedConfig{Scope: sc, Config: c.Clone()})
			}
		}
		slices.SortFunc(out, func(a, b model.ScopedConfig) int { return model.CompareScopes(a.Scope, b.Scope) })
		return out[:min(len(out), limit)], nil
	})
}
