package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// CreateEntity stores e; the server sets CreatedAt and returns the entity as
// stored. It fails with model.ErrEntityExists if the id is taken and
// model.ErrEntityNotFound if the parent does not exist.
func (c *Client) CreateEntity(ctx context.Context, e model.Entity, opts ...model.WriteOption) (model.Entity, error) {
	var out api.Entity
	req, err := changing(request{method: http.MethodPost, path: api.Version + "/entities", body: api.FromEntity(e)}, opts)
	if err != nil {
		return model.Entity{}, err
	}
	if err := c.do(ctx, req, &out); err != nil {
		return model.Entity{}, err
	}
	return api.ToEntity(out), nil
}

// GetEntity returns the entity or an error matching
// model.ErrEntityNotFound.
func (c *Client) GetEntity(ctx context.Context, id string) (model.Entity, error) {
	var out api.Entity
	if err := c.do(ctx, request{method: http.MethodGet, path: entityPath(id)}, &out); err != nil {
		return model.Entity{}, err
	}
	return api.ToEntity(out), nil
}

// DeleteEntity removes the entity, its stored limits and its buckets. Its
// children keep their parent id; their cascade stops here.
func (c *Client) DeleteEntity(ctx context.Context, id string, opts ...model.WriteOption) error {
	req, err := changing(request{method: http.MethodDelete, path: entityPath(id)}, opts)
	if err != nil {
		return err
	}
	return c.do(ctx, req, nil)
}

// Children returns the entities whose parent is id, sorted by id.
func (c *Client) Children(ctx context.Context, id string) ([]model.Entity, error) {
	var out api.EntitiesResponse
	if err := c.do(ctx, request{method: http.MethodGet, path: entityPath(id) + "/children"}, &out); err != nil {
		return nil, err
	}
	es := make([]model.Entity, len(out.Entities))
	for i, e := range out.Entities {
		es[i] = api.ToEntity(e)
	}
	return es, nil
}

// ListEntities returns up to limit (at most model.MaxEntityPage; 0
// means the server's default of 100) entities with ids after the cursor
// after (empty for the first page; pass the last id seen for the next),
// sorted by id.
func (c *Client) ListEntities(ctx context.Context, after string, limit int) ([]model.Entity, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out api.EntitiesResponse
	if err := c.do(ctx, request{method: http.MethodGet, path: api.Version + "/entities", query: q}, &out); err != nil {
		return nil, err
	}
	es := make([]model.Entity, len(out.Entities))
	for i, e := range out.Entities {
		es[i] = api.ToEntity(e)
	}
	return es, nil
}

// UpdateEntity replaces the name, parent, cascade flag and metadata of the
// entity e.ID with e's (CreatedAt stays as stored) and returns the entity
// as stored, as tollgate.Admin.UpdateEntity does: it sends every field
// in a PATCH /v1/entities/{id}. It fails with model.ErrEntityNotFound
// if the entity or a new parent does not exist, and with a
// *model.ValidationError of parent_id if the new parent is the entity
// or one of its descendants.
func (c *Client) UpdateEntity(ctx context.Context, e model.Entity, opts ...model.WriteOption) (model.Entity, error) {
	if err := e.Validate(); err != nil {
		return model.Entity{}, err
	}
	var out api.Entity
	req, err := changing(request{method: http.MethodPatch, path: entityPath(e.ID), body: api.PatchOf(e)}, opts)
	if err != nil {
		return model.Entity{}, err
	}
	if err := c.do(ctx, req, &out); err != nil {
		return model.Entity{}, err
	}
	return api.ToEntity(out), nil
}

func entityPath(id string) string { return api.Version + "/entities/" + seg(id) }

// SetLimits stores cfg at scope, replacing what was there (see
// tollgate.Admin.SetLimits).
func (c *Client) SetLimits(ctx context.Context, scope model.Scope, cfg model.Config, opts ...model.WriteOption) error {
	req := scopeRequest(http.MethodPut, scope)
	req.body = api.FromConfig(cfg)
	req, err := changing(req, opts)
	if err != nil {
		return err
	}
	return c.do(ctx, req, nil)
}

// GetLimits returns the config stored at scope, or an error matching
// model.ErrNotFound.
func (c *Client) GetLimits(ctx context.Context, scope model.Scope) (model.Config, error) {
	var out api.Limits
	if err := c.do(ctx, scopeRequest(http.MethodGet, scope), &out); err != nil {
		return model.Config{}, err
	}
	cfg, err := api.ToConfig(out)
	if err != nil {
		return model.Config{}, &model.UnavailableError{Op: "server", Err: badResponse(err)}
	}
	return cfg, nil
}

// DeleteLimits removes the config at scope, or returns an error matching
// model.ErrNotFound.
func (c *Client) DeleteLimits(ctx context.Context, scope model.Scope, opts ...model.WriteOption) error {
	req, err := changing(scopeRequest(http.MethodDelete, scope), opts)
	if err != nil {
		return err
	}
	return c.do(ctx, req, nil)
}

// scopeRequest addresses the limits of scope:
//
//	system                /v1/limits/system
//	resource r            /v1/limits/resources/{r}
//	entity default of e   /v1/limits/entities/{e}
//	entity e, resource r  /v1/limits/entities/{e}?resource={r}
//
// An entity scope with an empty resource is the entity default, as
// model.EntityScope makes it.
func scopeRequest(method string, s model.Scope) request {
	req := request{method: method}
	switch {
	case s.Entity != "":
		req.path = api.Version + "/limits/entities/" + seg(s.Entity)
		if s.Resource != "" && s.Resource != model.DefaultResource {
			req.query = url.Values{"resource": {s.Resource}}
		}
	case s.Resource != "":
		req.path = api.Version + "/limits/resources/" + seg(s.Resource)
	default:
		req.path = api.Version + "/limits/system"
	}
	return req
}

// AuditEvents returns up to limit (at most model.MaxAuditPage; 0 means
// the server's default of 100) audit events of entity, oldest first, with
// ids after the cursor after (empty for the first page; pass the last id
// seen for the next). The empty entity lists system and resource
// configuration changes.
func (c *Client) AuditEvents(ctx context.Context, entity, after string, limit int) ([]model.AuditEvent, error) {
	q := url.Values{}
	if entity != "" {
		q.Set("entity", entity)
	}
	if after != "" {
		q.Set("after", after)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return c.auditEvents(ctx, "/audit", q)
}

// auditEvents reads a page of audit events from path (under api.Version).
func (c *Client) auditEvents(ctx context.Context, path string, q url.Values) ([]model.AuditEvent, error) {
	var out api.AuditResponse
	if err := c.do(ctx, request{method: http.MethodGet, path: api.Version + path, query: q}, &out); err != nil {
		return nil, err
	}
	evs := make([]model.AuditEvent, len(out.Events))
	for i, e := range out.Events {
		evs[i] = api.ToAuditEvent(e)
	}
	return evs, nil
}

// ListLimits returns up to limit (0 means 100) stored configs whose
// scopes sort after *after (nil for the first page; pass the last scope
// seen for the next), as tollgate.Admin.ListLimits: GET /v1/limits.
func (c *Client) ListLimits(ctx context.Context, after *model.Scope, limit int) ([]model.ScopedConfig, error) {
	q := url.Values{}
	if after != nil {
		q.Set("after", api.ConfigCursor(*after))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out api.LimitsListResponse
	if err := c.do(ctx, request{method: http.MethodGet, path: api.Version + "/limits", query: q}, &out); err != nil {
		return nil, err
	}
	cfgs := make([]model.ScopedConfig, len(out.Configs))
	for i, sl := range out.Configs {
		cfg, err := api.ToConfig(sl.Limits)
		if err != nil {
			return nil, &model.UnavailableError{Op: "server", Err: badResponse(err)}
		}
		cfgs[i] = model.ScopedConfig{Scope: model.Scope{Entity: sl.Entity, Resource: sl.Resource}, Config: cfg}
	}
	return cfgs, nil
}

// SetConfig is SetLimits.
//
// Deprecated: use SetLimits, the name every surface gives it (PUT
// /v1/limits, tollgate limits set).
func (c *Client) SetConfig(ctx context.Context, scope model.Scope, cfg model.Config) error {
	return c.SetLimits(ctx, scope, cfg)
}

// GetConfig is GetLimits.
//
// Deprecated: use GetLimits.
func (c *Client) GetConfig(ctx context.Context, scope model.Scope) (model.Config, error) {
	return c.GetLimits(ctx, scope)
}

// DeleteConfig is DeleteLimits.
//
// Deprecated: use DeleteLimits.
func (c *Client) DeleteConfig(ctx context.Context, scope model.Scope) error {
	return c.DeleteLimits(ctx, scope)
}

// ListConfigs is ListLimits.
//
// Deprecated: use ListLimits.
func (c *Client) ListConfigs(ctx context.Context, after *model.Scope, limit int) ([]model.ScopedConfig, error) {
	return c.ListLimits(ctx, after, limit)
}
