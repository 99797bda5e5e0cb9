package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/internal/cputime"
	"github.com/tollgate-rl/tollgate/server"
)

// benchResult is one load run.
type benchResult struct {
	Mode       string  `json:"mode"`  // "http" or "in-process"
	Route      string  `json:"route"` // see benchRoutes
	Clients    int     `json:"clients"`
	Requests   int64   `json:"requests"`
	Errors     int64   `json:"errors"`
	PerSecond  float64 `json:"per_second"`
	P50        int64   `json:"p50_ns"`
	P99        int64   `json:"p99_ns"`
	DurationMS int64   `json:"duration_ms"`
	// CPUPerRequest is this process's CPU time (user and system) per
	// request, in microseconds: over HTTP on the loopback server, the
	// server's and the load's together (with --server, the load's alone).
	CPUPerRequest float64 `json:"cpu_us_per_request"`
	// ServerCPUPerRequest is the server's CPU time per request, in
	// microseconds, read from its metrics (process_cpu_seconds_total)
	// before and after the run: with --server only, where the server is a
	// process of its own; 0 where unknown.
	ServerCPUPerRequest float64 `json:"server_cpu_us_per_request,omitempty"`
}

func newBenchCmd(g *globals) *cobra.Command {
	var clients, routes string
	var duration time.Duration
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure acquire+commit over HTTP against the same in-process",
		Long: `Start a server on a loopback port over --store (or use --server), and run
acquire+commit (one call with commit: true, keep-alive connections) from
each number of concurrent clients for --duration; then run the same
acquires in-process on the same store, as the baseline. --routes adds the
other hot paths over HTTP: acquire (without commit: the leases stay open),
commit (POST /v1/leases/{id}/commit of the leases the acquire route left
open, until they run out) and available (GET /v1/available). Each client uses
its own entity, so the figures measure the path, not contention on one
bucket. It prints throughput, p50/p99 latencies and the CPU time this
process used per request (user and system: over HTTP, the server's and the
load's together, since both run here; with --server, the load's alone).
With --server it also prints the server's CPU time per request, which it
reads from the server's /metrics (process_cpu_seconds_total) before and
after each run: to see what the server alone costs, start it as a process
of its own and point --server at it.`,
		Example: `  tollgate bench --store memory: --clients 1,8,32 --duration 3s
  tollgate bench --store embedded:/tmp/bench.db -o json
  tollgate serve --store memory: --addr 127.0.0.1:8080 &
  tollgate bench --server http://127.0.0.1:8080 --routes acquire+commit,commit,available`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns, err := parseClients(clients)
			if err != nil {
				return err
			}
			rs, err := parseRoutes(routes)
			if err != nil {
				return err
			}
			results, err := runBench(cmd.Context(), g, ns, rs, duration)
			if err != nil {
				return err
			}
			return g.printOut(results, func(w *tabwriter.Writer) {
				row(w, "MODE", "ROUTE", "CLIENTS", "REQUESTS", "ERRORS", "PER SECOND", "P50", "P99", "CPU/REQUEST", "SERVER CPU/REQUEST")
				for _, r := range results {
					server := "-"
					if r.ServerCPUPerRequest > 0 {
						server = fmt.Sprintf("%.1fµs", r.ServerCPUPerRequest)
					}
					row(w, r.Mode, r.Route, r.Clients, r.Requests, r.Errors, fmt.Sprintf("%.0f", r.PerSecond),
						time.Duration(r.P50), time.Duration(r.P99), fmt.Sprintf("%.1fµs", r.CPUPerRequest), server)
				}
			})
		},
	}
	cmd.Flags().StringVar(&clients, "clients", "1,8,32", "comma-separated numbers of concurrent clients")
	cmd.Flags().DurationVar(&duration, "duration", 3*time.Second, "how long each run lasts")
	cmd.Flags().StringVar(&routes, "routes", routeAcquireCommit, "comma-separated routes to load: "+strings.Join(benchRoutes, ", "))
	return cmd
}

func parseClients(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 {
			return nil, usagef("--clients %q: want numbers from 1 to 1024", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// The routes tollgate bench loads over HTTP, in the order it runs them:
// commit ends the leases acquire left open.
const (
	routeAcquireCommit = "acquire+commit"
	routeAcquire       = "acquire"
	routeCommit        = "commit"
	routeAvailable     = "available"
)

var benchRoutes = []string{routeAcquireCommit, routeAcquire, routeCommit, routeAvailable}

// parseRoutes reads --routes, in benchRoutes' order; commit brings acquire.
func parseRoutes(s string) ([]string, error) {
	want := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(benchRoutes, f) {
			return nil, usagef("--routes: unknown route %q (want %s)", f, strings.Join(benchRoutes, ", "))
		}
		want[f] = true
	}
	if want[routeCommit] {
		want[routeAcquire] = true
	}
	var out []string
	for _, r := range benchRoutes {
		if want[r] {
			out = append(out, r)
		}
	}
	return out, nil
}

func runBench(ctx context.Context, g *globals, clients []int, routes []string, d time.Duration) ([]benchResult, error) {
	st, closeStore, err := g.openStore(ctx, true)
	if err != nil {
		return nil, err
	}
	defer closeStore()
	srv, err := server.New(st, server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	defer srv.Close(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := srv.HTTPServer(ln.Addr().String())
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	base := "http://" + ln.Addr().String()
	if g.server != "" {
		base = strings.TrimRight(g.server, "/")
	}
	lim, err := srv.Limiter(ctx, g.namespace)
	if err != nil {
		return nil, err
	}
	var out []benchResult
	for _, n := range clients {
		h, err := newHTTPBench(base, g.apiKey, g.namespace, n)
		if err != nil {
			return nil, err
		}
		for _, route := range routes {
			out = append(out, h.load(route, n, d, g.server != ""))
			if route == routeAcquireCommit {
				out = append(out, load("in-process", route, n, d, libAcquirer(ctx, lim)))
			}
		}
	}
	return out, nil
}

// benchLimit is generous enough never to refuse.
var benchLimit = tollgate.PerSecond("rps", 1_000_000_000)

// errRunOut stops a client of load before the run's end: it has nothing
// left to do (the commit route, out of open leases).
var errRunOut = errors.New("nothing left to do")

// load runs op from n goroutines for d; op(i) is one request of client i.
func load(mode, route string, n int, d time.Duration, op func(i int) error) benchResult {
	var requests, errs atomic.Int64
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	cpu := cputime.Process()
	start := time.Now()
	stop := start.Add(d)
	for i := range n {
		wg.Go(func() {
			for time.Now().Before(stop) {
				t := time.Now()
				if err := op(i); errors.Is(err, errRunOut) {
					return
				} else if err != nil {
					errs.Add(1)
					continue
				}
				lat[i] = append(lat[i], time.Since(t))
				requests.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cputime.Process()-cpu
	all := slices.Concat(lat...)
	slices.Sort(all)
	r := benchResult{Mode: mode, Route: route, Clients: n, Requests: requests.Load(), Errors: errs.Load(),
		PerSecond: float64(requests.Load()) / elapsed.Seconds(), DurationMS: elapsed.Milliseconds()}
	if len(all) > 0 {
		r.P50, r.P99 = int64(all[len(all)/2]), int64(all[len(all)*99/100])
	}
	if n := requests.Load() + errs.Load(); n > 0 {
		r.CPUPerRequest = float64(cpu.Nanoseconds()) / 1000 / float64(n)
	}
	return r
}

func libAcquirer(ctx context.Context, lim *tollgate.Limiter) func(int) error {
	limits := tollgate.WithLimits(benchLimit)
	return func(i int) error {
		le, err := lim.Acquire(ctx, "bench-"+strconv.Itoa(i), "bench", tollgate.Consume{"rps": 1}, limits)
		if err != nil {
			return err
		}
		return le.Commit(ctx)
	}
}
