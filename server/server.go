// Package server is Tollgate's HTTP/JSON API (version 1, package api): the
// limiter behind `tollgate serve`, for services in any language.
//
// A Server holds one tollgate.Limiter per namespace over a shared store,
// keeps leases server-side with a TTL (an expired lease stands as
// committed), checks optional API keys, and exposes health, readiness and
// Prometheus metrics. It is an http.Handler; HTTPServer wraps it with
// timeouts suited to the open internet.
package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Defaults.
const (
	DefaultLeaseTTL  = 5 * time.Minute
	MaxLeaseTTL      = 24 * time.Hour
	DefaultMaxLeases = 100_000
	// PurgeTimeout bounds a namespace purge, which deletes every item of
	// the namespace and can outlast HTTPServer's read and write timeouts:
	// the purge route extends its connection's deadlines to this.
	PurgeTimeout = 10 * time.Minute
	// reapInterval is how often expired leases are committed.
	reapInterval = time.Second
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
	maxLeases int
	limOpts   []tollgate.Option
	metrics   *metrics

	limitsCache limitOptions // of the limits requests carry

	// reg serves the namespace routes; regErr is why it could not be made
	// (no store), which those routes return instead.
	reg    *tollgate.Registry
	regErr error

	mu       sync.Mutex
	limiters map[string]*tollgate.Limiter
	retired  tollgate.CacheStats // of limiters forgotten, so the metrics never go down

	leases *leaseTable
	mux    *http.ServeMux

	stop chan struct{}
	done chan struct{}
}

// Option configures a Server.
type Option func(*Server)

// WithKeys requires every request to carry one of keys (see LoadKeys).
func WithKeys(k *Keys) Option { return func(s *Server) { s.keys = k } }

// WithLeaseTTL sets the default lease TTL (default 5 minutes).
func WithLeaseTTL(d time.Duration) Option { return func(s *Server) { s.leaseTTL = d } }

// WithMaxLeases caps the open leases per namespace (default 100,000).
func WithMaxLeases(n int) Option { return func(s *Server) { s.maxLeases = n } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithClock sets the clock of the server and its limiters (for tests).
func WithClock(c clock.Clock) Option { return func(s *Server) { s.clock = c } }

// WithRegisterer registers the server's metrics with r instead of a
// registry of its own (which Metrics serves).
func WithRegisterer(r prometheus.Registerer) Option {
	return func(s *Server) { s.metrics = newMetrics(r) }
}

// WithLimiterOptions adds options to every namespace's limiter (e.g.
// tollgate.WithCacheTTL).
func WithLimiterOptions(opts ...tollgate.Option) Option {
	return func(s *Server) { s.limOpts = append(s.limOpts, opts...) }
}

// New returns a Server over st and starts its lease reaper.
func New(st store.Store, opts ...Option) *Server {
	s := &Server{
		store: st, clock: clock.Real{}, log: slog.Default(),
		leaseTTL: DefaultLeaseTTL, maxLeases: DefaultMaxLeases,
		limiters: map[string]*tollgate.Limiter{},
		stop:     make(chan struct{}), done: make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	if s.metrics == nil {
		s.metrics = newMetrics(nil)
	}
	s.expiryOpt = tollgate.WithLeaseExpiry(recordExpiry(s.leaseTTL))
	s.reg, s.regErr = tollgate.NewRegistry(st, tollgate.WithRegistryClock(s.clock))
	s.leases = newLeaseTable(s.maxLeases)
	s.metrics.watch(s)
	s.routes()
	go s.reap()
	return s
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

// Close stops the lease reaper and commits every open lease (an ended
// server's leases stand as committed, like expired ones).
func (s *Server) Close(ctx context.Context) error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	var errs []error
	for _, l := range s.leases.drain() {
		if err := s.commitLease(ctx, l); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// commitLease commits a lease the server ends by itself (expired, at a
// graceful stop, or in a namespace being deleted). A lease its client ended
// meanwhile, or a namespace purge dropped, needs nothing more.
func (s *Server) commitLease(ctx context.Context, l *serverLease) error {
	err := l.write(func() error { return l.lease.Commit(ctx) })
	if errors.Is(err, model.ErrLeaseClosed) || errors.Is(err, errLeaseNotFound) {
		return nil
	}
	return err
}

// Limiter returns the limiter of namespace ns, creating it on first use.
func (s *Server) Limiter(ns string) (*tollgate.Limiter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.limiters[ns]; ok {
		return l, nil
	}
	if err := model.ValidateNamespace(ns); err != nil {
		return nil, err
	}
	opts := append([]tollgate.Option{tollgate.WithNamespace(ns), tollgate.WithClock(s.clock)}, s.limOpts...)
	l, err := tollgate.New(s.store, opts...)
	if err != nil {
		return nil, err
	}
	s.limiters[ns] = l
	return l, nil
}

// forget drops the cached limiter of ns (after a namespace lookup failed,
// so unknown names do not accumulate, or after its registration changed),
// and its cached namespace, so a request still holding it sees the change
// at once too.
func (s *Server) forget(ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.limiters[ns]; ok {
		l.InvalidateCache()
		st := l.CacheStats()
		s.retired.Hits += st.Hits
		s.retired.Misses += st.Misses
		delete(s.limiters, ns)
	}
}

// cacheStats sums the cache statistics of every limiter, past and present.
func (s *Server) cacheStats() tollgate.CacheStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := s.retired
	for _, l := range s.limiters {
		st := l.CacheStats()
		sum.Hits += st.Hits
		sum.Misses += st.Misses
		sum.Entries += st.Entries
	}
	return sum
}

// reap commits expired leases until Close.
func (s *Server) reap() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case <-s.clock.After(reapInterval):
		}
		for _, l := range s.leases.expired(s.clock.Now()) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := s.commitLease(ctx, l)
			cancel()
			if err != nil {
				// Kept: the next round tries again, so pending adjustments
				// and concurrency slots are not lost to a passing outage.
				s.log.Warn("commit of an expired lease failed; will retry", "lease", l.id, "namespace", l.ns, "err", err)
				continue
			}
			s.leases.remove(l)
			s.metrics.leasesExpired.Inc()
		}
	}
}
