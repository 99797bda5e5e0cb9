package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// usageQuery reads the query of /v1/usage and /v1/usage/summary: entity
// and/or resource, window (hour, the default, or day), from and to (RFC
// 3339 or Unix ms; by default the last 24 hours, or 30 days for day),
// after and limit. The entity must be within the key's scope.
func (s *Server) usageQuery(r *http.Request, c *call) (tollgate.UsageQuery, error) {
	v := r.URL.Query()
	q := tollgate.UsageQuery{Entity: v.Get("entity"), Resource: v.Get("resource"), Window: tollgate.Window(v.Get("window")), After: v.Get("after")}
	if q.Window == "" {
		q.Window = tollgate.Hourly
	}
	span := 24 * time.Hour
	if q.Window == tollgate.Daily {
		span = 30 * 24 * time.Hour
	}
	var err error
	if q.To, err = timeParam(v.Get("to"), "to", s.clock.Now()); err != nil {
		return q, err
	}
	if q.From, err = timeParam(v.Get("from"), "from", q.To.Add(-span)); err != nil {
		return q, err
	}
	if l := v.Get("limit"); l != "" {
		if q.Limit, err = strconv.Atoi(l); err != nil {
			return q, model.Invalid("limit", l, "not a number")
		}
	}
	// A key confined to an entity reads the usage of its entities only.
	return q, c.needEntity(r.Context(), "entity", q.Entity)
}

func timeParam(v, field string, def time.Time) (time.Time, error) {
	if v == "" {
		return def, nil
	}
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, model.Invalid(field, v, "want RFC 3339 or Unix milliseconds")
	}
	return t, nil
}

func (s *Server) usage(w http.ResponseWriter, r *http.Request, c *call) error {
	q, err := s.usageQuery(r, c)
	if err != nil {
		return err
	}
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	us, next, err := adm.Usage(r.Context(), q)
	if err != nil {
		return err
	}
	out := api.UsageResponse{Usage: make([]api.Usage, len(us)), Next: next}
	for i, u := range us {
		out.Usage[i] = api.Usage{Entity: u.Entity, Resource: u.Resource, Window: string(u.Window), StartMS: u.Start.UnixMilli(),
			Consumed: u.Consumed, Events: u.Events}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) usageSummary(w http.ResponseWriter, r *http.Request, c *call) error {
	q, err := s.usageQuery(r, c)
	if err != nil {
		return err
	}
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	sum, err := adm.UsageSummary(r.Context(), q)
	return answer(w, http.StatusOK, sum, err, summaryResponse)
}

func summaryResponse(sum tollgate.UsageSummary) api.UsageSummary {
	out := api.UsageSummary{Windows: sum.Windows, Events: sum.Events, Limits: map[string]api.LimitUsage{}}
	for name, l := range sum.Limits {
		out.Limits[name] = api.LimitUsage{Total: l.Total, Average: l.Average, Peak: l.Peak, PeakStartMS: l.PeakStart.UnixMilli()}
	}
	return out
}

func (s *Server) capacity(w http.ResponseWriter, r *http.Request, c *call) error {
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	rc, err := adm.Capacity(r.Context(), r.URL.Query().Get("resource"))
	return answer(w, http.StatusOK, rc, err, api.FromCapacity)
}
