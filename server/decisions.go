package server

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

var (
	// decisionsDesc describes tollgate_decisions_total.
	decisionsDesc = prometheus.NewDesc("tollgate_decisions_total",
		"Each limit's part in acquire decisions, by namespace, resource, limit and outcome: granted, denied (this limit refused), "+
			"shadow-denied (this limit, in shadow, would have) or degraded (granted without the store; limit \"_any\"). "+
			"Pairs beyond 512 per namespace are counted under resource and limit \"_other\".",
		[]string{"namespace", "resource", "limit", "outcome"}, nil)
	// nearLimitDesc describes tollgate_near_limit_total.
	nearLimitDesc = prometheus.NewDesc("tollgate_near_limit_total",
		"Decisions that left a limit's use (share of capacity taken) at 0.8 or above, by namespace, resource and limit.",
		[]string{"namespace", "resource", "limit"}, nil)
)

// collectDecisions sends the decision counts of t (tollgate.Stats.Decisions):
// as many series as resource and limit pairs in use, bounded per namespace
// (tollgate.MaxDecisionSeries), never one per entity.
func collectDecisions(ch chan<- prometheus.Metric, t *limiterTotals) {
	for k, d := range t.decisions {
		for _, o := range [...]struct {
			name string
			n    uint64
		}{{"granted", d.Granted}, {"denied", d.Denied}, {"shadow-denied", d.ShadowDenied}, {"degraded", d.Degraded}} {
			if o.n > 0 {
				ch <- prometheus.MustNewConstMetric(decisionsDesc, prometheus.CounterValue, float64(o.n), k.namespace, k.resource, k.limit, o.name)
			}
		}
		if k.limit != tollgate.DegradedLimit {
			ch <- prometheus.MustNewConstMetric(nearLimitDesc, prometheus.CounterValue, float64(d.NearLimit), k.namespace, k.resource, k.limit)
		}
	}
}

// addDecisions adds the counts of ds, of namespace ns, to sum.
func addDecisions(sum map[shadowKey]tollgate.LimitDecisions, ns string, ds []tollgate.LimitDecisions) {
	for _, d := range ds {
		k := shadowKey{ns, d.Resource, d.Limit}
		t := sum[k]
		t.Granted += d.Granted
		t.Denied += d.Denied
		t.ShadowDenied += d.ShadowDenied
		t.Degraded += d.Degraded
		t.NearLimit += d.NearLimit
		sum[k] = t
	}
}

// topDenied answers GET /v1/metrics/top-denied: the entities the
// request's namespace's limiter refused most (tollgate.Limiter.TopDenied),
// of a resource and limit when the query names them.
func (s *Server) topDenied(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	n := api.MaxTopDenied
	if v := q.Get("n"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > api.MaxTopDenied {
			return model.Invalid("n", v, "must be a number from 1 to "+strconv.Itoa(api.MaxTopDenied))
		}
	}
	p, err := s.planes(r.Context(), c.ns)
	if err != nil {
		return err
	}
	top := tollgate.TopDenied(p.lim.Stats().TopDenied, n, q.Get("resource"), q.Get("limit"))
	out := api.TopDeniedResponse{Entities: make([]api.DeniedEntity, len(top))}
	for i, d := range top {
		out.Entities[i] = api.DeniedEntity{Entity: d.Entity, Resource: d.Resource, Limit: d.Limit, Count: d.Count, Error: d.Error}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
