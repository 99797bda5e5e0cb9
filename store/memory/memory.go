// Package memory is an in-process Tollgate backend for tests and for
// single-process services. State lives in maps and is lost when the process
// exits.
//
// Bucket state is split over 256 independently locked shards, so acquires on
// different keys proceed in parallel; an acquire that spans several buckets
// (cascade) locks their shards in index order, which makes it atomic and
// deadlock-free. That table (package store/internal/buckettable) is shared
// with the embedded backend; this one does not track changes for a flush.
// Configuration, entities and audit events sit behind one read-write lock:
// they change rarely and the limiter caches them.
package memory

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/internal/buckettable"
)

// Store is the memory backend. The zero value is not usable; call New.
type Store struct {
	buckets *buckettable.Table

	mu       sync.RWMutex
	nss      map[string]*namespace      // by namespace id
	registry map[string]model.Namespace // by name

	// keys holds the stored API keys by hash; each namespace lists its
	// own by name (namespace.keys).
	keys map[string]model.Key

	// gen is the change generation (store.Changes), raised under mu with
	// every successful change of the control plane.
	gen atomic.Uint64

	usage usageTable
	clock clock.Clock // for usage expiry only
}

type namespace struct {
	configs  map[model.Scope]model.Config
	entities map[string]model.Entity
	children map[string]map[string]struct{}
	audit    map[string][]model.AuditEvent // by entity, sorted by id
	// auditIDs is every event's id and entity, sorted by id: the
	// namespace's log by time (store.AuditLog, auditlog.go).
	auditIDs []auditRef
	keys     map[string]string // key name -> hash
}

var _ store.Store = (*Store)(nil)

// Option configures New.
type Option func(*Store)

// WithClock sets the clock that decides which usage snapshots have expired
// (store.UsageIncrement.Expires) and may be deleted; the system clock by
// default. Give the store the clock that dates the snapshots (the usage
// aggregator's), or a fake clock in the past keeps expired snapshots in
// memory (queries still hide them: store.UsageQuery.Now). Bucket state
// does not read it: every request carries its own time.
func WithClock(c clock.Clock) Option {
	return func(s *Store) { s.clock = c }
}

// New returns an empty memory store.
func New(opts ...Option) *Store {
	s := &Store{
		buckets:  buckettable.New(buckettable.Options{}),
		nss:      make(map[string]*namespace),
		registry: make(map[string]model.Namespace),
		keys:     make(map[string]model.Key),
		clock:    clock.Real{},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Consume implements store.Buckets.
func (s *Store) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if req.Event != nil {
		return s.consumeAudited(ns, req)
	}
	return s.buckets.Consume(ns, req) // never closed: no error
}

// ApplyDeltas implements store.Buckets.
func (s *Store) ApplyDeltas(ctx context.Context, ns string, deltas []store.Delta) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.buckets.ApplyDeltas(ns, deltas)
}

// ReadBuckets implements store.Buckets.
func (s *Store) ReadBuckets(ctx context.Context, ns string, keys []store.BucketKey) ([]*store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.buckets.Read(ns, keys), nil
}

// ns returns the namespace, creating it when create is set; the caller holds
// s.mu (for writing if create).
func (s *Store) ns(name string, create bool) *namespace {
	n := s.nss[name]
	if n == nil && create {
		n = &namespace{
			configs:  make(map[model.Scope]model.Config),
			entities: make(map[string]model.Entity),
			children: make(map[string]map[string]struct{}),
			audit:    make(map[string][]model.AuditEvent),
			keys:     make(map[string]string),
		}
		s.nss[name] = n
	}
	return n
}

// GetConfigs implements store.Configs.
func (s *Store) GetConfigs(ctx context.Context, ns string, scopes []model.Scope) ([]*model.Config, error) {
	return read(ctx, s, ns, func(n *namespace) ([]*model.Config, error) {
		out := make([]*model.Config, len(scopes))
		if n == nil {
			return out, nil
		}
		for i, sc := range scopes {
			if c, ok := n.configs[sc]; ok {
				c = c.Clone()
				out[i] = &c
			}
		}
		return out, nil
	})
}

// PutConfig implements store.Configs.
func (s *Store) PutConfig(ctx context.Context, ns string, scope model.Scope, cfg model.Config, ev model.AuditEvent, pre ...store.Precondition) error {
	return s.update(ctx, ns, func(n *namespace) error {
		if _, ok := n.entities[scope.Entity]; scope.Entity != "" && !ok {
			return model.ErrEntityNotFound
		}
		old := n.configs[scope] // version 0 where none is
		if err := store.CheckVersion(old.Version, pre); err != nil {
			return err
		}
		cfg = cfg.Clone()
		cfg.Version = old.Version + 1
		n.configs[scope] = cfg
		n.appendAudit(ev)
		return nil
	})
}

// DeleteConfig implements store.Configs.
func (s *Store) DeleteConfig(ctx context.Context, ns string, scope model.Scope, ev model.AuditEvent, pre ...store.Precondition) error {
	return s.update(ctx, ns, func(n *namespace) error {
		old, ok := n.configs[scope]
		if !ok {
			return model.ErrNotFound
		}
		if err := store.CheckVersion(old.Version, pre); err != nil {
			return err
		}
		delete(n.configs, scope)
		n.appendAudit(ev)
		return nil
	})
}

// CreateEntity implements store.Entities.
func (s *Store) CreateEntity(ctx context.Context, ns string, e model.Entity, ev model.AuditEvent) error {
	return s.update(ctx, ns, func(n *namespace) error {
		if _, ok := n.entities[e.ID]; ok {
			return model.ErrEntityExists
		}
		if e.ParentID != "" {
			if _, ok := n.entities[e.ParentID]; !ok {
				return model.ErrEntityNotFound
			}
			n.linkChild(e.ParentID, e.ID)
		}
		e.Metadata = cloneMap(e.Metadata)
		e.Version = 1
		n.entities[e.ID] = e
		n.appendAudit(ev)
		return nil
	})
}

// GetEntity implements store.Entities.
func (s *Store) GetEntity(ctx context.Context, ns, id string) (model.Entity, error) {
	return read(ctx, s, ns, func(n *namespace) (model.Entity, error) {
		if n != nil {
			if e, ok := n.entities[id]; ok {
				e.Metadata = cloneMap(e.Metadata)
				return e, nil
			}
		}
		return model.Entity{}, model.ErrEntityNotFound
	})
}

// DeleteEntity implements store.Entities.
func (s *Store) DeleteEntity(ctx context.Context, ns, id string, ev model.AuditEvent, pre ...store.Precondition) error {
	return s.update(ctx, ns, func(n *namespace) error {
		e, ok := n.entities[id]
		if !ok {
			return model.ErrEntityNotFound
		}
		if err := store.CheckVersion(e.Version, pre); err != nil {
			return err
		}
		delete(n.entities, id)
		n.unlinkChild(e.ParentID, id)
		for sc := range n.configs {
			if sc.Entity == id {
				delete(n.configs, sc)
			}
		}
		s.buckets.Delete(func(b buckettable.ID) bool { return b.NS == ns && b.Entity == id })
		s.usage.drop(func(u usageID) bool { return u.ns == ns && u.key.Entity == id })
		n.appendAudit(ev)
		return nil
	})
}

// ListChildren implements store.Entities.
func (s *Store) ListChildren(ctx context.Context, ns, id string) ([]model.Entity, error) {
	return read(ctx, s, ns, func(n *namespace) ([]model.Entity, error) {
		if n == nil {
			return nil, nil
		}
		out := make([]model.Entity, 0, len(n.children[id]))
		for kid := range n.children[id] {
			e := n.entities[kid]
			e.Metadata = cloneMap(e.Metadata)
			out = append(out, e)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		return out, nil
	})
}

// ListAudit implements store.Audit.
func (s *Store) ListAudit(ctx context.Context, ns, entity, after string, limit int) ([]model.AuditEvent, error) {
	return read(ctx, s, ns, func(n *namespace) ([]model.AuditEvent, error) {
		if n == nil {
			return nil, nil
		}
		evs := n.audit[entity]
		i := sort.Search(len(evs), func(i int) bool { return evs[i].ID > after })
		evs = evs[i:]
		if limit > 0 && len(evs) > limit {
			evs = evs[:limit]
		}
		out := make([]model.AuditEvent, len(evs))
		for i, ev := range evs {
			ev.Details = cloneMap(ev.Details)
			out[i] = ev
		}
		return out, nil
	})
}

// read returns what f reads of namespace ns under the read lock, unless
// ctx is already done. f gets nil for a namespace nothing was written to,
// which reads as empty.
func read[T any](ctx context.Context, s *Store, ns string, f func(n *namespace) (T, error)) (T, error) {
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return f(s.ns(ns, false))
}

// update runs f on the namespace (created if need be) under the write lock,
// unless ctx is already done, and raises the generation if f succeeds:
// every caller changes the control plane.
func (s *Store) update(ctx context.Context, ns string, f func(n *namespace) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := f(s.ns(ns, true)); err != nil {
		return err
	}
	s.gen.Add(1)
	return nil
}

// Generation implements store.Changes.
func (s *Store) Generation(context.Context) (uint64, error) { return s.gen.Load(), nil }

// LocalGeneration implements store.Changes: a memory store is this
// process's alone.
func (s *Store) LocalGeneration() bool { return true }

// CreateNamespace implements store.Namespaces.
func (s *Store) CreateNamespace(ctx context.Context, n model.Namespace) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.registry[n.Name]; ok {
		return model.ErrNamespaceExists
	}
	for _, other := range s.registry {
		if other.ID == n.ID {
			return model.ErrNamespaceExists
		}
	}
	s.registry[n.Name] = n
	s.gen.Add(1)
	return nil
}

// GetNamespace implements store.Namespaces.
func (s *Store) GetNamespace(ctx context.Context, name string) (model.Namespace, error) {
	if err := ctx.Err(); err != nil {
		return model.Namespace{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	n, ok := s.registry[name]
	if !ok {
		return model.Namespace{}, model.ErrNamespaceNotFound
	}
	return n, nil
}

// ListNamespaces implements store.Namespaces.
func (s *Store) ListNamespaces(ctx context.Context) ([]model.Namespace, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]model.Namespace, 0, len(s.registry))
	for _, n := range s.registry {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// SetNamespaceDeleted implements store.Namespaces.
func (s *Store) SetNamespaceDeleted(ctx context.Context, name string, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.updateNamespace(name, func(n *model.Namespace) { n.DeletedAt = at })
}

// updateNamespace applies change to the registration of name.
func (s *Store) updateNamespace(name string, change func(*model.Namespace)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.registry[name]
	if !ok {
		return model.ErrNamespaceNotFound
	}
	change(&n)
	s.registry[name] = n
	s.gen.Add(1)
	return nil
}

// PurgeNamespace implements store.Namespaces.
func (s *Store) PurgeNamespace(ctx context.Context, name string, progress func(int)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.registry[name]
	if !ok {
		return model.ErrNamespaceNotFound
	}
	deleted := 0
	if data := s.nss[n.ID]; data != nil {
		deleted += len(data.configs) + len(data.entities) + len(data.keys)
		for _, hash := range data.keys {
			delete(s.keys, hash)
		}
		for _, evs := range data.audit {
			deleted += len(evs)
		}
		delete(s.nss, n.ID)
	}
	deleted += s.buckets.Delete(func(b buckettable.ID) bool { return b.NS == n.ID })
	deleted += s.buckets.DeleteLeases(n.ID)
	deleted += s.usage.drop(func(id usageID) bool { return id.ns == n.ID })
	delete(s.registry, name)
	s.gen.Add(1)
	if progress != nil {
		progress(deleted)
	}
	return nil
}

// appendAudit inserts ev in id order; the caller holds s.mu for writing.
func (n *namespace) appendAudit(ev model.AuditEvent) {
	ev.Details = cloneMap(ev.Details)
	evs := n.audit[ev.Entity]
	i := sort.Search(len(evs), func(i int) bool { return strings.Compare(evs[i].ID, ev.ID) > 0 })
	n.audit[ev.Entity] = slices.Insert(evs, i, ev)
	j := sort.Search(len(n.auditIDs), func(j int) bool { return n.auditIDs[j].id > ev.ID })
	n.auditIDs = slices.Insert(n.auditIDs, j, auditRef{id: ev.ID, entity: ev.Entity})
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Penalize implements store.Buckets. The audit event is appended after
// the penalty; nothing can fail in between, so both happen.
func (s *Store) Penalize(ctx context.Context, ns string, req *store.PenaltyRequest) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.withEvent(ns, s.buckets.Penalize(ns, req), req.Event)
}

// Reset implements store.Buckets, as Penalize.
func (s *Store) Reset(ctx context.Context, ns string, req *store.ResetRequest) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.withEvent(ns, s.buckets.Reset(ns, req), req.Event)
}

// withEvent appends ev (if not nil) to the audit log of ns unless err,
// the outcome of the bucket change ev records, is not nil; it returns err.
func (s *Store) withEvent(ns string, err error, ev *model.AuditEvent) error {
	if err != nil || ev == nil {
		return err
	}
	s.mu.Lock()
	s.ns(ns, true).appendAudit(*ev)
	s.mu.Unlock()
	return nil
}
