package tollgate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-rl/tollgate/model"
)

// nsEntry is the limiter's namespace resolved to its id (or to the error
// that it does not exist or is deleted), until expires (Unix nanoseconds).
type nsEntry struct {
	id      string
	err     error
	expires int64
}

// namespaceID resolves the limiter's namespace to the opaque id that
// prefixes its data, caching it for the cache TTL. The default namespace is
// registered on first use; any other must have been registered.
func (l *Limiter) namespaceID(ctx context.Context, now int64) (string, error) {
	if e := l.nsCache.Load(); e != nil && e.expires > now {
		return e.id, e.err
	}
	n, err := l.store.GetNamespace(ctx, l.ns)
	if errors.Is(err, model.ErrNamespaceNotFound) && l.ns == model.DefaultNamespace {
		n, err = createNamespace(ctx, l.store, l.ns, l.clock.Now())
		if errors.Is(err, model.ErrNamespaceExists) { // registered concurrently
			n, err = l.store.GetNamespace(ctx, l.ns)
		}
	}
	e := &nsEntry{id: n.ID, expires: now + int64(l.cache.ttl)}
	switch {
	case errors.Is(err, model.ErrNamespaceNotFound):
		e.err = fmt.Errorf("namespace %q: %w", l.ns, model.ErrNamespaceNotFound)
	case err != nil:
		return "", storeErr(ctx, "resolve namespace", l.ns, err)
	case n.Deleted():
		e.err = fmt.Errorf("namespace %q: %w", l.ns, model.ErrNamespaceDeleted)
	}
	if l.cache.ttl > 0 {
		l.nsCache.Store(e)
	}
	return e.id, e.err
}

// RegisterNamespace creates a namespace in the limiter's store, with a new
// opaque id. It fails with ErrNamespaceExists if the name is taken, even by
// a deleted namespace.
func (l *Limiter) RegisterNamespace(ctx context.Context, name string) (Namespace, error) {
	if err := model.ValidateNamespace(name); err != nil {
		return Namespace{}, err
	}
	n, err := createNamespace(ctx, l.store, name, l.clock.Now())
	if err != nil {
		return Namespace{}, storeErr(ctx, "register namespace", name, err)
	}
	return n, nil
}

// GetNamespace returns the named namespace of the limiter's store.
func (l *Limiter) GetNamespace(ctx context.Context, name string) (Namespace, error) {
	if err := model.ValidateNamespace(name); err != nil {
		return Namespace{}, err
	}
	n, err := l.store.GetNamespace(ctx, name)
	return n, storeErr(ctx, "get namespace", name, err)
}

// ListNamespaces returns every namespace of the limiter's store, deleted ones
// included, sorted by name.
func (l *Limiter) ListNamespaces(ctx context.Context) ([]Namespace, error) {
	ns, err := l.store.ListNamespaces(ctx)
	return ns, storeErr(ctx, "list namespaces", "", err)
}

// DeleteNamespace soft-deletes a namespace: limiters using it fail with
// ErrNamespaceDeleted (within their cache TTL), and its data stays until
// PurgeNamespace. RecoverNamespace undoes it.
func (l *Limiter) DeleteNamespace(ctx context.Context, name string) error {
	return l.setNamespaceDeleted(ctx, name, l.clock.Now().UTC().Truncate(time.Millisecond))
}

// RecoverNamespace undoes DeleteNamespace.
func (l *Limiter) RecoverNamespace(ctx context.Context, name string) error {
	return l.setNamespaceDeleted(ctx, name, time.Time{})
}

func (l *Limiter) setNamespaceDeleted(ctx context.Context, name string, at time.Time) error {
	if err := model.ValidateNamespace(name); err != nil {
		return err
	}
	if err := l.store.SetNamespaceDeleted(ctx, name, at); err != nil {
		return storeErr(ctx, "update namespace", name, err)
	}
	if name == l.ns {
		l.nsCache.Store(nil)
	}
	return nil
}

// PurgeNamespace deletes every item of a soft-deleted namespace, then the
// namespace itself. progress, if not nil, is told how many items are gone.
func (l *Limiter) PurgeNamespace(ctx context.Context, name string, progress func(deleted int)) error {
	n, err := l.GetNamespace(ctx, name)
	if err != nil {
		return err
	}
	if !n.Deleted() {
		return model.Invalid("namespace", name, "only a deleted namespace can be purged; delete it first")
	}
	if err := l.store.PurgeNamespace(ctx, name, progress); err != nil {
		return storeErr(ctx, "purge namespace", name, err)
	}
	if name == l.ns {
		l.nsCache.Store(nil)
	}
	return nil
}
