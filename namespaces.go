package tollgate

import (
	"context"
)

// namespaceID resolves the limiter's namespace to the opaque id that
// prefixes its data, caching it for the cache TTL. The default namespace is
// registered on first use; any other must have been registered.
func (l *Limiter) namespaceID(ctx context.Context, now unixNano) (string, error) {
	l.observeChanges(ctx)
	if e := l.nsCache.Load(); e != nil && e.expires > now {
		return e.id, e.err
	}
	epoch := l.cache.epoch.Load()
	e, err := resolveNamespace(ctx, l.store, l.ns, l.clock.Now())
	if err != nil {
		return "", err
	}
	if e.created {
		// The registration raised the generation: this limiter knows of
		// it, and need not drop its caches when it observes it.
		l.seenGen.Store(l.changes.known(ctx))
	}
	e.expires = now.add(l.cache.ttl)
	if l.cache.ttl > 0 && l.cache.epoch.Load() == epoch {
		l.nsCache.Store(e)
	}
	return e.id, e.err
}
