package tollgate

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// WriteOption configures a call that changes state, for its audit event.
// The options are model's, shared with the Go client.
type WriteOption = model.WriteOption

// EventTrigger names the external event (and the rule that acted on it) a
// change was made on; see WithTrigger.
type EventTrigger = model.EventTrigger

// WithPrincipal records who made a change in its audit event.
func WithPrincipal(principal string) WriteOption { return model.WithPrincipal(principal) }

// WithTrigger records, in the change's audit event, the external event it
// was made on (package events releases reservations with it).
func WithTrigger(t EventTrigger) WriteOption { return model.WithTrigger(t) }

// WithAudit applies write options (WithPrincipal) to the audit event of a
// reservation (WithReservation), which its grant appends; other acquires
// record no event and ignore it.
func WithAudit(opts ...WriteOption) AcquireOption { return model.WithAudit(opts...) }

// checkWrite checks what write options say (principal, trigger), for a
// call that checks its input before it reads or writes anything.
func checkWrite(opts []WriteOption) error {
	o := model.WriteSettingsOf(opts...)
	return o.Validate()
}

// auditEvent returns the event of a change, with the principal and the
// trigger's details of opts; details is the caller's to give away.
func (l *Limiter) auditEvent(action, entity, resource string, details map[string]string, opts []WriteOption) (model.AuditEvent, error) {
	return newAuditEvent(&l.eventIDs, l.clock.Now(), action, entity, resource, details, opts)
}

// newAuditEvent returns the event of a change at now, its id from ids
// and its principal from opts.
func newAuditEvent(ids *eventIDs, now time.Time, action, entity, resource string, details map[string]string, opts []WriteOption) (model.AuditEvent, error) {
	o := model.WriteSettingsOf(opts...)
	if err := o.Validate(); err != nil {
		return model.AuditEvent{}, err
	}
	if !o.Trigger.IsZero() {
		if details == nil {
			details = make(map[string]string, 4)
		}
		o.Trigger.AddDetails(details)
	}
	now = now.UTC().Truncate(time.Millisecond)
	return model.AuditEvent{
		ID: ids.next(now), Time: now, Action: action, Entity: entity, Resource: resource,
		Principal: o.Principal, Details: details,
	}, nil
}

// CreateEntity stores e. CreatedAt is set to the current time. It fails with
// ErrEntityExists if the id is taken and ErrEntityNotFound if the parent does
// not exist.
func (l *Limiter) CreateEntity(ctx context.Context, e Entity, opts ...WriteOption) (Entity, error) {
	if err := e.Validate(); err != nil {
		return Entity{}, err
	}
	e.CreatedAt = l.clock.Now().UTC().Truncate(time.Millisecond)
	ev, err := l.auditEvent(model.ActionEntityCreate, e.ID, "", entityDetails(e), opts)
	if err != nil {
		return Entity{}, err
	}
	ns, err := l.nsForAdmin(ctx)
	if err != nil {
		return Entity{}, err
	}
	err = l.store.CreateEntity(ctx, ns, e, ev)
	if errors.Is(err, model.ErrEntityNotFound) {
		return Entity{}, storeErr(ctx, "create entity", e.ID+": parent", err)
	}
	if err != nil {
		return Entity{}, storeErr(ctx, "create entity", e.ID, err)
	}
	l.forgetConfig()
	return e, nil
}

// GetEntity returns the entity or an error matching ErrEntityNotFound.
func (l *Limiter) GetEntity(ctx context.Context, id string) (Entity, error) {
	if err := model.ValidateEntityID(id); err != nil {
		return Entity{}, err
	}
	ns, err := l.nsForAdmin(ctx)
	if err != nil {
		return Entity{}, err
	}
	e, err := l.store.GetEntity(ctx, ns, id)
	return e, storeErr(ctx, "get entity", id, err)
}

// DeleteEntity removes the entity, its stored limits and its buckets. Its
// children keep their parent id; their cascade stops here.
func (l *Limiter) DeleteEntity(ctx context.Context, id string, opts ...WriteOption) error {
	if err := model.ValidateEntityID(id); err != nil {
		return err
	}
	ev, err := l.auditEvent(model.ActionEntityDelete, id, "", nil, opts)
	if err != nil {
		return err
	}
	ns, err := l.nsForAdmin(ctx)
	if err != nil {
		return err
	}
	if err := l.store.DeleteEntity(ctx, ns, id, ev); err != nil {
		return storeErr(ctx, "delete entity", id, err)
	}
	l.forgetConfig()
	return nil
}

// Children returns the entities whose parent is id, sorted by id.
func (l *Limiter) Children(ctx context.Context, id string) ([]Entity, error) {
	if err := model.ValidateEntityID(id); err != nil {
		return nil, err
	}
	ns, err := l.nsForAdmin(ctx)
	if err != nil {
		return nil, err
	}
	kids, err := l.store.ListChildren(ctx, ns, id)
	return kids, storeErr(ctx, "list children", id, err)
}

// ListEntities returns up to limit (at most MaxEntityPage; 0 means 100)
// entities with ids after the cursor after (empty for the first page; pass
// the last id seen for the next), sorted by id. On DynamoDB an entity
// created a moment ago may be missing (the listing reads an index).
func (l *Limiter) ListEntities(ctx context.Context, after string, limit int) ([]Entity, error) {
	limit, err := pageSize(limit, MaxEntityPage)
	if err != nil {
		return nil, err
	}
	ns, err := l.nsForAdmin(ctx)
	if err != nil {
		return nil, err
	}
	es, err := l.store.ListEntities(ctx, ns, after, limit)
	return es, storeErr(ctx, "list entities", "after "+strconv.Quote(after), err)
}

// UpdateEntity replaces the name, parent, cascade flag and metadata of the
// entity e.ID with e's (CreatedAt stays as stored) and returns the entity
// as stored. It fails with ErrEntityNotFound if the entity or a new parent
// does not exist, and with a *ValidationError of parent_id if the new
// parent is the entity or one of its descendants. Acquires see the change
// at once in this process; other processes see it when their caches
// expire (WithCacheTTL).
func (l *Limiter) UpdateEntity(ctx context.Context, e Entity, opts ...WriteOption) (Entity, error) {
	if err := e.Validate(); err != nil {
		return Entity{}, err
	}
	ev, err := l.auditEvent(model.ActionEntityUpdate, e.ID, "", entityDetails(e), opts)
	if err != nil {
		return Entity{}, err
	}
	ns, err := l.nsForAdmin(ctx)
	if err != nil {
		return Entity{}, err
	}
	err = l.store.UpdateEntity(ctx, ns, e, ev)
	l.forgetConfig() // whatever happened: the cache may hold the old entity
	if err != nil {
		return Entity{}, storeErr(ctx, "update entity", e.ID, err)
	}
	stored, err := l.store.GetEntity(ctx, ns, e.ID)
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

// ScopedConfig is a Config with the scope it is stored at.
type ScopedConfig = model.ScopedConfig

// MaxConfigPage is the most configs one ListConfigs call returns.
const MaxConfigPage = store.MaxConfigPage

// ListConfigs returns up to limit (at most MaxConfigPage; 0 means 100)
// stored configs whose scopes sort after *after (nil for the first page;
// pass the last scope seen for the next), in model.CompareScopes order:
// the system config, the resources' by resource, then each entity's by
// entity and resource. On DynamoDB a config written a moment ago may be
// missing (the listing reads an index).
func (l *Limiter) ListConfigs(ctx context.Context, after *Scope, limit int) ([]ScopedConfig, error) {
	limit, err := pageSize(limit, MaxConfigPage)
	if err != nil {
		return nil, err
	}
	ns, err := l.nsForAdmin(ctx)
	if err != nil {
		return nil, err
	}
	cfgs, err := l.store.ListConfigs(ctx, ns, after, limit)
	return cfgs, storeErr(ctx, "list configs", "", err)
}

// pageSize checks a listing's limit: 0 means 100, else 1 to max.
func pageSize(limit, max int) (int, error) {
	switch {
	case limit < 0 || limit > max:
		return 0, model.Invalid("limit", strconv.Itoa(limit), "must be between 0 and "+strconv.Itoa(max))
	case limit == 0:
		return 100, nil
	}
	return limit, nil
}

// SetConfig stores cfg at scope, replacing what was there. Limits at an
// entity scope need the entity to exist. OnUnavailable may be set at the
// system scope only. Existing buckets adopt changed limits at their next
// acquire.
func (l *Limiter) SetConfig(ctx context.Context, scope Scope, cfg Config, opts ...WriteOption) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	if err := cfg.Validate(scope); err != nil {
		return err
	}
	details := map[string]string{"level": scope.Level(), "limits": formatLimits(cfg.Limits)}
	if cfg.OnUnavailable != "" {
		details["on_unavailable"] = string(cfg.OnUnavailable)
	}
	ev, err := l.auditEvent(model.ActionConfigSet, scope.Entity, scope.Resource, details, opts)
	if err != nil {
		return err
	}
	ns, err := l.nsForAdmin(ctx)
	if err != nil {
		return err
	}
	if err := l.store.PutConfig(ctx, ns, scope, cfg, ev); err != nil {
		return storeErr(ctx, "set config", describeScope(scope), err)
	}
	l.forgetConfig()
	if scope == model.SystemScope() {
		l.fail.set(cfg.OnUnavailable)
	}
	return nil
}

// GetConfig returns the config stored at scope, or an error matching
// ErrNotFound.
func (l *Limiter) GetConfig(ctx context.Context, scope Scope) (Config, error) {
	if err := scope.Validate(); err != nil {
		return Config{}, err
	}
	ns, err := l.nsForAdmin(ctx)
	if err != nil {
		return Config{}, err
	}
	cfgs, err := l.store.GetConfigs(ctx, ns, []model.Scope{scope})
	if err != nil {
		return Config{}, storeErr(ctx, "get config", describeScope(scope), err)
	}
	if cfgs[0] == nil {
		return Config{}, storeErr(ctx, "get config", describeScope(scope), model.ErrNotFound)
	}
	return *cfgs[0], nil
}

// DeleteConfig removes the config at scope, or returns an error matching
// ErrNotFound.
func (l *Limiter) DeleteConfig(ctx context.Context, scope Scope, opts ...WriteOption) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	ev, err := l.auditEvent(model.ActionConfigDelete, scope.Entity, scope.Resource, map[string]string{"level": scope.Level()}, opts)
	if err != nil {
		return err
	}
	ns, err := l.nsForAdmin(ctx)
	if err != nil {
		return err
	}
	if err := l.store.DeleteConfig(ctx, ns, scope, ev); err != nil {
		return storeErr(ctx, "delete config", describeScope(scope), err)
	}
	l.forgetConfig()
	if scope == model.SystemScope() {
		l.fail.set("")
	}
	return nil
}

// AuditEvents returns up to limit (at most MaxAuditPage; 0 means 100) audit
// events of entity, oldest first, with ids after the cursor after (empty for
// the first page; pass the last id seen for the next). The empty entity lists
// system and resource configuration changes.
func (l *Limiter) AuditEvents(ctx context.Context, entity, after string, limit int) ([]AuditEvent, error) {
	if entity != "" {
		if err := model.ValidateEntityID(entity); err != nil {
			return nil, err
		}
	}
	limit, err := pageSize(limit, MaxAuditPage)
	if err != nil {
		return nil, err
	}
	ns, err := l.nsForAdmin(ctx)
	if err != nil {
		return nil, err
	}
	evs, err := l.store.ListAudit(ctx, ns, entity, after, limit)
	return evs, storeErr(ctx, "list audit", entity, err)
}

// nsForAdmin resolves the limiter's namespace for an administrative call.
func (l *Limiter) nsForAdmin(ctx context.Context) (string, error) {
	return l.namespaceID(ctx, nanoOf(l.clock.Now()))
}

func formatLimits(limits []model.Limit) string {
	parts := make([]string, len(limits))
	for i, lim := range limits {
		parts[i] = lim.String()
	}
	return strings.Join(parts, ",")
}

func describeScope(s model.Scope) string {
	switch s.Level() {
	case "system":
		return "system"
	case "resource":
		return "resource " + s.Resource
	case "entity-default":
		return "entity " + s.Entity
	}
	return "entity " + s.Entity + " resource " + s.Resource
}
