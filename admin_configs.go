package tollgate

import (
	"context"
	"strconv"
	"strings"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// ScopedConfig is a Config with the scope it is stored at.
type ScopedConfig = model.ScopedConfig

// MaxConfigPage is the most configs one ListLimits call returns.
const MaxConfigPage = store.MaxConfigPage

// ListLimits returns up to limit (at most MaxConfigPage; 0 means 100)
// stored configs whose scopes sort after *after (nil for the first page;
// pass the last scope seen for the next), in model.CompareScopes order:
// the system config, the resources' by resource, then each entity's by
// entity and resource. On DynamoDB a config written a moment ago may be
// missing (the listing reads an index).
func (a *Admin) ListLimits(ctx context.Context, after *Scope, limit int) ([]ScopedConfig, error) {
	limit, err := pageSize(limit, MaxConfigPage)
	if err != nil {
		return nil, err
	}
	ns, err := a.namespaceID(ctx)
	if err != nil {
		return nil, err
	}
	cfgs, err := a.store.ListConfigs(ctx, ns, after, limit)
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

// SetLimits stores cfg at scope, replacing what was there. Limits at an
// entity scope need the entity to exist. OnUnavailable may be set at the
// system scope only. Existing buckets adopt changed limits at their next
// acquire. The config stored is at the next version (cfg.Version is
// ignored); with IfVersion (or IfAbsent) a config changed since it was
// read is an error matching ErrPreconditionFailed, and nothing changes.
func (a *Admin) SetLimits(ctx context.Context, scope Scope, cfg Config, opts ...WriteOption) error {
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
	ev, err := a.auditEvent(model.ActionConfigSet, scope.Entity, scope.Resource, details, opts)
	if err != nil {
		return err
	}
	ns, err := a.namespaceID(ctx)
	if err != nil {
		return err
	}
	if err := a.store.PutConfig(ctx, ns, scope, cfg, ev, precondition(opts)...); err != nil {
		return storeErr(ctx, "set config", describeScope(scope), err)
	}
	if scope == model.SystemScope() {
		a.changed(&cfg.OnUnavailable)
	} else {
		a.changed(nil)
	}
	return nil
}

// GetLimits returns the config stored at scope, or an error matching
// ErrNotFound.
func (a *Admin) GetLimits(ctx context.Context, scope Scope) (Config, error) {
	if err := scope.Validate(); err != nil {
		return Config{}, err
	}
	ns, err := a.namespaceID(ctx)
	if err != nil {
		return Config{}, err
	}
	cfgs, err := a.store.GetConfigs(ctx, ns, []model.Scope{scope})
	if err != nil {
		return Config{}, storeErr(ctx, "get config", describeScope(scope), err)
	}
	if cfgs[0] == nil {
		return Config{}, storeErr(ctx, "get config", describeScope(scope), model.ErrNotFound)
	}
	return *cfgs[0], nil
}

// DeleteLimits removes the config at scope, or returns an error matching
// ErrNotFound (or, with IfVersion, ErrPreconditionFailed).
func (a *Admin) DeleteLimits(ctx context.Context, scope Scope, opts ...WriteOption) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	ev, err := a.auditEvent(model.ActionConfigDelete, scope.Entity, scope.Resource, map[string]string{"level": scope.Level()}, opts)
	if err != nil {
		return err
	}
	ns, err := a.namespaceID(ctx)
	if err != nil {
		return err
	}
	if err := a.store.DeleteConfig(ctx, ns, scope, ev, precondition(opts)...); err != nil {
		return storeErr(ctx, "delete config", describeScope(scope), err)
	}
	if scope == model.SystemScope() {
		a.changed(new(model.OnUnavailable))
	} else {
		a.changed(nil)
	}
	return nil
}

// precondition is the store's form of what opts say of the version of
// the record changed (IfVersion, IfAbsent): none, or one.
func precondition(opts []WriteOption) []store.Precondition {
	if o := model.WriteSettingsOf(opts...); o.Expect != nil {
		return []store.Precondition{store.IfVersion(*o.Expect)}
	}
	return nil
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
