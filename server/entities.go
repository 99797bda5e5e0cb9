package server

import (
	"net/http"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
)

// The entity routes.

func (s *Server) createEntity(w http.ResponseWriter, r *http.Request, c *call) error {
	var e api.Entity
	if err := decode(w, r, &e); err != nil {
		return err
	}
	e.CreatedAtMS = 0
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	created, err := adm.CreateEntity(r.Context(), api.ToEntity(e), c.writeOpts()...)
	return answer(w, http.StatusCreated, created, err, api.FromEntity)
}

func (s *Server) getEntity(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := c.checkEntity(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	e, err := adm.GetEntity(r.Context(), r.PathValue("id"))
	setETag(w, e.Version, err)
	return answer(w, http.StatusOK, e, err, api.FromEntity)
}

func (s *Server) listEntities(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	limit, err := pageLimit(q, 100, tollgate.MaxEntityPage)
	if err != nil {
		return err
	}
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	es, err := adm.ListEntities(r.Context(), q.Get("after"), limit)
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
// update on the version read (patchEntity), so that two patches of one
// entity at once each keep the field the other changed. With If-Match the
// entity must be at its version.
func (s *Server) updateEntity(w http.ResponseWriter, r *http.Request, c *call) error {
	pre, err := precondition(r)
	if err != nil {
		return err
	}
	var p api.EntityPatch
	if err := decode(w, r, &p); err != nil {
		return err
	}
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	updated, err := patchEntity(r.Context(), adm, r.PathValue("id"), p, pre, c.writeOpts())
	setETag(w, updated.Version, err)
	return answer(w, http.StatusOK, updated, err, api.FromEntity)
}

func (s *Server) deleteEntity(w http.ResponseWriter, r *http.Request, c *call) error {
	pre, err := precondition(r)
	if err != nil {
		return err
	}
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	return noContent(w, adm.DeleteEntity(r.Context(), r.PathValue("id"), append(c.writeOpts(), pre...)...))
}

func (s *Server) children(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := c.checkEntity(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	es, err := adm.Children(r.Context(), r.PathValue("id"))
	return answer(w, http.StatusOK, es, err, entitiesResponse)
}

func entitiesResponse(es []tollgate.Entity) api.EntitiesResponse {
	out := api.EntitiesResponse{Entities: make([]api.Entity, len(es))}
	for i, e := range es {
		out.Entities[i] = api.FromEntity(e)
	}
	return out
}
