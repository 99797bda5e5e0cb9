package tollgate

import (
	"context"
	"errors"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// resolve returns the limits in effect for entity and resource (see
// storedLimits), cached. Store failures are returned as *UnavailableError.
func (l *Limiter) resolve(ctx context.Context, ns, entity, resource string, now unixNano) (*resolution, error) {
	return l.resolveVia(ctx, ns, entity, resource, now, nil, nil)
}

// resolveVia is resolve, looked up through m (nil: none), counting a hit
// through it in stripe (see cache.resolutionVia).
func (l *Limiter) resolveVia(ctx context.Context, ns, entity, resource string, now unixNano, m *resolutionMemo, pending *uint64) (*resolution, error) {
	k := store.BucketKey{Entity: entity, Resource: resource}
	if r := l.cache.resolutionVia(k, now, m, pending); r != nil {
		return r, nil
	}
	epoch := l.cache.epoch.Load()
	scope, cfg, sys, err := storedLimits(ctx, l.store, ns, entity, resource)
	if err != nil {
		return nil, err
	}
	l.fail.note(sys, now)
	r := &resolution{}
	if cfg != nil {
		r.found, r.scope, r.limits = true, scope, prepare(cfg, scope)
	}
	l.cache.putResolution(k, r, now, epoch)
	return r, nil
}

// storedLimits returns the stored limits in effect for entity and
// resource: the first config with limits of entity+resource, entity
// default, resource and system, and its scope (nil if there is none), and
// the system config (nil if there is none), which holds the unavailable
// mode.
func storedLimits(ctx context.Context, s store.Store, ns, entity, resource string) (scope model.Scope, cfg, sys *model.Config, err error) {
	scopes := [...]model.Scope{
		{Entity: entity, Resource: resource},
		{Entity: entity, Resource: model.DefaultResource},
		{Resource: resource},
		{},
	}
	cfgs, err := s.GetConfigs(ctx, ns, scopes[:])
	if err != nil {
		return model.Scope{}, nil, nil, storeErr(ctx, "resolve limits", entity+"/"+resource, err)
	}
	for i, c := range cfgs {
		if c != nil && len(c.Limits) > 0 {
			return scopes[i], c, cfgs[len(cfgs)-1], nil
		}
	}
	return model.Scope{}, nil, cfgs[len(cfgs)-1], nil
}

// entity returns the cached or stored entity, with found == false for an
// entity that does not exist.
func (l *Limiter) entity(ctx context.Context, ns, id string, now unixNano) (*entityEntry, error) {
	return l.entityVia(ctx, ns, id, now, nil, nil)
}

// entityVia is entity, looked up through m (nil: none), counting a hit
// through it in stripe (see cache.entityVia).
func (l *Limiter) entityVia(ctx context.Context, ns, id string, now unixNano, m *entityMemo, pending *uint64) (*entityEntry, error) {
	if e := l.cache.entityVia(id, now, m, pending); e != nil {
		return e, nil
	}
	epoch := l.cache.epoch.Load()
	e, err := l.store.GetEntity(ctx, ns, id)
	entry := &entityEntry{found: err == nil, entity: e}
	switch {
	case errors.Is(err, model.ErrEntityNotFound):
		entry.entity.ID = id
	case err != nil:
		return nil, storeErr(ctx, "read entity", id, err)
	}
	l.cache.putEntity(entry, now, epoch)
	return entry, nil
}

// chain returns the entity followed by the ancestors its acquires debit: each
// link is followed while the entity cascades and its parent exists, up to
// model.MaxCascadeDepth entities. An entity that does not exist is returned
// with its id alone. memo, unless nil, remembers the entry found at each
// depth for the next call with the same state, counting its hits in
// stripe (cache.entityVia).
func (l *Limiter) chain(ctx context.Context, ns, entity string, now unixNano, buf *[model.MaxCascadeDepth]*model.Entity, memo *[model.MaxCascadeDepth]entityMemo, pending *uint64) ([]*model.Entity, error) {
	var m *entityMemo
	if memo != nil {
		m = &memo[0]
	}
	e, err := l.entityVia(ctx, ns, entity, now, m, pending)
	if err != nil {
		return nil, err
	}
	// buf is the state's, kept across calls: a pointer already in place
	// is not stored again (a write barrier while the GC marks).
	chain := buf[:0]
	chain = appendIfChanged(chain, &e.entity)
	for len(chain) < model.MaxCascadeDepth && e.found && e.entity.Cascade && e.entity.ParentID != "" {
		if memo != nil {
			m = &memo[len(chain)]
		}
		if e, err = l.entityVia(ctx, ns, e.entity.ParentID, now, m, pending); err != nil {
			return nil, err
		}
		if !e.found {
			break
		}
		chain = appendIfChanged(chain, &e.entity)
	}
	return chain, nil
}

// appendIfChanged appends e to chain, whose backing array (of
// model.MaxCascadeDepth entities) may already hold it there.
func appendIfChanged(chain []*model.Entity, e *model.Entity) []*model.Entity {
	chain = chain[:len(chain)+1]
	if p := &chain[len(chain)-1]; *p != e {
		*p = e
	}
	return chain
}
