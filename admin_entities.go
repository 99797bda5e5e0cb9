package tollgate

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/tollgate-rl/tollgate/model"
)

// CreateEntity stores e. CreatedAt is set to the current time. It fails with
// ErrEntityExists if the id is taken and ErrEntityNotFound if the parent does
// not exist.
func (a *Admin) CreateEntity(ctx context.Context, e Entity, opts ...WriteOption) (Entity, error) {
	if err := e.Validate(); err != nil {
		return Entity{}, err
	}
	e.CreatedAt = a.clock.Now().UTC().Truncate(time.Millisecond)
	ev, err := a.auditEvent(model.ActionEntityCreate, e.ID, "", entityDetails(e), opts)
	if err != nil {
		return Entity{}, err
	}
	ns, err := a.namespaceID(ctx)
	if err != nil {
		return Entity{}, err
	}
	err = a.store.CreateEntity(ctx, ns, e, ev)
	if errors.Is(err, model.ErrEntityNotFound) {
		return Entity{}, storeErr(ctx, "create entity", e.ID+": parent", err)
	}
	if err != nil {
		return Entity{}, storeErr(ctx, "create entity", e.ID, err)
	}
	a.changed(nil)
	e.Version = 1
	return e, nil
}

// GetEntity returns the entity or an error matching ErrEntityNotFound.
func (a *Admin) GetEntity(ctx context.Context, id string) (Entity, error) {
	if err := model.ValidateEntityID(id); err != nil {
		return Entity{}, err
	}
	ns, err := a.namespaceID(ctx)
	if err != nil {
		return Entity{}, err
	}
	e, err := a.store.GetEntity(ctx, ns, id)
	return e, storeErr(ctx, "get entity", id, err)
}

// DeleteEntity removes the entity, its stored limits and its buckets. Its
// children keep their parent id; their cascade stops here. With IfVersion
// an entity changed since it was read is an error matching
// ErrPreconditionFailed, and nothing changes.
func (a *Admin) DeleteEntity(ctx context.Context, id string, opts ...WriteOption) error {
	if err := model.ValidateEntityID(id); err != nil {
		return err
	}
	ev, err := a.auditEvent(model.ActionEntityDelete, id, "", nil, opts)
	if err != nil {
		return err
	}
	ns, err := a.namespaceID(ctx)
	if err != nil {
		return err
	}
	if err := a.store.DeleteEntity(ctx, ns, id, ev, precondition(opts)...); err != nil {
		return storeErr(ctx, "delete entity", id, err)
	}
	a.changed(nil)
	return nil
}

// Children returns the entities whose parent is id, sorted by id.
func (a *Admin) Children(ctx context.Context, id string) ([]Entity, error) {
	if err := model.ValidateEntityID(id); err != nil {
		return nil, err
	}
	ns, err := a.namespaceID(ctx)
	if err != nil {
		return nil, err
	}
	kids, err := a.store.ListChildren(ctx, ns, id)
	return kids, storeErr(ctx, "list children", id, err)
}

// ListEntities returns up to limit (at most MaxEntityPage; 0 means 100)
// entities with ids after the cursor after (empty for the first page; pass
// the last id seen for the next), sorted by id. On DynamoDB an entity
// created a moment ago may be missing (the listing reads an index).
func (a *Admin) ListEntities(ctx context.Context, after string, limit int) ([]Entity, error) {
	limit, err := pageSize(limit, MaxEntityPage)
	if err != nil {
		return nil, err
	}
	ns, err := a.namespaceID(ctx)
	if err != nil {
		return nil, err
	}
	es, err := a.store.ListEntities(ctx, ns, after, limit)
	return es, storeErr(ctx, "list entities", "after "+strconv.Quote(after), err)
}

// UpdateEntity replaces the name, parent, cascade flag and metadata of the
// entity e.ID with e's (CreatedAt stays as stored) and returns the entity
// as stored. It fails with ErrEntityNotFound if the entity or a new parent
// does not exist, and with a *ValidationError of parent_id if the new
// parent is the entity or one of its descendants. The entity stored is at
// the next version (e.Version is ignored); with IfVersion an entity
// changed since it was read is an error matching ErrPreconditionFailed,
// and nothing changes. Acquires see the change
// at once in this process; other processes see it when their caches
// expire (WithCacheTTL).
func (a *Admin) UpdateEntity(ctx context.Context, e Entity, opts ...WriteOption) (Entity, error) {
	if err := e.Validate(); err != nil {
		return Entity{}, err
	}
	ev, err := a.auditEvent(model.ActionEntityUpdate, e.ID, "", entityDetails(e), opts)
	if err != nil {
		return Entity{}, err
	}
	ns, err := a.namespaceID(ctx)
	if err != nil {
		return Entity{}, err
	}
	err = a.store.UpdateEntity(ctx, ns, e, ev, precondition(opts)...)
	a.changed(nil) // whatever happened: a cache may hold the old entity
	if err != nil {
		return Entity{}, storeErr(ctx, "update entity", e.ID, err)
	}
	stored, err := a.store.GetEntity(ctx, ns, e.ID)
	return stored, storeErr(ctx, "get entity", e.ID, err)
}

// entityDetails are the audit details of an entity written.
func entityDetails(e Entity) map[string]string {
	details := map[string]string{"cascade": strconv.FormatBool(e.Cascade)}
	if e.ParentID != "" {
		details["parent_id"] = e.ParentID
	}
	if e.Name != "" {
		details["name"] = e.Name
	}
	return details
}
