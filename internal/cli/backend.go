package cli

import (
	"context"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store"
)

// backend is what the operator commands need, served either by a limiter
// over a store (--store) or by a server through the client (--server).
type backend interface {
	// AcquireCommit acquires and commits at once: a command-line process
	// cannot hold a lease.
	AcquireCommit(ctx context.Context, entity, resource string, consume tollgate.Consume, limits []tollgate.Limit) ([]tollgate.Status, error)
	Available(ctx context.Context, entity, resource string, limits []tollgate.Limit) ([]tollgate.Status, error)

	CreateEntity(ctx context.Context, e tollgate.Entity) (tollgate.Entity, error)
	GetEntity(ctx context.Context, id string) (tollgate.Entity, error)
	DeleteEntity(ctx context.Context, id string) error
	Children(ctx context.Context, id string) ([]tollgate.Entity, error)
	ListEntities(ctx context.Context, after string, limit int) ([]tollgate.Entity, error)
	// UpdateEntity replaces the entity's name, parent, cascade flag and
	// metadata (tollgate.Limiter.UpdateEntity).
	UpdateEntity(ctx context.Context, e tollgate.Entity) (tollgate.Entity, error)

	SetConfig(ctx context.Context, scope tollgate.Scope, cfg tollgate.Config) error
	GetConfig(ctx context.Context, scope tollgate.Scope) (tollgate.Config, error)
	DeleteConfig(ctx context.Context, scope tollgate.Scope) error
	// ListConfigs pages the stored configs (tollgate.Limiter.ListConfigs).
	ListConfigs(ctx context.Context, after *tollgate.Scope, limit int) ([]tollgate.ScopedConfig, error)

	AuditEvents(ctx context.Context, entity, after string, limit int) ([]tollgate.AuditEvent, error)
	Usage(ctx context.Context, q tollgate.UsageQuery) ([]tollgate.Usage, string, error)
	UsageSummary(ctx context.Context, q tollgate.UsageQuery) (tollgate.UsageSummary, error)
	Capacity(ctx context.Context, resource string) (tollgate.ResourceCapacity, error)

	// Reserve reserves id as an acquire with tollgate.WithReservation
	// (and the limits, and an expiry unless 0), and returns the
	// reservation as the store has it.
	Reserve(ctx context.Context, entity, resource, id string, consume tollgate.Consume, limits []tollgate.Limit, expiry time.Duration) (tollgate.Reservation, error)
	// Release releases a reservation (tollgate.Limiter.Release); the
	// events command passes the trigger of each release.
	Release(ctx context.Context, id string, opts ...tollgate.WriteOption) error
	Reservations(ctx context.Context, entity, resource, after string, limit int) ([]tollgate.Reservation, string, error)
	Leases(ctx context.Context, entity, resource, after string, limit int) ([]tollgate.LeaseInfo, string, error)
	Penalize(ctx context.Context, entity, resource string, until time.Time, reason string, limits []string) error
	// Reset refills limits of a bucket (tollgate.Limiter.Reset).
	Reset(ctx context.Context, entity, resource, reason string, limits []string) error

	// CreateKey, Keys and RevokeKey manage the stored API keys of the
	// namespace (tollgate.Registry.CreateKey).
	CreateKey(ctx context.Context, spec tollgate.KeySpec) (string, tollgate.Key, error)
	Keys(ctx context.Context, after string, limit int) ([]tollgate.Key, error)
	RevokeKey(ctx context.Context, name string) error

	RegisterNamespace(ctx context.Context, name string) (tollgate.Namespace, error)
	ListNamespaces(ctx context.Context) ([]tollgate.Namespace, error)
	GetNamespace(ctx context.Context, name string) (tollgate.Namespace, error)
	DeleteNamespace(ctx context.Context, name string) error
	RecoverNamespace(ctx context.Context, name string) error
	PurgeNamespace(ctx context.Context, name string, progress func(deleted int)) error

	Close() error
}

// open returns the backend the global flags name.
func (g *globals) open(ctx context.Context) (backend, error) {
	if g.server != "" {
		return g.openRemote()
	}
	st, closeStore, err := g.openStore(ctx, true)
	if err != nil {
		return nil, err
	}
	// Acquires made here count in usage like the server's: recorded, and
	// written when the command ends.
	retention, err := envRetention()
	if err != nil {
		_ = closeStore()
		return nil, err
	}
	base := st
	st, stopRecording := recordUsage(st, g.log, retention)
	lim, err := tollgate.New(st, tollgate.WithNamespace(g.namespace))
	var reg *tollgate.Registry
	if err == nil {
		reg, err = tollgate.NewRegistry(st)
	}
	if err != nil {
		stopRecording()
		_ = closeStore()
		return nil, err
	}
	return &local{Limiter: lim, localRegistry: localRegistry{reg}, close: func() error { stopRecording(); return closeStore() }, principal: principal(), store: base}, nil
}

// local is a backend over a store, in this process.
type local struct {
	*tollgate.Limiter
	localRegistry
	close     func() error
	principal string
	// store is the store under the limiter, for what only some stores
	// tell (whether an aggregator runs on a DynamoDB table).
	store store.Store
}

// localRegistry serves the namespace commands of a local backend under the
// names the client (and so the backend interface) gives them.
type localRegistry struct{ reg *tollgate.Registry }

func (r localRegistry) RegisterNamespace(ctx context.Context, name string) (tollgate.Namespace, error) {
	return r.reg.Register(ctx, name)
}

func (r localRegistry) ListNamespaces(ctx context.Context) ([]tollgate.Namespace, error) {
	return r.reg.List(ctx)
}

func (r localRegistry) GetNamespace(ctx context.Context, name string) (tollgate.Namespace, error) {
	return r.reg.Get(ctx, name)
}

func (r localRegistry) DeleteNamespace(ctx context.Context, name string) error {
	return r.reg.Delete(ctx, name)
}

func (r localRegistry) RecoverNamespace(ctx context.Context, name string) error {
	return r.reg.Recover(ctx, name)
}

func (r localRegistry) PurgeNamespace(ctx context.Context, name string, progress func(deleted int)) error {
	return r.reg.Purge(ctx, name, progress)
}

func (l *local) who() []tollgate.WriteOption {
	return []tollgate.WriteOption{tollgate.WithPrincipal(l.principal)}
}

func (l *local) AcquireCommit(ctx context.Context, entity, resource string, consume tollgate.Consume, limits []tollgate.Limit) ([]tollgate.Status, error) {
	var opts []tollgate.AcquireOption
	if len(limits) > 0 {
		opts = append(opts, tollgate.WithLimits(limits...))
	}
	le, err := l.Acquire(ctx, entity, resource, consume, opts...)
	if err != nil {
		return nil, err
	}
	sts := le.Statuses()
	return sts, le.Commit(ctx)
}

func (l *local) Available(ctx context.Context, entity, resource string, limits []tollgate.Limit) ([]tollgate.Status, error) {
	var opts []tollgate.AcquireOption
	if len(limits) > 0 {
		opts = append(opts, tollgate.WithLimits(limits...))
	}
	return l.Limiter.Available(ctx, entity, resource, opts...)
}

func (l *local) CreateEntity(ctx context.Context, e tollgate.Entity) (tollgate.Entity, error) {
	return l.Limiter.CreateEntity(ctx, e, l.who()...)
}

func (l *local) UpdateEntity(ctx context.Context, e tollgate.Entity) (tollgate.Entity, error) {
	return l.Limiter.UpdateEntity(ctx, e, l.who()...)
}

func (l *local) DeleteEntity(ctx context.Context, id string) error {
	return l.Limiter.DeleteEntity(ctx, id, l.who()...)
}

func (l *local) SetConfig(ctx context.Context, scope tollgate.Scope, cfg tollgate.Config) error {
	return l.Limiter.SetConfig(ctx, scope, cfg, l.who()...)
}

func (l *local) DeleteConfig(ctx context.Context, scope tollgate.Scope) error {
	return l.Limiter.DeleteConfig(ctx, scope, l.who()...)
}

// Reserve acquires with the reservation, then reads it back: the lease
// needs no ending here, the reservation lasting until released.
func (l *local) Reserve(ctx context.Context, entity, resource, id string, consume tollgate.Consume, limits []tollgate.Limit, expiry time.Duration) (tollgate.Reservation, error) {
	opts := []tollgate.AcquireOption{tollgate.WithReservation(id), tollgate.WithAudit(l.who()...)}
	if len(limits) > 0 {
		opts = append(opts, tollgate.WithLimits(limits...))
	}
	if expiry != 0 {
		opts = append(opts, tollgate.WithLeaseExpiry(expiry))
	}
	if _, err := l.Acquire(ctx, entity, resource, consume, opts...); err != nil {
		return tollgate.Reservation{}, err
	}
	return l.Reservation(ctx, id)
}

func (l *local) Reset(ctx context.Context, entity, resource, reason string, limits []string) error {
	return l.Limiter.Reset(ctx, entity, resource, reason, limits, l.who()...)
}

func (l *local) CreateKey(ctx context.Context, spec tollgate.KeySpec) (string, tollgate.Key, error) {
	return l.reg.CreateKey(ctx, l.Namespace(), spec, l.who()...)
}

func (l *local) Keys(ctx context.Context, after string, limit int) ([]tollgate.Key, error) {
	return l.reg.Keys(ctx, l.Namespace(), after, limit)
}

func (l *local) RevokeKey(ctx context.Context, name string) error {
	return l.reg.RevokeKey(ctx, l.Namespace(), name, l.who()...)
}

// Release releases as the operator (principal, see who), with the
// caller's options after, which may name the event it was made on.
func (l *local) Release(ctx context.Context, id string, opts ...tollgate.WriteOption) error {
	return l.Limiter.Release(ctx, id, append(l.who(), opts...)...)
}

func (l *local) Penalize(ctx context.Context, entity, resource string, until time.Time, reason string, limits []string) error {
	return l.Limiter.Penalize(ctx, entity, resource, until, reason, limits, l.who()...)
}

func (l *local) Close() error { return l.close() }
