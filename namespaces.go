package tollgate

import (
	"context"
	"errors"
	"fmt"

	"github.com/tollgate-rl/tollgate/model"
)

// nsEntry is the limiter's namespace resolved to its id (or to the error
// that it does not exist or is deleted), until expires.
type nsEntry struct {
	id      string
	err     error
	expires unixNano
}

// namespaceID resolves the limiter's namespace to the opaque id that
// prefixes its data, caching it for the cache TTL. The default namespace is
// registered on first use; any other must have been registered.
func (l *Limiter) namespaceID(ctx context.Context, now unixNano) (string, error) {
	l.observeChanges(ctx)
	if e := l.nsCache.Load(); e != nil && e.expires > now {
		return e.id, e.err
	}
	epoch := l.cache.epoch.Load()
	n, err := l.store.GetNamespace(ctx, l.ns)
	if errors.Is(err, model.ErrNamespaceNotFound) && l.ns == model.DefaultNamespace {
		n, err = createNamespace(ctx, l.store, l.ns, l.clock.Now())
		if errors.Is(err, model.ErrNamespaceExists) { // registered concurrently
			n, err = l.store.GetNamespace(ctx, l.ns)
		}
		// The registration raised the generation: this limiter knows of
		// it, and need not drop its caches when it observes it.
		l.seenGen.Store(l.changes.known(ctx))
	}
	e := &nsEntry{id: n.ID, expires: now.add(l.cache.ttl)}
	switch {
	case errors.Is(err, model.ErrNamespaceNotFound):
		e.err = fmt.Errorf("namespace %q: %w", l.ns, model.ErrNamespaceNotFound)
	case err != nil:
		return "", storeErr(ctx, "resolve namespace", l.ns, err)
	case n.Deleted():
		e.err = fmt.Errorf("namespace %q: %w", l.ns, model.ErrNamespaceDeleted)
	}
	if l.cache.ttl > 0 && l.cache.epoch.Load() == epoch {
		l.nsCache.Store(e)
	}
	return e.id, e.err
}
