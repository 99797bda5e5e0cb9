package tollgate

import (
	"context"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store"
)

// A Registry manages the namespaces of a store and their API keys.
//
// Deprecated: use an Admin, which manages namespaces under the names the
// Go client and the HTTP API give them (RegisterNamespace, ...) and the
// keys of its own namespace. Registry remains for one release.
type Registry struct {
	store store.Store
	opts  []Option
	adm   *Admin
}

// RegistryOption configures a Registry.
//
// Deprecated: NewAdmin takes Option.
type RegistryOption = Option

// WithRegistryClock replaces the wall clock, for tests.
//
// Deprecated: use WithClock.
func WithRegistryClock(c clock.Clock) RegistryOption { return WithClock(c) }

// NewRegistry returns a Registry over the namespaces of s.
//
// Deprecated: use NewAdmin.
func NewRegistry(s store.Store, opts ...RegistryOption) (*Registry, error) {
	adm, err := NewAdmin(s, opts...)
	if err != nil {
		return nil, err
	}
	return &Registry{store: s, opts: opts, adm: adm}, nil
}

// Register is Admin.RegisterNamespace.
//
// Deprecated: use Admin.RegisterNamespace.
func (r *Registry) Register(ctx context.Context, name string) (Namespace, error) {
	return r.adm.RegisterNamespace(ctx, name)
}

// Get is Admin.GetNamespace.
//
// Deprecated: use Admin.GetNamespace.
func (r *Registry) Get(ctx context.Context, name string) (Namespace, error) {
	return r.adm.GetNamespace(ctx, name)
}

// List is Admin.ListNamespaces.
//
// Deprecated: use Admin.ListNamespaces.
func (r *Registry) List(ctx context.Context) ([]Namespace, error) { return r.adm.ListNamespaces(ctx) }

// Delete is Admin.DeleteNamespace.
//
// Deprecated: use Admin.DeleteNamespace.
func (r *Registry) Delete(ctx context.Context, name string) error {
	return r.adm.DeleteNamespace(ctx, name)
}

// Recover is Admin.RecoverNamespace.
//
// Deprecated: use Admin.RecoverNamespace.
func (r *Registry) Recover(ctx context.Context, name string) error {
	return r.adm.RecoverNamespace(ctx, name)
}

// Purge is Admin.PurgeNamespace.
//
// Deprecated: use Admin.PurgeNamespace.
func (r *Registry) Purge(ctx context.Context, name string, progress func(deleted int)) error {
	return r.adm.PurgeNamespace(ctx, name, progress)
}

// CreateKey is Admin.CreateKey of an Admin of namespace ns.
//
// Deprecated: use Admin.CreateKey.
func (r *Registry) CreateKey(ctx context.Context, ns string, spec KeySpec, opts ...WriteOption) (secret string, k Key, err error) {
	a, err := r.in(ns)
	if err != nil {
		return "", Key{}, err
	}
	return a.CreateKey(ctx, spec, opts...)
}

// Keys is Admin.Keys of an Admin of namespace ns.
//
// Deprecated: use Admin.Keys.
func (r *Registry) Keys(ctx context.Context, ns, after string, limit int) ([]Key, error) {
	a, err := r.in(ns)
	if err != nil {
		return nil, err
	}
	return a.Keys(ctx, after, limit)
}

// RevokeKey is Admin.RevokeKey of an Admin of namespace ns.
//
// Deprecated: use Admin.RevokeKey.
func (r *Registry) RevokeKey(ctx context.Context, ns, name string, opts ...WriteOption) error {
	a, err := r.in(ns)
	if err != nil {
		return err
	}
	return a.RevokeKey(ctx, name, opts...)
}

// LookupKey is Admin.LookupKey.
//
// Deprecated: use Admin.LookupKey.
func (r *Registry) LookupKey(ctx context.Context, hash string) (Key, error) {
	return r.adm.LookupKey(ctx, hash)
}

// in returns an Admin of namespace ns sharing the registry's watch.
func (r *Registry) in(ns string) (*Admin, error) {
	return NewAdmin(r.store, append(r.opts[:len(r.opts):len(r.opts)], WithNamespace(ns), WithChangeWatch(r.adm.changes))...)
}
