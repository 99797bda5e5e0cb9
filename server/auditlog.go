package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// auditLog pages the namespace's whole audit log by time (every entity's
// events): GET /v1/audit/log, for export. Admin keys only: a key confined
// to an entity reads that entity's events through /v1/audit.
func (s *Server) auditLog(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	limit, err := pageLimit(q, 100, tollgate.MaxAuditPage)
	if err != nil {
		return err
	}
	since, err := timeParam(q.Get("since"), "since", time.Time{})
	if err != nil {
		return err
	}
	until, err := timeParam(q.Get("until"), "until", time.Time{})
	if err != nil {
		return err
	}
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	evs, err := adm.AuditLog(r.Context(), model.AuditQuery{Since: since, Until: until, After: q.Get("after"), Limit: limit})
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

// setAuditRetention sets a namespace's audit retention:
// PUT /v1/namespaces/{name}/audit-retention.
func (s *Server) setAuditRetention(w http.ResponseWriter, r *http.Request, _ *call) error {
	var body api.AuditRetention
	if err := decode(w, r, &body); err != nil {
		return err
	}
	sec := body.AuditRetentionS
	if sec < 0 || sec > int64(model.MaxAuditRetention/time.Second) {
		return model.Invalid("audit_retention_s", strconv.FormatInt(sec, 10), "must be 0 (forever) or 3600 to 100 years in seconds")
	}
	return s.namespaceOp(w, r, func(ctx context.Context, name string) error {
		return s.admin.SetAuditRetention(ctx, name, time.Duration(sec)*time.Second)
	})
}
