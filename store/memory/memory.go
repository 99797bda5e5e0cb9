// Package memory is an in-process Tollgate backend for tests and for
// single-process services. State lives in maps and is lost when the process
// exits.
//
// Bucket state is split over 256 independently locked shards, so acquires on
// different keys proceed in parallel; an acquire that spans several buckets
// (cascade) locks their shards in index order, which makes it atomic and
// deadlock-free. Configuration, entities and audit events sit behind one
// read-write lock: they change rarely and the limiter caches them.
package memory

import (
	"context"
	"hash/maphash"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

const shardCount = 256

// Store is the memory backend. The zero value is not usable; call New.
type Store struct {
	seed   maphash.Seed
	shards [shardCount]shard

	mu       sync.RWMutex
	nss      map[string]*namespace      // by namespace id
	registry map[string]model.Namespace // by name

	usage usageTable
}

type shard struct {
	mu      sync.Mutex
	buckets map[bucketID]*store.Record
	// created counts buckets created since the last sweep (see record).
	created int
	_       [32]byte // keep neighbouring shards' locks off one cache line
}

type bucketID struct{ ns, entity, resource string }

type namespace struct {
	configs  map[model.Scope]model.Config
	entities map[string]model.Entity
	children map[string]map[string]struct{}
	audit    map[string][]model.AuditEvent // by entity, sorted by id
}

var _ store.Store = (*Store)(nil)

// New returns an empty memory store.
func New() *Store {
	s := &Store{seed: maphash.MakeSeed(), nss: make(map[string]*namespace), registry: make(map[string]model.Namespace)}
	for i := range s.shards {
		s.shards[i].buckets = make(map[bucketID]*store.Record)
	}
	return s
}

// shardOf spreads buckets by entity: one hash is enough, and an entity's
// buckets for several resources sharing a shard costs nothing.
func (s *Store) shardOf(id bucketID) int {
	return int(maphash.String(s.seed, id.entity) % shardCount)
}

// Consume implements store.Buckets.
func (s *Store) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if len(req.Buckets) == 1 {
		br := &req.Buckets[0]
		id := bucketID{ns, br.Key.Entity, br.Key.Resource}
		sh := &s.shards[s.shardOf(id)]
		sh.mu.Lock()
		rec := sh.record(id, req.Now)
		ok := store.Prepare(rec, br, req.Now)
		if ok {
			store.Debit(rec, br)
		}
		sh.maybeSweep(req.Now)
		sh.mu.Unlock()
		return ok, nil
	}

	var buf [model.MaxCascadeDepth]int
	idx := buf[:0]
	for i := range req.Buckets {
		k := req.Buckets[i].Key
		idx = append(idx, s.shardOf(bucketID{ns, k.Entity, k.Resource}))
	}
	var lockBuf [model.MaxCascadeDepth]int
	locked := append(lockBuf[:0], idx...)
	slices.Sort(locked)
	locked = slices.Compact(locked)
	for _, i := range locked {
		s.shards[i].mu.Lock()
	}
	defer func() {
		for _, i := range locked {
			s.shards[i].maybeSweep(req.Now)
			s.shards[i].mu.Unlock()
		}
	}()
	var recBuf [model.MaxCascadeDepth]*store.Record
	recs := recBuf[:0]
	ok := true
	for i := range req.Buckets {
		br := &req.Buckets[i]
		rec := s.shards[idx[i]].record(bucketID{ns, br.Key.Entity, br.Key.Resource}, req.Now)
		recs = append(recs, rec)
		if !store.Prepare(rec, br, req.Now) {
			ok = false
		}
	}
	if ok {
		for i := range req.Buckets {
			store.Debit(recs[i], &req.Buckets[i])
		}
	}
	return ok, nil
}

// record returns the bucket, creating an empty one; the caller holds sh.mu.
func (sh *shard) record(id bucketID, now int64) *store.Record {
	rec := sh.buckets[id]
	if rec == nil {
		rec = store.NewRecord(now)
		sh.buckets[id] = rec
		sh.created++
	}
	return rec
}

// minSweep keeps small shards from sweeping on every creation.
const minSweep = 64

// maybeSweep forgets idle buckets; the caller holds sh.mu and has finished
// the operation. A bucket that is full in every limit behaves exactly like
// one that does not exist (a missing bucket is created full), so it can be
// deleted without changing any answer. Once a shard has created as many
// buckets as it held at its last sweep, it deletes those full by now: memory
// stays proportional to the buckets in use, at an amortised constant cost
// per creation.
func (sh *shard) maybeSweep(now int64) {
	if sh.created <= max(len(sh.buckets)/2, minSweep) {
		return
	}
	for id, rec := range sh.buckets {
		if store.IsFull(rec, now) {
			delete(sh.buckets, id)
		}
	}
	sh.created = 0
}

// ApplyDeltas implements store.Buckets.
func (s *Store) ApplyDeltas(ctx context.Context, ns string, deltas []store.Delta) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Deltas of one bucket are consecutive (a lease lists its limits bucket
	// by bucket): look each bucket up once.
	for i := 0; i < len(deltas); {
		id := bucketID{ns, deltas[i].Key.Entity, deltas[i].Key.Resource}
		sh := &s.shards[s.shardOf(id)]
		sh.mu.Lock()
		rec := sh.buckets[id]
		for ; i < len(deltas) && deltas[i].Key == (store.BucketKey{Entity: id.entity, Resource: id.resource}); i++ {
			if rec != nil {
				store.ApplyDelta(rec, deltas[i])
			}
		}
		sh.mu.Unlock()
	}
	return nil
}

// ReadBuckets implements store.Buckets.
func (s *Store) ReadBuckets(ctx context.Context, ns string, keys []store.BucketKey) ([]*store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]*store.Record, len(keys))
	for i, k := range keys {
		id := bucketID{ns, k.Entity, k.Resource}
		sh := &s.shards[s.shardOf(id)]
		sh.mu.Lock()
		if rec := sh.buckets[id]; rec != nil {
			out[i] = rec.Clone()
		}
		sh.mu.Unlock()
	}
	return out, nil
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
		}
		s.nss[name] = n
	}
	return n
}

// GetConfigs implements store.Configs.
func (s *Store) GetConfigs(ctx context.Context, ns string, scopes []model.Scope) ([]*model.Config, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]*model.Config, len(scopes))
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := s.ns(ns, false)
	if n == nil {
		return out, nil
	}
	for i, sc := range scopes {
		if c, ok := n.configs[sc]; ok {
			c.Limits = slices.Clone(c.Limits)
			out[i] = &c
		}
	}
	return out, nil
}

// PutConfig implements store.Configs.
func (s *Store) PutConfig(ctx context.Context, ns string, scope model.Scope, cfg model.Config, ev model.AuditEvent) error {
	return s.update(ctx, ns, func(n *namespace) error {
		if _, ok := n.entities[scope.Entity]; scope.Entity != "" && !ok {
			return model.ErrEntityNotFound
		}
		cfg.Limits = slices.Clone(cfg.Limits)
		n.configs[scope] = cfg
		n.appendAudit(ev)
		return nil
	})
}

// DeleteConfig implements store.Configs.
func (s *Store) DeleteConfig(ctx context.Context, ns string, scope model.Scope, ev model.AuditEvent) error {
	return s.update(ctx, ns, func(n *namespace) error {
		if _, ok := n.configs[scope]; !ok {
			return model.ErrNotFound
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
			kids := n.children[e.ParentID]
			if kids == nil {
				kids = make(map[string]struct{})
				n.children[e.ParentID] = kids
			}
			kids[e.ID] = struct{}{}
		}
		e.Metadata = cloneMap(e.Metadata)
		n.entities[e.ID] = e
		n.appendAudit(ev)
		return nil
	})
}

// GetEntity implements store.Entities.
func (s *Store) GetEntity(ctx context.Context, ns, id string) (model.Entity, error) {
	if err := ctx.Err(); err != nil {
		return model.Entity{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if n := s.ns(ns, false); n != nil {
		if e, ok := n.entities[id]; ok {
			e.Metadata = cloneMap(e.Metadata)
			return e, nil
		}
	}
	return model.Entity{}, model.ErrEntityNotFound
}

// DeleteEntity implements store.Entities.
func (s *Store) DeleteEntity(ctx context.Context, ns, id string, ev model.AuditEvent) error {
	return s.update(ctx, ns, func(n *namespace) error {
		e, ok := n.entities[id]
		if !ok {
			return model.ErrEntityNotFound
		}
		delete(n.entities, id)
		if kids := n.children[e.ParentID]; kids != nil {
			delete(kids, id)
			if len(kids) == 0 {
				delete(n.children, e.ParentID)
			}
		}
		for sc := range n.configs {
			if sc.Entity == id {
				delete(n.configs, sc)
			}
		}
		for i := range s.shards {
			sh := &s.shards[i]
			sh.mu.Lock()
			for bid := range sh.buckets {
				if bid.ns == ns && bid.entity == id {
					delete(sh.buckets, bid)
				}
			}
			sh.mu.Unlock()
		}
		s.usage.drop(func(u usageID) bool { return u.ns == ns && u.key.Entity == id })
		n.appendAudit(ev)
		return nil
	})
}

// ListChildren implements store.Entities.
func (s *Store) ListChildren(ctx context.Context, ns, id string) ([]model.Entity, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := s.ns(ns, false)
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
}

// ListAudit implements store.Audit.
func (s *Store) ListAudit(ctx context.Context, ns, entity, after string, limit int) ([]model.AuditEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := s.ns(ns, false)
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
}

// update runs f on the namespace (created if need be) under the write lock,
// unless ctx is already done.
func (s *Store) update(ctx context.Context, ns string, f func(n *namespace) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return f(s.ns(ns, true))
}

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
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.registry[name]
	if !ok {
		return model.ErrNamespaceNotFound
	}
	n.DeletedAt = at
	s.registry[name] = n
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
		deleted += len(data.configs) + len(data.entities)
		for _, evs := range data.audit {
			deleted += len(evs)
		}
		delete(s.nss, n.ID)
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for bid := range sh.buckets {
			if bid.ns == n.ID {
				delete(sh.buckets, bid)
				deleted++
			}
		}
		sh.mu.Unlock()
	}
	deleted += s.usage.drop(func(id usageID) bool { return id.ns == n.ID })
	delete(s.registry, name)
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
