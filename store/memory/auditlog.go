package memory

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

var _ store.AuditLog = (*Store)(nil)

// auditRef is one event of a namespace's log by time: its id and the
// entity whose log holds it.
type auditRef struct{ id, entity string }

// ListAuditRange implements store.AuditLog from the namespace's ids in
// order, each event read from its entity's log.
func (s *Store) ListAuditRange(ctx context.Context, ns string, q store.AuditRange) ([]model.AuditEvent, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	after, before := q.Bounds()
	return read(ctx, s, ns, func(n *namespace) ([]model.AuditEvent, error) {
		if n == nil {
			return nil, nil
		}
		refs := refRange(n.auditIDs, after, before)
		out := make([]model.AuditEvent, 0, min(len(refs), q.Limit))
		for _, r := range refs[:min(len(refs), q.Limit)] {
			evs := n.audit[r.entity]
			i := sort.Search(len(evs), func(i int) bool { return evs[i].ID >= r.id })
			if i < len(evs) && evs[i].ID == r.id {
				ev := evs[i]
				ev.Details = cloneMap(ev.Details)
				out = append(out, ev)
			}
		}
		return out, nil
	})
}

// SweepAudit implements store.AuditLog: the oldest limit events before
// before leave the namespace's ids and their entities' logs.
func (s *Store) SweepAudit(ctx context.Context, ns string, before time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if limit < 1 {
		return 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.ns(ns, false)
	if n == nil {
		return 0, nil
	}
	old := refRange(n.auditIDs, "", store.AuditIDAt(before))
	old = old[:min(len(old), limit)]
	// The swept events are the oldest of the namespace, so each entity's
	// are the front of its log.
	cut := map[string]int{}
	for _, r := range old {
		cut[r.entity]++
	}
	for entity, k := range cut {
		if evs := n.audit[entity]; k >= len(evs) {
			delete(n.audit, entity)
		} else {
			n.audit[entity] = slices.Clone(evs[k:])
		}
	}
	n.auditIDs = slices.Delete(n.auditIDs, 0, len(old))
	return len(old), nil
}

// SetAuditRetention implements store.AuditLog.
func (s *Store) SetAuditRetention(ctx context.Context, name string, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.updateNamespace(name, func(n *model.Namespace) { n.AuditRetention = d })
}

// refRange returns the refs of refs (sorted by id) with after < id < before.
func refRange(refs []auditRef, after, before string) []auditRef {
	i := sort.Search(len(refs), func(i int) bool { return refs[i].id > after })
	j := sort.Search(len(refs), func(j int) bool { return refs[j].id >= before })
	if j < i {
		return nil
	}
	return refs[i:j]
}
