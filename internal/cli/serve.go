package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/aggregator"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/reconcile"
	"github.com/tollgate-rl/tollgate/rls"
	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
	"github.com/tollgate-rl/tollgate/store/embedded"
	"github.com/tollgate-rl/tollgate/store/redis"
)

type serveFlags struct {
	addr, grpcAddr, rlsConfig string
	keysFile                  string
	alertWebhook              string // --alert-webhook: where alerts are posted
	tlsCert, tlsKey           string
	leaseTTL                  time.Duration
	maxLeases                 int // deprecated: accepted, unused
	reconcileInterval         time.Duration
	logLevel, logFormat       string
	allowOpen                 bool
	shutdownTimeout           time.Duration
	retention                 time.Duration
	cacheTTL, refresh         time.Duration
	denyCache                 time.Duration
	grpc                      grpcFlags
}

// grpcFlags are the limits of the gRPC port that an operator tunes; the
// others keep rls.DefaultLimits.
type grpcFlags struct {
	maxConns, maxStreams, maxMessage int
	idleTimeout, maxAge              time.Duration
}

// grpcFlagNames are the flags of grpcFlags, which only --grpc-addr uses.
var grpcFlagNames = []string{"grpc-max-conns", "grpc-max-streams", "grpc-max-message-size", "grpc-idle-timeout", "grpc-max-connection-age"}

func newServeCmd(g *globals) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP API (and the Envoy rate-limit service)",
		Long: `Serve the HTTP/JSON API (docs/http-api.md) over the store, by default the
embedded file tollgate.db in the working directory.

Requests need "Authorization: Bearer KEY" once there are keys: a keys
file (--keys, read at start) or keys kept in the store (tollgate keys
create), which every server over the store honours. Without either, every
request is trusted, so the server only listens on loopback addresses
unless --allow-unauthenticated is given.

A change made through another process over the store (a limit, an
entity, a namespace, a key's revocation) is in force here within
--refresh-interval, for one small read of the store per interval;
--cache-ttl bounds how long what was read stands should that read fail.

With --deny-cache (off by default; 1s suits DynamoDB, where each refusal
costs a read), a client that keeps asking once refused is refused from
memory until refill could cover it, or until --deny-cache has passed,
without a call to the store (docs/semantics.md 17): a refund or reset made
through another replica is then seen here up to that much later. An
acquire with an Idempotency-Key (the clients send one by default) always
goes to the store; the Envoy service's carry none.

Leases live in the store, not in the server: any serve over the same
store serves any lease of the namespace, and a restarted one loses none.
A reconciler runs inside serve and commits the leases whose expiry passed
(every --reconcile-interval); with --reconcile-interval 0 it does not run,
and another process over the store (another tollgate serve, or a program
using package reconcile) must reconcile.

Over DynamoDB or Redis, each call to the store ends within --store-timeout
(default 1s), the SDK's retries included: when the store does not answer, a request
gets its on_unavailable answer (a degraded grant with allow, 503 with
block) within about that, and /readyz answers 503.

With --grpc-addr and --rls-config it also serves Envoy's rate-limit
service (docs/envoy.md) over gRPC, with limits on its connections: the
--grpc-* flags, where 0 means no limit (but for the message size).

With --alert-webhook URL, a configuration's alert_at thresholds (tollgate
limits set --alert-at 0.8,1.0) raise alerts: when an entity's use of a
limit crosses one upward, one JSON POST goes to URL (tried again with
backoff; never holding up an acquire). Each replica alerts for the
crossings it sees (docs/operations.md, "Alerts").

SIGINT or SIGTERM stops it gracefully: requests in flight finish. Open
leases stay in the store.`,
		Example: `  tollgate serve
  tollgate serve --addr 0.0.0.0:8080 --keys keys.txt --store 'dynamodb://tollgate?region=eu-west-1'
  tollgate serve --grpc-addr 127.0.0.1:8081 --rls-config envoy.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("retention") {
				d, err := envRetention()
				if err != nil {
					return err
				}
				f.retention = d
			}
			if f.grpcAddr == "" {
				for _, name := range grpcFlagNames {
					if cmd.Flags().Changed(name) {
						return usagef("--%s goes with --grpc-addr", name)
					}
				}
			}
			return runServe(cmd.Context(), g, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8080", "HTTP listen address")
	fl.StringVar(&f.grpcAddr, "grpc-addr", "", "also serve Envoy's rate-limit service (gRPC) here")
	fl.StringVar(&f.rlsConfig, "rls-config", "", "descriptor mapping of the Envoy rate-limit service (docs/envoy.md)")
	fl.StringVar(&f.alertWebhook, "alert-webhook", "", "POST an alert (JSON) here when an entity's use of a limit crosses one of its configuration's alert_at thresholds upward (docs/operations.md)")
	fl.StringVar(&f.keysFile, "keys", "", "API keys file (docs/security.md); without it, and without keys in the store, requests are not authenticated")
	fl.DurationVar(&f.refresh, "refresh-interval", tollgate.DefaultRefreshInterval, "how often to look for changes made by other processes over the store")
	fl.DurationVar(&f.cacheTTL, "cache-ttl", tollgate.DefaultCacheTTL, "how long stored limits and entities are cached (changes are seen sooner: --refresh-interval)")
	fl.DurationVar(&f.denyCache, "deny-cache", 0, "answer from memory, for up to this long after a refusal of the store, the acquires it shows time cannot cover yet (docs/semantics.md 17; 1s suits DynamoDB); 0: off")
	defaults := rls.DefaultLimits()
	fl.IntVar(&f.grpc.maxConns, "grpc-max-conns", defaults.MaxConnections, "most gRPC connections open at once; more wait to be accepted")
	fl.IntVar(&f.grpc.maxStreams, "grpc-max-streams", int(defaults.MaxConcurrentStreams), "most calls in flight on one gRPC connection; Envoy opens another")
	fl.IntVar(&f.grpc.maxMessage, "grpc-max-message-size", defaults.MaxRecvMsgSize, "largest gRPC request, in bytes")
	fl.DurationVar(&f.grpc.idleTimeout, "grpc-idle-timeout", defaults.IdleTimeout, "close a gRPC connection that has had no call for this long")
	fl.DurationVar(&f.grpc.maxAge, "grpc-max-connection-age", defaults.MaxConnectionAge, "close gRPC connections this old (gracefully), so clients spread over new replicas")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate file (with --tls-key)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "TLS key file")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", server.DefaultLeaseTTL, "default lease TTL: the expiry of a lease's record, after which the reconciler commits it")
	fl.IntVar(&f.maxLeases, "max-leases", 0, "no effect: the server holds no leases")
	_ = fl.MarkDeprecated("max-leases", "it has no effect: leases live in the store, and the server caps none")
	fl.DurationVar(&f.reconcileInterval, "reconcile-interval", reconcile.DefaultInterval,
		"how often the reconciler commits expired leases; 0 turns it off (another process must reconcile)")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fl.BoolVar(&f.allowOpen, "allow-unauthenticated", false, "listen beyond loopback without --keys")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 15*time.Second, "how long a graceful stop may take")
	daysVar(fl, &f.retention, "retention", aggregator.DefaultRetention, "how long usage snapshots are kept after their window (env "+envRetentionName+")")
	return cmd
}

// maxServeStoreTimeout bounds serve's --store-timeout: a request waits
// for at most two store calls that do not answer (docs/operations.md,
// "Faults"), and must answer within server.HTTPServer's WriteTimeout of
// 30 s, past which its connection is closed without an answer.
const maxServeStoreTimeout = 10 * time.Second

// envRetentionName names the environment variable of --retention.
const envRetentionName = "TOLLGATE_RETENTION"

// envRetention returns the retention of usage snapshots that
// TOLLGATE_RETENTION sets, or the default.
func envRetention() (time.Duration, error) {
	v := os.Getenv(envRetentionName)
	if v == "" {
		return aggregator.DefaultRetention, nil
	}
	d, err := parseDuration(v)
	if err != nil {
		return 0, usagef("%s %q: want a duration such as 90d or 2160h", envRetentionName, v)
	}
	return d, nil
}

func runServe(ctx context.Context, g *globals, f serveFlags) error {
	log, err := newLogger(g, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	if g.serverFlag {
		return usagef("serve works on a store (--store), not through another server (--server)")
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return usagef("--tls-cert and --tls-key go together")
	}
	if f.leaseTTL < time.Second || f.leaseTTL > server.MaxLeaseTTL {
		return usagef("--lease-ttl %v: want 1s to %v", f.leaseTTL, server.MaxLeaseTTL)
	}
	if f.reconcileInterval < 0 {
		return usagef("--reconcile-interval %v: want a positive duration, or 0 to turn the reconciler off", f.reconcileInterval)
	}
	if (f.grpcAddr == "") != (f.rlsConfig == "") {
		return usagef("--grpc-addr and --rls-config go together")
	}
	if f.retention <= 0 {
		return usagef("--retention %v: want a positive duration", f.retention)
	}
	if f.refresh <= 0 || f.cacheTTL < 0 {
		return usagef("--refresh-interval %v, --cache-ttl %v: want a positive interval and a TTL of 0 or more", f.refresh, f.cacheTTL)
	}
	if f.denyCache < 0 {
		return usagef("--deny-cache %v: want a duration of 0 (off) or more", f.denyCache)
	}
	if _, err := f.grpc.limits(); err != nil {
		return err
	}
	if g.storeTimeout > maxServeStoreTimeout {
		return usagef("--store-timeout %v: want at most %v, so that a request that waits for the store twice still answers within the HTTP write timeout",
			g.storeTimeout, maxServeStoreTimeout)
	}
	opts := []server.Option{server.WithLogger(log), server.WithLeaseTTL(f.leaseTTL), server.WithRefreshInterval(f.refresh),
		server.WithLimiterOptions(tollgate.WithCacheTTL(f.cacheTTL), tollgate.WithDenyCache(f.denyCache))}
	if f.keysFile != "" {
		keys, err := loadKeys(f.keysFile)
		if err != nil {
			return err
		}
		opts = append(opts, server.WithKeys(keys))
	}
	if f.alertWebhook != "" {
		opts = append(opts, server.WithAlertWebhook(f.alertWebhook))
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, closeStore, err := g.openStore(ctx, true)
	if err != nil {
		return err
	}
	defer func() {
		if err := closeStore(); err != nil {
			log.Error("closing the store", "err", err)
		}
	}()
	if g.storeTimeout == 0 {
		switch st.(type) {
		case *dynamodb.Store:
			log.Warn("--store-timeout 0: a DynamoDB that stops answering holds requests until the HTTP client's timeout of each attempt")
		case *redis.Store:
			log.Warn("--store-timeout 0: a Redis that stops answering holds requests until it answers")
		}
	}
	if es, ok := st.(*embedded.Store); ok {
		opts = append(opts, server.WithBackup(es.Backup)) // tollgate backup FILE --server URL, while serving
	}
	st, stopRecording := recordUsage(st, log, f.retention)
	defer stopRecording()
	srv, err := server.New(st, opts...)
	if errors.Is(err, model.ErrInvalid) {
		return usageError{err} // an option from a flag: --alert-webhook
	}
	if err != nil {
		return err
	}
	authenticates, err := srv.Authenticates(ctx)
	if err != nil {
		return fmt.Errorf("reading the store's API keys: %w", err)
	}
	if !authenticates && !isLoopback(f.addr) && !f.allowOpen {
		return usagef("--addr %s is not a loopback address: give --keys, create a key (tollgate keys create), or --allow-unauthenticated to serve without authentication", f.addr)
	}
	stopReconciling, err := startReconciler(st, log, srv, f.reconcileInterval)
	if err != nil {
		return err
	}
	// Deferred last, so run first: the reconciler stops with the server,
	// before the usage recorder's last flush and the store's closing.
	defer stopReconciling()
	return serveUntilDone(ctx, log, srv, f)
}

// startReconciler runs a reconciler over st every interval, counting what
// it reclaims in srv's metrics, until the returned stop is called (which
// waits for a pass in progress). Interval 0 runs none. Every replica runs
// one: reclaiming is conditioned on the record, so a lease is reclaimed
// once however many run.
func startReconciler(st store.Store, log *slog.Logger, srv *server.Server, interval time.Duration) (func(), error) {
	if interval == 0 {
		log.Warn("the reconciler is off (--reconcile-interval 0): expired leases keep their slots until another process reconciles")
		return func() {}, nil
	}
	r, err := reconcile.New(st, reconcile.WithInterval(interval), reconcile.WithLogger(log),
		reconcile.WithOnReclaim(func(rc reconcile.Reclaimed) {
			srv.OnReclaim(rc)
			log.Info("expired lease committed", "namespace", rc.Namespace, "lease", rc.Lease.ID, "holder", rc.Lease.Holder,
				"entity", rc.Lease.Entity, "resource", rc.Lease.Resource)
		}))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Run(ctx) // returns ctx's error once stopped
	}()
	return func() { cancel(); <-done }, nil
}

// recordUsage wraps a store that keeps usage snapshots with the in-process
// usage recorder, flushing every second and keeping snapshots retention
// after their window. stop ends it after a last flush;
// call it once the server and its reconciler have stopped. A store with
// a change feed of its own (store.ChangeFeeder: DynamoDB's stream, read by
// tollgate aggregator) is left alone: its feed would count the same writes
// again.
func recordUsage(st store.Store, log *slog.Logger, retention time.Duration) (store.Store, func()) {
	us, ok := st.(store.UsageStore)
	if feed, fed := st.(store.ChangeFeeder); !ok || fed && feed.FeedsChanges() {
		return st, func() {}
	}
	rec := aggregator.NewRecorder(st, us, aggregator.WithRetention(retention))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		rec.Run(ctx, aggregator.DefaultFlushInterval, func(err error) { log.Warn("recording usage", "err", err) })
	}()
	return rec, func() { cancel(); <-done }
}

func serveUntilDone(ctx context.Context, log *slog.Logger, srv *server.Server, f serveFlags) error {
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return err
	}
	httpSrv := srv.HTTPServer(f.addr)
	errs := make(chan error, 2)
	var grpcSrv *grpc.Server
	if f.grpcAddr != "" {
		if grpcSrv, err = startRLS(log, srv, f, errs); err != nil {
			_ = ln.Close()
			return err
		}
	}
	scheme := "http"
	go func() {
		if f.tlsCert != "" {
			errs <- httpSrv.ServeTLS(ln, f.tlsCert, f.tlsKey)
			return
		}
		errs <- httpSrv.Serve(ln)
	}()
	if f.tlsCert != "" {
		scheme = "https"
	}
	authenticates, _ := srv.Authenticates(ctx)
	log.Info("listening", "url", scheme+"://"+ln.Addr().String(), "authentication", authenticates)
	if !authenticates {
		log.Warn("no API keys: every request is trusted until a key is created (tollgate keys create) or --keys is given")
	}
	select {
	case <-ctx.Done():
		log.Info("stopping")
	case err := <-errs:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), f.shutdownTimeout)
	defer cancel()
	err = httpSrv.Shutdown(sctx)
	if grpcSrv != nil {
		grpcSrv.GracefulStop()
	}
	return errors.Join(err, srv.Close(sctx))
}

// startRLS serves the Envoy rate-limit service on f.grpcAddr.
func startRLS(log *slog.Logger, srv *server.Server, f serveFlags, errs chan<- error) (*grpc.Server, error) {
	file, err := os.Open(f.rlsConfig)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	cfg, err := rls.LoadConfig(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.rlsConfig, err)
	}
	lim, err := f.grpc.limits()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", f.grpcAddr)
	if err != nil {
		return nil, err
	}
	gs := grpc.NewServer(lim.ServerOptions()...)
	rls.New(cfg, srv.Limiter).Register(gs)
	go func() { errs <- gs.Serve(lim.Listener(ln)) }()
	log.Info("Envoy rate-limit service listening", "addr", ln.Addr().String(),
		"max_conns", lim.MaxConnections, "max_streams", lim.MaxConcurrentStreams, "idle_timeout", lim.IdleTimeout)
	return gs, nil
}

// limits returns rls.DefaultLimits with the flags' values.
func (g grpcFlags) limits() (rls.Limits, error) {
	// gRPC has no unlimited message size: 0 would be its 4 MiB.
	if g.maxMessage <= 0 {
		return rls.Limits{}, usagef("--grpc-max-message-size %d: want a positive number of bytes", g.maxMessage)
	}
	for _, c := range []struct {
		name string
		bad  bool
		val  any
	}{
		{"grpc-max-conns", g.maxConns < 0, g.maxConns},
		{"grpc-max-streams", g.maxStreams < 0 || g.maxStreams > math.MaxUint32, g.maxStreams},
		{"grpc-idle-timeout", g.idleTimeout < 0, g.idleTimeout},
		{"grpc-max-connection-age", g.maxAge < 0, g.maxAge},
	} {
		if c.bad {
			return rls.Limits{}, usagef("--%s %v: want a positive value, or 0 for no limit", c.name, c.val)
		}
	}
	lim := rls.DefaultLimits()
	lim.MaxConnections = g.maxConns
	lim.MaxConcurrentStreams = uint32(g.maxStreams)
	lim.MaxRecvMsgSize = g.maxMessage
	lim.IdleTimeout = g.idleTimeout
	lim.MaxConnectionAge = g.maxAge
	return lim, nil
}

func loadKeys(path string) (*server.Keys, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	return server.LoadKeys(file)
}

// isLoopback reports whether addr (host:port) listens on loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func newLogger(g *globals, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	o := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(g.stderr, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(g.stderr, o)), nil
	}
	return nil, usagef("--log-format %q: want text or json", format)
}
