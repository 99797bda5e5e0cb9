// Package server is Tollgate's HTTP/JSON API (version 1, package api): the
// limiter behind `tollgate serve`, for services in any language.
//
// A Server holds a tollgate.Limiter and a tollgate.Admin per namespace over a shared store,
// checks optional API keys, and exposes health, readiness and Prometheus
// metrics. It holds no leases: a lease the API grants is a durable lease
// of the library, recorded in the store with an expiry, and any Server over
// the same store resolves its id (in the caller's namespace), so replicas
// behind a load balancer and a restarted server serve every lease alike. A
// reconciler (package reconcile, run by tollgate serve) commits the leases
// whose expiry passed. It is an http.Handler; HTTPServer wraps it with
// timeouts suited to the open internet.
package server

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/reconcile"
	"github.com/tollgate-rl/tollgate/store"
)

// Defaults.
const (
	// DefaultLeaseTTL is how long a lease's record lives unless the
	// request or an extend says otherwise.
	DefaultLeaseTTL = 5 * time.Minute
	// MaxLeaseTTL bounds lease_ttl_ms and ttl_ms.
	MaxLeaseTTL = 24 * time.Hour
	// PurgeTimeout bounds a namespace purge, which deletes every item of
	// the namespace and can outlast HTTPServer's read and write timeouts:
	// the purge route extends its connection's deadlines to this.
	PurgeTimeout = 10 * time.Minute
	// maxHeaderBytes is HTTPServer's MaxHeaderBytes. net/http reads 4 KiB
	// more than that before it gives up with 431, so the largest request
	// head (request line, headers and the blank line after them) it takes
	// is maxRequestHead bytes, the figure docs/http-api.md gives.
	maxHeaderBytes = 16 << 10
	maxRequestHead = maxHeaderBytes + 4<<10
)

// Server serves the API. Create it with New; call Close when done.
type Server struct {
	store    store.Store
	clock    clock.Clock
	log      *slog.Logger
	keys     *Keys
	leaseTTL time.Duration
	// expiryOpt gives a durable lease's record the default TTL (see
	// expiryOption).
	expiryOpt tollgate.AcquireOption
	limOpts   []tollgate.Option
	metrics   *metrics

	limitsCache limitOptions // of the limits requests carry

	// admin serves the namespace routes, which are not about one
	// namespace, and looks up stored keys.
	admin keyAdmin

	// watch follows the store's change generation for every limiter of
	// the server and for its cache of stored keys: one read per refresh
	// interval in all.
	watch           *tollgate.ChangeWatch
	refreshInterval time.Duration
	keyCache        keyCache
	auth            authState

	mu         sync.Mutex
	namespaces map[string]*planes  // only of namespaces that exist; at most maxNamespaces
	retired    tollgate.CacheStats // of limiters forgotten, so the metrics never go down
	// retiredShadow are the shadow denials of limiters forgotten.
	retiredShadow map[shadowKey]uint64
	// retiredDecisions are the decision counts of limiters forgotten.
	retiredDecisions map[shadowKey]tollgate.LimitDecisions
	// retiredDeny counts the refusals from memory of limiters forgotten.
	retiredDeny uint64
	// retiredAbandoned counts the abandoned acquires of limiters forgotten.
	retiredAbandoned tollgate.AbandonStats

	// backup is WithBackup's: it serves GET /v1/backup.
	backup Backuper

	// alertURL is WithAlertWebhook's; alerts delivers to it.
	alertURL string
	alerts   *alerter

	mux *http.ServeMux
	// registered is every route routes() registers on mux, in order, so
	// that a test can hold the API's description to the routes served.
	registered []route
}

// Option configures a Server.
type Option func(*Server)

// WithKeys requires every request to carry one of keys (see LoadKeys).
func WithKeys(k *Keys) Option { return func(s *Server) { s.keys = k } }

// WithLeaseTTL sets the default lease TTL, the expiry of a lease's record
// when the request names none (default 5 minutes).
func WithLeaseTTL(d time.Duration) Option { return func(s *Server) { s.leaseTTL = d } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithClock sets the clock of the server and its limiters (for tests).
func WithClock(c clock.Clock) Option { return func(s *Server) { s.clock = c } }

// WithRegisterer registers the server's metrics with r instead of a
// registry of its own (which Metrics serves).
func WithRegisterer(r prometheus.Registerer) Option {
	return func(s *Server) { s.metrics = newMetrics(r) }
}

// WithRefreshInterval sets how often the server reads the change
// generation of a store it shares with other processes (default
// tollgate.DefaultRefreshInterval): a limit, entity, namespace or key
// changed through another replica is in force here within about this
// long.
func WithRefreshInterval(d time.Duration) Option { return func(s *Server) { s.refreshInterval = d } }

// WithLimiterOptions adds options to every namespace's limiter (e.g.
// tollgate.WithCacheTTL).
func WithLimiterOptions(opts ...tollgate.Option) Option {
	return func(s *Server) { s.limOpts = append(s.limOpts, opts...) }
}

// New returns a Server over st. It starts no goroutine but the alert
// webhook's worker (WithAlertWebhook): leases live in the store, and
// their expiry is a reconciler's business (see OnReclaim). An invalid
// option (a refresh interval that is not positive, a webhook URL that is
// not an absolute http or https URL) is an error.
func New(st store.Store, opts ...Option) (*Server, error) {
	s := &Server{
		store: st, clock: clock.Real{}, log: slog.Default(),
		leaseTTL: DefaultLeaseTTL, namespaces: map[string]*planes{},
		refreshInterval: tollgate.DefaultRefreshInterval,
	}
	for _, o := range opts {
		o(s)
	}
	w, err := tollgate.NewChangeWatch(st, s.refreshInterval)
	if err != nil {
		return nil, err
	}
	s.watch = w
	if s.metrics == nil {
		s.metrics = newMetrics(nil)
	}
	if s.alertURL != "" {
		a, err := newAlerter(s.alertURL, s.clock, s.log, s.metrics)
		if err != nil {
			return nil, err
		}
		s.alerts = a
		s.limOpts = append(s.limOpts, tollgate.WithAlerts(a.enqueue))
	}
	s.expiryOpt = tollgate.WithLeaseTTL(recordExpiry(s.leaseTTL))
	adm, err := tollgate.NewAdmin(st, tollgate.WithClock(s.clock), tollgate.WithChangeWatch(w))
	if err != nil {
		return nil, err
	}
	s.admin = adm
	s.metrics.watch(s)
	s.routes()
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// HTTPServer returns an http.Server for s on addr with bounded header
// size and read, write and idle timeouts.
func (s *Server) HTTPServer(addr string) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           s,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// Close ends the server's use of its store. It has nothing to commit:
// open leases are records in the store, which outlive the server and stay
// usable through any server over the store (a restarted one included), or
// are committed by a reconciler once they expire. It stops the alert
// webhook's worker (WithAlertWebhook), waiting for it until ctx ends;
// alerts still queued are not delivered.
func (s *Server) Close(ctx context.Context) error {
	if s.alerts != nil {
		return s.alerts.close(ctx)
	}
	return nil
}

// OnReclaim counts a lease that a reconciler of this process ended after
// its expiry (tollgate_leases_expired_total). Pass it to
// reconcile.WithOnReclaim; it does not block.
func (s *Server) OnReclaim(reconcile.Reclaimed) { s.metrics.leasesExpired.Inc() }
