package server

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
)

// metrics are the server's Prometheus metrics.
type metrics struct {
	reg           prometheus.Registerer
	gather        prometheus.Gatherer
	acquires      *prometheus.CounterVec
	requests      *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	storeErrors   prometheus.Counter
	leasesExpired prometheus.Counter
}

// newMetrics registers the metrics with r, or with a registry of their own
// (with the Go and process collectors) when r is nil.
func newMetrics(r prometheus.Registerer) *metrics {
	m := &metrics{reg: r}
	if r == nil {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		m.reg, m.gather = reg, reg
	} else if g, ok := r.(prometheus.Gatherer); ok {
		m.gather = g
	}
	m.acquires = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_acquires_total",
		Help: "Acquire outcomes: granted, limited, unavailable (store or lease cap), degraded, invalid (bad request, unknown namespace) or error.",
	}, []string{"outcome"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_http_requests_total",
		Help: "HTTP requests by method, route and status code.",
	}, []string{"method", "route", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tollgate_http_request_duration_seconds",
		Help:    "HTTP request latency by route.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	}, []string{"route"})
	m.storeErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tollgate_store_errors_total",
		Help: "Requests that failed because the store did not answer (or answered too late).",
	})
	m.leasesExpired = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tollgate_leases_expired_total",
		Help: "Leases committed by the server because their TTL passed.",
	})
	m.reg.MustRegister(m.acquires, m.requests, m.latency, m.storeErrors, m.leasesExpired)
	return m
}

// watch registers the gauges that read s's state at scrape time.
func (m *metrics) watch(s *Server) {
	cache := func(pick func(tollgate.CacheStats) uint64) func() float64 {
		return func() float64 { return float64(pick(s.cacheStats())) }
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_open_leases", Help: "Leases held open by the server."},
			func() float64 { return float64(s.leases.open()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tollgate_config_cache_hits_total", Help: "Limit and entity lookups served from the cache."},
			cache(func(c tollgate.CacheStats) uint64 { return c.Hits })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tollgate_config_cache_misses_total", Help: "Limit and entity lookups that read the store."},
			cache(func(c tollgate.CacheStats) uint64 { return c.Misses })),
	)
}

func (m *metrics) handler() http.Handler {
	if m.gather == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.gather, promhttp.HandlerOpts{})
}

// acquired counts one acquire's outcome.
func (m *metrics) acquired(le *tollgate.Lease, err error) {
	outcome := "granted"
	switch {
	case err == nil && le.Degraded():
		outcome = "degraded"
	case err == nil:
	case errors.Is(err, model.ErrRateLimited):
		outcome = "limited"
	case errors.Is(err, model.ErrUnavailable):
		outcome = "unavailable"
	case errors.Is(err, model.ErrInvalid), errors.Is(err, model.ErrNamespaceNotFound), errors.Is(err, model.ErrNamespaceDeleted),
		errors.Is(err, model.ErrEntityNotFound):
		outcome = "invalid"
	default:
		outcome = "error"
	}
	m.acquires.WithLabelValues(outcome).Inc()
}

func (m *metrics) request(method, route string, code int, d time.Duration) {
	if code == 0 {
		code = http.StatusOK
	}
	m.requests.WithLabelValues(method, route, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}
