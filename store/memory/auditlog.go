package memory

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

var _ store.AuditLog = (*Store)(nil)

// ListAuditRange implements store.AuditLog by merging each entity's log
// (sorted by id) over the range: up to q.Limit from each, sorted, cut.
func (s *Store) ListAuditRange(ctx context.Context, ns string, q store.AuditRange) ([]model.AuditEvent, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	after, before := q.Bounds()
	return read(ctx, s, ns, func(n *namespace) ([]model.AuditEvent, error) {
		if n == nil {
			return nil, nil
		}
		var out []model.AuditEvent
		for _, evs := range n.audit {
			evs = idRange(evs, after, before)
			for _, ev := range evs[:min(len(evs), q.Limit)] {
				ev.Details = cloneMap(ev.Details)
				out = append(out, ev)
			}
		}
		slices.SortFunc(out, func(a, b model.AuditEvent) int { return strings.Compare(a.ID, b.ID) })
		return out[:min(len(out), q.Limit)], nil
	})
}

// SweepAudit implements store.AuditLog: the oldest limit events before
// before, across every entity's log, are cut from the fronts of the logs.
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
	cut := store.AuditIDAt(before)
	var old []string
	for _, evs := range n.audit {
		evs = idRange(evs, "", cut)
		for _, ev := range evs[:min(len(evs), limit)] {
			old = append(old, ev.ID)
		}
	}
	if len(old) == 0 {
		return 0, nil
	}
	slices.Sort(old)
	if len(old) > limit {
		old = old[:limit]
	}
	last := old[len(old)-1]
	for entity, evs := range n.audit {
		i := sort.Search(len(evs), func(i int) bool { return evs[i].ID > last })
		if i == len(evs) {
			delete(n.audit, entity)
		} else if i > 0 {
			n.audit[entity] = slices.Clone(evs[i:])
		}
	}
	return len(old), nil
}

// SetAuditRetention implements store.AuditLog.
func (s *Store) SetAuditRetention(ctx context.Context, name string, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.registry[name]
	if !ok {
		return model.ErrNamespaceNotFound
	}
	n.AuditRetention = d
	s.registry[name] = n
	s.gen.Add(1)
	return nil
}

// idRange returns the events of evs (sorted by id) with after < id < before.
func idRange(evs []model.AuditEvent, after, before string) []model.AuditEvent {
	i := sort.Search(len(evs), func(i int) bool { return evs[i].ID > after })
	j := sort.Search(len(evs), func(j int) bool { return evs[j].ID >= before })
	if j < i {
		return nil
	}
	return evs[i:j]
}
