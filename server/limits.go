package server

import (
	"net/http"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// The routes of stored limits.

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
	pre, err := precondition(r)
	if err != nil {
		return err
	}
	var body api.Limits
	if err := decode(w, r, &body); err != nil {
		return err
	}
	cfg, err := api.ToConfig(body)
	if err != nil {
		return err
	}
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	cfg.Version, err = putConfig(r.Context(), adm, scopeOf(r), cfg, pre, c.writeOpts())
	setETag(w, cfg.Version, err)
	return answer(w, http.StatusOK, cfg, err, api.FromConfig)
}

func (s *Server) getLimits(w http.ResponseWriter, r *http.Request, c *call) error {
	if id := r.PathValue("id"); id != "" { // a key confined to an entity reaches no other route
		if err := c.checkEntity(r.Context(), id); err != nil {
			return err
		}
	}
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	cfg, err := adm.GetLimits(r.Context(), scopeOf(r))
	setETag(w, cfg.Version, err)
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
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	cfgs, err := adm.ListLimits(r.Context(), after, limit)
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
	pre, err := precondition(r)
	if err != nil {
		return err
	}
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	return noContent(w, adm.DeleteLimits(r.Context(), scopeOf(r), append(c.writeOpts(), pre...)...))
}
