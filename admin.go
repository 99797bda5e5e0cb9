package tollgate

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// An Admin is the control plane of one namespace, as a Limiter is its data
// plane: it changes what limits act on (entities, stored limits, API keys,
// the namespaces themselves), reads what they did (audit events, usage,
// capacity, leases and reservations held) and resets buckets. It
// satisfies model.Administrator, as the Go client (client.Client) does, so
// that a tool written against that interface runs in process or through a
// server.
//
// An Admin tells the limiters of this process that follow its change
// watch (WithChangeWatch) about each change it makes: they drop what they
// cache at their next call. Limiters elsewhere see it within their refresh
// interval (see ChangeWatch); over a store only this process uses
// (memory, embedded), every limiter sees it at once.
//
// An Admin is safe for concurrent use; it holds no more than its
// namespace's id, so make one per namespace, for as long as convenient.
type Admin struct {
	store   store.Store
	ns      string
	clock   clock.Clock
	ttl     time.Duration
	changes *ChangeWatch
	// nsCache is the namespace resolved to its id, valid while the change
	// generation stays what it was when resolved, at most ttl.
	nsCache atomic.Pointer[nsEntry]
}

var _ model.Administrator = (*Admin)(nil)

// NewAdmin returns an Admin over s. It takes the options New takes, so
// that a limiter and an admin can be made from one list: WithNamespace,
// WithClock, WithCacheTTL, WithRefreshInterval and WithChangeWatch apply
// to it, the options of acquires do not.
func NewAdmin(s store.Store, opts ...Option) (*Admin, error) {
	o, err := newOptions(s, opts)
	if err != nil {
		return nil, err
	}
	return &Admin{store: s, ns: o.ns, clock: o.clock, ttl: o.cacheTTL, changes: o.changes}, nil
}

// Namespace returns the namespace the admin works in.
func (a *Admin) Namespace() string { return a.ns }

// changed tells the limiters following the admin's change watch of a
// change in its namespace; mode, unless nil, is the unavailable mode it
// left at the system scope.
func (a *Admin) changed(mode *model.OnUnavailable) { a.changes.changed(a.ns, mode) }

// namespaceID resolves the admin's namespace to the opaque id that
// prefixes its data, as Limiter.namespaceID does; the id is reused while
// no change is seen, for at most the cache TTL.
func (a *Admin) namespaceID(ctx context.Context) (string, error) {
	e, err := a.namespace(ctx)
	if err != nil {
		return "", err
	}
	return e.id, e.err
}

// namespace is namespaceID's entry, with the namespace's audit retention
// (the entry's err is the caller's to check).
func (a *Admin) namespace(ctx context.Context) (*nsEntry, error) {
	now := nanoOf(a.clock.Now())
	gen := a.changes.Generation(ctx)
	if e := a.nsCache.Load(); e != nil && e.gen == gen && e.expires > now {
		return e, nil
	}
	e, err := resolveNamespace(ctx, a.store, a.ns, a.clock.Now())
	if err != nil {
		return nil, err
	}
	e.gen, e.expires = gen, now.add(a.ttl)
	if a.ttl > 0 {
		a.nsCache.Store(e)
	}
	return e, nil
}

// nsEntry is a namespace resolved to its id, or to the error that it does
// not exist or is deleted (err), until expires; gen is the change
// generation it was resolved under (Admin); created reports that the
// resolution registered the namespace.
type nsEntry struct {
	id      string
	err     error
	expires unixNano
	gen     uint64
	created bool
	// retention is the namespace's AuditRetention (0: forever).
	retention time.Duration
}

// resolveNamespace resolves namespace name of s to its id, registering
// the default namespace, at now, on its first use (any other must have
// been registered). A namespace that does not exist or is deleted is an
// entry holding that error; a store failure is the error returned.
func resolveNamespace(ctx context.Context, s store.Store, name string, now time.Time) (*nsEntry, error) {
	e := &nsEntry{}
	n, err := s.GetNamespace(ctx, name)
	if errors.Is(err, model.ErrNamespaceNotFound) && name == model.DefaultNamespace {
		n, err = createNamespace(ctx, s, name, now)
		if errors.Is(err, model.ErrNamespaceExists) { // registered concurrently
			n, err = s.GetNamespace(ctx, name)
		}
		e.created = true
	}
	e.id, e.retention = n.ID, n.AuditRetention
	switch {
	case errors.Is(err, model.ErrNamespaceNotFound):
		e.err = fmt.Errorf("namespace %q: %w", name, model.ErrNamespaceNotFound)
	case err != nil:
		return nil, storeErr(ctx, "resolve namespace", name, err)
	case n.Deleted():
		e.err = fmt.Errorf("namespace %q: %w", name, model.ErrNamespaceDeleted)
	}
	return e, nil
}
