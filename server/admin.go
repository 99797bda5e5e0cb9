package server

import (
	"net/http"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// The entity and limits routes.

func (s *Server) createEntity(w http.ResponseWriter, r *http.Request, c *call) error {
	var e api.Entity
	if err := decode(w, r, &e); err != nil {
		return err
	}
	e.CreatedAtMS = 0
	lim, err := c.limiter(r.Context())
	if err != nil {
		return err
	}
	created, err := lim.CreateEntity(r.Context(), api.ToEntity(e), c.writeOpts()...)
	return answer(w, http.StatusCreated, created, err, api.FromEntity)
}

func (s *Server) getEntity(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := c.checkEntity(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	lim, err := c.limiter(r.Context())
	if err != nil {
		return err
	}
	e, err := lim.GetEntity(r.Context(), r.PathValue("id"))
	return answer(w, http.StatusOK, e, err, api.FromEntity)
}

func (s *Server) listEntities(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	limit, err := pageLimit(q, 100, tollgate.MaxEntityPage)
	if err != nil {
		return err
	}
	lim, err := c.limiter(r.Context())
	if err != nil {
		return err
	}
	es, err := lim.ListEntities(r.Context(), q.Get("after"), limit)
	if err != nil {
		return err
	}
	out := entitiesResponse(es)
	if len(es) == limit {
		out.Next = es[len(es)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// updateEntity applies a PATCH to the entity as stored: a read, then the
// update. Two patches of one entity at once may each keep a field the
// other changed (the last write wins whole).
func (s *Server) updateEntity(w http.ResponseWriter, r *http.Request, c *call) error {
	var p api.EntityPatch
	if err := decode(w, r, &p); err != nil {
		return err
	}
	lim, err := c.limiter(r.Context())
	if err != nil {
		return err
	}
	cur, err := lim.GetEntity(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	updated, err := lim.UpdateEntity(r.Context(), p.Apply(cur), c.writeOpts()...)
	return answer(w, http.StatusOK, updated, err, api.FromEntity)
}

func (s *Server) deleteEntity(w http.ResponseWriter, r *http.Request, c *call) error {
	lim, err := c.limiter(r.Context())
	if err != nil {
		return err
	}
	return noContent(w, lim.DeleteEntity(r.Context(), r.PathValue("id"), c.writeOpts()...))
}

func (s *Server) children(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := c.checkEntity(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	lim, err := c.limiter(r.Context())
	if err != nil {
		return err
	}
	es, err := lim.Children(r.Context(), r.PathValue("id"))
	return answer(w, http.StatusOK, es, err, entitiesResponse)
}

func entitiesResponse(es []tollgate.Entity) api.EntitiesResponse {
	out := api.EntitiesResponse{Entities: make([]api.Entity, len(es))}
	for i, e := range es {
		out.Entities[i] = api.FromEntity(e)
	}
	return out
}

// scopeOf reads the scope of a /v1/limits/... path.
func scopeOf(r *http.Request) model.Scope {
	switch {
	case r.PathValue("resource") != "":
		return tollgate.ResourceScope(r.PathValue("resource"))
	case r.PathValue("id") != "":
		return tollgate.EntityScope(r.PathValue("id"), r.URL.Query().Get("resource"))
	}
	return tollgate.SystemScope()
}

func (s *Server) putLimits(w http.ResponseWriter, r *http.Request, c *call) error {
	var body api.Limits
	if err := decode(w, r, &body); err != nil {
		return err
	}
	cfg, err := api.ToConfig(body)
	if err != nil {
		return err
	}
	lim, err := c.limiter(r.Context())
	if err != nil {
		return err
	}
	err = lim.SetConfig(r.Context(), scopeOf(r), cfg, c.writeOpts()...)
	return answer(w, http.StatusOK, cfg, err, api.FromConfig)
}

func (s *Server) getLimits(w http.ResponseWriter, r *http.Request, c *call) error {
	if id := r.PathValue("id"); id != "" { // a key confined to an entity reaches no other route
		if err := c.checkEntity(r.Context(), id); err != nil {
			return err
		}
	}
	lim, err := c.limiter(r.Context())
	if err != nil {
		return err
	}
	cfg, err := lim.GetConfig(r.Context(), scopeOf(r))
	return answer(w, http.StatusOK, cfg, err, api.FromConfig)
}

// listLimits pages every stored config of the namespace (system, then
// resources, then entities), for export.
func (s *Server) listLimits(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	limit, err := pageLimit(q, 100, tollgate.MaxConfigPage)
	if err != nil {
		return err
	}
	var after *model.Scope
	if v := q.Get("after"); v != "" {
		sc, err := api.ParseConfigCursor(v)
		if err != nil {
			return err
		}
		after = &sc
	}
	lim, err := c.limiter(r.Context())
	if err != nil {
		return err
	}
	cfgs, err := lim.ListConfigs(r.Context(), after, limit)
	if err != nil {
		return err
	}
	resp := api.LimitsListResponse{Configs: make([]api.ScopedLimits, len(cfgs))}
	for i, sc := range cfgs {
		resp.Configs[i] = api.ScopedLimits{Entity: sc.Scope.Entity, Resource: sc.Scope.Resource, Limits: api.FromConfig(sc.Config)}
	}
	if len(cfgs) == limit {
		resp.Next = api.ConfigCursor(cfgs[len(cfgs)-1].Scope)
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (s *Server) deleteLimits(w http.ResponseWriter, r *http.Request, c *call) error {
	lim, err := c.limiter(r.Context())
	if err != nil {
		return err
	}
	return noContent(w, lim.DeleteConfig(r.Context(), scopeOf(r), c.writeOpts()...))
}
