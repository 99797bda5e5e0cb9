package server

import (
	"net/http"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
)

// audit pages the audit events of an entity, or of the system and
// resource configuration (no entity).
func (s *Server) audit(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	limit, err := pageLimit(q, 100, tollgate.MaxAuditPage)
	if err != nil {
		return err
	}
	if err := c.needEntity(r.Context(), "entity", q.Get("entity")); err != nil {
		return err
	}
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	evs, err := adm.AuditEvents(r.Context(), q.Get("entity"), q.Get("after"), limit)
	if err != nil {
		return err
	}
	out := api.AuditResponse{Events: make([]api.AuditEvent, len(evs))}
	for i, e := range evs {
		out.Events[i] = api.FromAuditEvent(e)
	}
	if len(evs) == limit {
		out.Next = evs[len(evs)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
