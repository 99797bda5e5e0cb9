package server

import (
	"errors"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
)

// metrics are the server's Prometheus metrics.
//
// The series a request counts in are looked up once, on first use, and
// kept (outcomes, routeMetrics): WithLabelValues hashes the label values and
// looks them up on every call, which was a tenth of the acquire handler's
// time. They are not created ahead of use, so /metrics lists the same
// series as before, those that counted something.
type metrics struct {
	reg           prometheus.Registerer
	gather        prometheus.Gatherer
	acquires      *prometheus.CounterVec
	requests      *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	storeErrors   prometheus.Counter
	leasesExpired prometheus.Counter
	alertsSent    prometheus.Counter
	alertsFailed  prometheus.Counter
	alertsDropped prometheus.Counter

	outcomes [len(outcomes)]lazy[prometheus.Counter] // of acquires, by outcome
}

// Acquire outcomes, the values of tollgate_acquires_total's label.
const (
	granted = iota
	degraded
	limited
	unavailable
	invalid
	failed
)

var outcomes = [...]string{granted: "granted", degraded: "degraded", limited: "limited",
	unavailable: "unavailable", invalid: "invalid", failed: "error"}

// lazy is a metric's series, looked up on first use.
type lazy[T any] struct {
	once sync.Once
	v    T
}

func (l *lazy[T]) get(lookup func() T) T {
	l.once.Do(func() { l.v = lookup() })
	return l.v
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
		Help: "Acquire outcomes: granted, limited, unavailable (the store did not answer), degraded, invalid (bad request, unknown namespace) or error.",
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
		Help: "Leases the reconciler of this process committed because their expiry passed.",
	})
	m.reg.MustRegister(m.acquires, m.requests, m.latency, m.storeErrors, m.leasesExpired)
	m.registerAlerts()
	return m
}

// watch registers the collector that reads s's limiters at scrape time.
func (m *metrics) watch(s *Server) { m.reg.MustRegister(limiterCollector{s}) }

func (m *metrics) handler() http.Handler {
	if m.gather == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.gather, promhttp.HandlerOpts{})
}

// acquired counts one acquire's outcome.
func (m *metrics) acquired(wasDegraded bool, err error) {
	o := outcomeOf(wasDegraded, err)
	m.outcomes[o].get(func() prometheus.Counter { return m.acquires.WithLabelValues(outcomes[o]) }).Inc()
}

func outcomeOf(wasDegraded bool, err error) int {
	switch {
	case err == nil && wasDegraded:
		return degraded
	case err == nil:
		return granted
	case errors.Is(err, model.ErrRateLimited):
		return limited
	case errors.Is(err, model.ErrUnavailable):
		return unavailable
	case errors.Is(err, model.ErrInvalid), errors.Is(err, model.ErrNamespaceNotFound), errors.Is(err, model.ErrNamespaceDeleted),
		errors.Is(err, model.ErrEntityNotFound):
		return invalid
	}
	return failed
}

// routeMetrics are the series of one route's requests.
type routeMetrics struct {
	m       *metrics
	method  string // of the route's pattern; "" for a pattern of any method
	route   string
	latency lazy[prometheus.Observer]

	// byCode holds the request counters of method by status code, copied
	// on write (a route answers with few codes): a request only loads it.
	byCode atomic.Pointer[map[int]prometheus.Counter]
	mu     sync.Mutex // serialises writers of byCode
}

// route returns the metrics of the requests a pattern ("METHOD /path" or
// "/path") serves.
func (m *metrics) route(pattern string) *routeMetrics {
	rm := &routeMetrics{m: m, route: pattern}
	if method, route, ok := strings.Cut(pattern, " "); ok {
		rm.method, rm.route = method, route
	}
	rm.byCode.Store(&map[int]prometheus.Counter{})
	return rm
}

// request counts one request of method, answered with code (0 for 200)
// after d.
func (rm *routeMetrics) request(method string, code int, d time.Duration) {
	if code == 0 {
		code = http.StatusOK
	}
	rm.counter(method, code).Inc()
	rm.latency.get(func() prometheus.Observer { return rm.m.latency.WithLabelValues(rm.route) }).Observe(d.Seconds())
}

func (rm *routeMetrics) counter(method string, code int) prometheus.Counter {
	if method != rm.method {
		// Another method than the pattern's: HEAD on a GET route, or any
		// on a pattern without one. Not kept here; the label is bounded
		// by methodLabel, since a method is any token a caller sends.
		return rm.m.requests.WithLabelValues(methodLabel(method), rm.route, strconv.Itoa(code))
	}
	if c, ok := (*rm.byCode.Load())[code]; ok {
		return c
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	byCode := *rm.byCode.Load()
	if c, ok := byCode[code]; ok {
		return c
	}
	c := rm.m.requests.WithLabelValues(method, rm.route, strconv.Itoa(code))
	next := maps.Clone(byCode)
	next[code] = c
	rm.byCode.Store(&next)
	return c
}

// methodLabel is the method label of a request of method: one of HTTP's
// methods, or "other". Go's server passes any token as a method, and a
// label kept per token would grow /metrics and the server's memory with
// every new one a caller sends.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "other"
}

var (
	// shadowDenied describes tollgate_shadow_denied_total.
	shadowDenied = prometheus.NewDesc("tollgate_shadow_denied_total",
		"Decisions that a limit enforced in shadow would have denied (it never does), by namespace, resource and limit.",
		[]string{"namespace", "resource", "limit"}, nil)
	cacheHits   = prometheus.NewDesc("tollgate_config_cache_hits_total", "Limit and entity lookups served from the cache.", nil, nil)
	cacheMisses = prometheus.NewDesc("tollgate_config_cache_misses_total", "Limit and entity lookups that read the store.", nil, nil)
	denyServed  = prometheus.NewDesc("tollgate_deny_cache_served_total",
		"Refused acquires answered from the deny cache, without the store (zero unless it is on).", nil, nil)
	abandonedDesc = prometheus.NewDesc("tollgate_acquires_abandoned_total",
		"Durable acquires of unknown outcome (the store's answer lost) that the server looked for to roll back, by outcome: "+
			"ended (found and rolled back), not_found (never written), failed (the store did not answer) or dropped (too many at once).",
		[]string{"outcome"}, nil)
)

// limiterCollector exports what the limiters count, read once per scrape
// (Server.limiterTotals): the config cache's hits and misses, the deny
// cache's refusals, shadow denials and decisions (collectDecisions),
// each at most tollgate.MaxDecisionSeries resource and limit pairs per
// namespace and the OtherSeries pair, never a series per entity.
type limiterCollector struct{ s *Server }

func (c limiterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{shadowDenied, cacheHits, cacheMisses, denyServed, abandonedDesc, decisionsDesc, nearLimitDesc} {
		ch <- d
	}
}

func (c limiterCollector) Collect(ch chan<- prometheus.Metric) {
	t := c.s.limiterTotals()
	ch <- prometheus.MustNewConstMetric(cacheHits, prometheus.CounterValue, float64(t.cache.Hits))
	ch <- prometheus.MustNewConstMetric(cacheMisses, prometheus.CounterValue, float64(t.cache.Misses))
	ch <- prometheus.MustNewConstMetric(denyServed, prometheus.CounterValue, float64(t.denyServed))
	for _, o := range []struct {
		outcome tollgate.AbandonOutcome
		n       uint64
	}{{tollgate.AbandonEnded, t.abandoned.Ended}, {tollgate.AbandonNotFound, t.abandoned.NotFound},
		{tollgate.AbandonFailed, t.abandoned.Failed}, {tollgate.AbandonDropped, t.abandoned.Dropped}} {
		ch <- prometheus.MustNewConstMetric(abandonedDesc, prometheus.CounterValue, float64(o.n), string(o.outcome))
	}
	for k, n := range t.shadow {
		ch <- prometheus.MustNewConstMetric(shadowDenied, prometheus.CounterValue, float64(n), k.namespace, k.resource, k.limit)
	}
	collectDecisions(ch, &t)
}
