package server

import (
	"context"
	"fmt"
	"maps"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
)

// The two planes a request works through (docs/architecture.md, "Two
// planes"): the handlers depend on these interfaces, which the library's
// Limiter and Admin satisfy, not on the library's types.

// limiter is the data plane of a request's namespace: model.Acquirer, as
// the library and the Go client share it, and what the server asks before
// it lets a caller act (Check, Within, UnavailableMode).
type limiter interface {
	model.Acquirer[*tollgate.Lease]
	Check(ctx context.Context, entity, resource string, consume model.Consume, opts ...model.AcquireOption) (*model.RateLimitExceeded, error)
	Within(ctx context.Context, entity, root string) (bool, error)
	UnavailableMode(ctx context.Context) model.OnUnavailable
}

// admin is the control plane: of a request's namespace for the entity,
// limits, keys, audit, usage and listing routes, of every namespace for
// the namespace routes.
type admin = model.Administrator

// keyAdmin is the server's own admin, which serves the namespace routes
// and looks up the stored key of a request's secret in any namespace.
type keyAdmin interface {
	admin
	LookupKey(ctx context.Context, hash string) (model.Key, error)
}

var (
	_ limiter  = (*tollgate.Limiter)(nil)
	_ keyAdmin = (*tollgate.Admin)(nil)
)

// planes are the limiter and the admin of one namespace, which share the
// server's change watch: a change made through the admin is in force in
// the limiter at its next call.
type planes struct {
	lim *tollgate.Limiter
	adm *tollgate.Admin
}

// maxNamespaces bounds the namespaces whose planes a server keeps, one per
// namespace in use: beyond it, one at random is dropped (its caches go
// with it) to make room.
const maxNamespaces = 4096

// Limiter returns the limiter of namespace ns, creating it on first use.
// It creates none for a namespace that is not registered (the default
// namespace aside, which the limiter registers on first use), or is
// deleted: whatever names callers send, the server holds limiters only for
// namespaces that exist, at most 4096.
func (s *Server) Limiter(ctx context.Context, ns string) (*tollgate.Limiter, error) {
	p, err := s.planes(ctx, ns)
	if err != nil {
		return nil, err
	}
	return p.lim, nil
}

// planes returns the planes of namespace ns, as Limiter makes them.
func (s *Server) planes(ctx context.Context, ns string) (*planes, error) {
	s.mu.Lock()
	p, ok := s.namespaces[ns]
	s.mu.Unlock()
	if ok {
		return p, nil
	}
	if err := model.ValidateNamespace(ns); err != nil {
		return nil, err
	}
	if ns != model.DefaultNamespace {
		if err := s.namespaceExists(ctx, ns); err != nil {
			return nil, err
		}
	}
	opts := append([]tollgate.Option{tollgate.WithNamespace(ns), tollgate.WithClock(s.clock), tollgate.WithChangeWatch(s.watch)}, s.limOpts...)
	lim, err := tollgate.New(s.store, opts...)
	if err != nil {
		return nil, err
	}
	adm, err := tollgate.NewAdmin(s.store, opts...)
	if err != nil {
		return nil, err
	}
	p = &planes{lim: lim, adm: adm}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.namespaces[ns]; ok { // made concurrently
		return cur, nil
	}
	if len(s.namespaces) >= maxNamespaces {
		for other := range s.namespaces { // map order: one at random
			s.retireLocked(other)
			break
		}
	}
	s.namespaces[ns] = p
	return p, nil
}

// namespaceExists fails unless namespace ns is registered and not deleted.
func (s *Server) namespaceExists(ctx context.Context, ns string) error {
	n, err := s.admin.GetNamespace(ctx, ns)
	switch {
	case err != nil:
		return err
	case n.Deleted():
		return fmt.Errorf("namespace %q: %w", ns, model.ErrNamespaceDeleted)
	}
	return nil
}

// forget drops the planes of ns (after a namespace lookup failed, so
// unknown names do not accumulate, or after it was deleted or purged).
// A request still holding them sees the change through the change watch.
func (s *Server) forget(ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retireLocked(ns)
}

// retireLocked drops the planes of ns, keeping the limiter's cache
// statistics, shadow denials and decision counts; the caller holds s.mu.
func (s *Server) retireLocked(ns string) {
	if p, ok := s.namespaces[ns]; ok {
		st := p.lim.Stats()
		s.retired.Hits += st.Cache.Hits
		s.retired.Misses += st.Cache.Misses
		for _, c := range st.Shadow {
			if s.retiredShadow == nil {
				s.retiredShadow = make(map[shadowKey]uint64)
			}
			s.retiredShadow[shadowKey{ns, c.Resource, c.Limit}] += c.Count
		}
		if s.retiredDecisions == nil {
			s.retiredDecisions = make(map[shadowKey]tollgate.LimitDecisions)
		}
		addDecisions(s.retiredDecisions, ns, st.Decisions)
		s.retiredDeny += st.Deny.Served
		addAbandoned(&s.retiredAbandoned, st.Abandoned)
		delete(s.namespaces, ns)
	}
}

// limiterTotals are the statistics of every limiter, past and present
// (a dropped namespace's are kept in retired*), that /metrics exports.
type limiterTotals struct {
	cache      tollgate.CacheStats
	denyServed uint64
	abandoned  tollgate.AbandonStats
	shadow     map[shadowKey]uint64
	decisions  map[shadowKey]tollgate.LimitDecisions
}

// limiterTotals reads each namespace's limiter's Stats once (a scrape
// reads them all through one collector, limiterCollector: Stats copies
// and sorts its decision and top-denied lists, so it is not called again
// per metric family) and sums them with the retired limiters'.
func (s *Server) limiterTotals() limiterTotals {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := limiterTotals{cache: s.retired, denyServed: s.retiredDeny, abandoned: s.retiredAbandoned,
		shadow: maps.Clone(s.retiredShadow), decisions: maps.Clone(s.retiredDecisions)}
	if t.shadow == nil {
		t.shadow = make(map[shadowKey]uint64)
	}
	if t.decisions == nil {
		t.decisions = make(map[shadowKey]tollgate.LimitDecisions)
	}
	for name, p := range s.namespaces {
		st := p.lim.Stats()
		t.cache.Hits += st.Cache.Hits
		t.cache.Misses += st.Cache.Misses
		t.cache.Entries += st.Cache.Entries
		t.denyServed += st.Deny.Served
		addAbandoned(&t.abandoned, st.Abandoned)
		for _, c := range st.Shadow {
			t.shadow[shadowKey{name, c.Resource, c.Limit}] += c.Count
		}
		addDecisions(t.decisions, name, st.Decisions)
	}
	return t
}

// addAbandoned adds b's counts to a's.
func addAbandoned(a *tollgate.AbandonStats, b tollgate.AbandonStats) {
	a.Ended += b.Ended
	a.NotFound += b.NotFound
	a.Failed += b.Failed
	a.Dropped += b.Dropped
}

// shadowKey names a series of tollgate_shadow_denied_total.
type shadowKey struct{ namespace, resource, limit string }

// limiter returns the data plane of the request's namespace.
func (c *call) limiter(ctx context.Context) (limiter, error) {
	p, err := c.s.planes(ctx, c.ns)
	if err != nil {
		return nil, err
	}
	return p.lim, nil
}

// admin returns the control plane of the request's namespace.
func (c *call) admin(ctx context.Context) (admin, error) {
	p, err := c.s.planes(ctx, c.ns)
	if err != nil {
		return nil, err
	}
	return p.adm, nil
}
