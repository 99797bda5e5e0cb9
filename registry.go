package tollgate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// A Registry manages the namespaces of a store: it registers, lists,
// soft-deletes, recovers and purges them, and the API keys of each
// (CreateKey, Keys, RevokeKey, LookupKey). It is not bound to any namespace;
// a Limiter works in one (see WithNamespace). It is safe for concurrent use.
//
// A Limiter caches its namespace's id, or the error that the namespace does
// not exist or is deleted, for its cache TTL: it sees a change made through
// a Registry within that TTL, or at once after Limiter.InvalidateCache.
type Registry struct {
	store    store.Store
	clock    clock.Clock
	eventIDs eventIDs
}

// RegistryOption configures a Registry.
type RegistryOption func(*Registry)

// WithRegistryClock replaces the wall clock that stamps registrations and
// deletions, for tests (see clock.Fake).
func WithRegistryClock(c clock.Clock) RegistryOption { return func(r *Registry) { r.clock = c } }

// NewRegistry returns a Registry over the namespaces of s.
func NewRegistry(s store.Store, opts ...RegistryOption) (*Registry, error) {
	if s == nil {
		return nil, model.Invalid("store", "nil", "a store is required")
	}
	r := &Registry{store: s, clock: clock.Real{}}
	for _, o := range opts {
		o(r)
	}
	if r.clock == nil {
		return nil, model.Invalid("clock", "nil", "a clock is required")
	}
	return r, nil
}

// Register creates namespace name with a new opaque id. It fails with
// ErrNamespaceExists if the name is taken, even by a deleted namespace.
func (r *Registry) Register(ctx context.Context, name string) (Namespace, error) {
	if err := model.ValidateNamespace(name); err != nil {
		return Namespace{}, err
	}
	n, err := createNamespace(ctx, r.store, name, r.clock.Now())
	if err != nil {
		return Namespace{}, storeErr(ctx, "register namespace", name, err)
	}
	return n, nil
}

// Get returns the named namespace, deleted or not, or an error matching
// ErrNamespaceNotFound.
func (r *Registry) Get(ctx context.Context, name string) (Namespace, error) {
	if err := model.ValidateNamespace(name); err != nil {
		return Namespace{}, err
	}
	n, err := r.store.GetNamespace(ctx, name)
	return n, storeErr(ctx, "get namespace", name, err)
}

// List returns every namespace, deleted ones included, sorted by name.
func (r *Registry) List(ctx context.Context) ([]Namespace, error) {
	ns, err := r.store.ListNamespaces(ctx)
	return ns, storeErr(ctx, "list namespaces", "", err)
}

// Delete soft-deletes a namespace: limiters using it fail with
// ErrNamespaceDeleted (within their cache TTL), and its data stays until
// Purge. Recover undoes it.
func (r *Registry) Delete(ctx context.Context, name string) error {
	return r.setDeleted(ctx, name, r.clock.Now().UTC().Truncate(time.Millisecond))
}

// Recover undoes Delete.
func (r *Registry) Recover(ctx context.Context, name string) error {
	return r.setDeleted(ctx, name, time.Time{})
}

// setDeleted marks the namespace deleted at at, or not deleted if at is zero.
func (r *Registry) setDeleted(ctx context.Context, name string, at time.Time) error {
	if err := model.ValidateNamespace(name); err != nil {
		return err
	}
	return storeErr(ctx, "update namespace", name, r.store.SetNamespaceDeleted(ctx, name, at))
}

// Purge deletes every item of a soft-deleted namespace, then the namespace
// itself; a namespace not deleted first is refused with an error matching
// ErrInvalid. progress, if not nil, is told how many items are gone.
func (r *Registry) Purge(ctx context.Context, name string, progress func(deleted int)) error {
	n, err := r.Get(ctx, name)
	if err != nil {
		return err
	}
	if !n.Deleted() {
		return model.Invalid("namespace", name, "only a deleted namespace can be purged; delete it first")
	}
	return storeErr(ctx, "purge namespace", name, r.store.PurgeNamespace(ctx, name, progress))
}

// createNamespace creates namespace name in s with a new random opaque id,
// created at now. Registry.Register and a Limiter's first use of the
// default namespace share it.
func createNamespace(ctx context.Context, s store.Store, name string, now time.Time) (Namespace, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	n := model.Namespace{Name: name, ID: hex.EncodeToString(b[:]), CreatedAt: now.UTC().Truncate(time.Millisecond)}
	return n, s.CreateNamespace(ctx, n)
}
