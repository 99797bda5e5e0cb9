package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
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
	Mode       string  `json:"mode"` // "http" or "in-process"
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
}

func newBenchCmd(g *globals) *cobra.Command {
	var clients string
	var duration time.Duration
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure acquire+commit over HTTP against the same in-process",
		Long: `Start a server on a loopback port over --store (or use --server), and run
acquire+commit (one call with commit: true, keep-alive connections) from
each number of concurrent clients for --duration; then run the same
acquires in-process on the same store, as the baseline. Each client uses
its own entity, so the figures measure the path, not contention on one
bucket. It prints throughput, p50/p99 latencies and the CPU time this
process used per request (user and system: over HTTP, the server's and the
load's together, since both run here; with --server, the load's alone).`,
		Example: `  tollgate bench --store memory: --clients 1,8,32 --duration 3s
  tollgate bench --store embedded:/tmp/bench.db -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns, err := parseClients(clients)
			if err != nil {
				return err
			}
			results, err := runBench(cmd.Context(), g, ns, duration)
			if err != nil {
				return err
			}
			return g.printOut(results, func(w *tabwriter.Writer) {
				row(w, "MODE", "CLIENTS", "REQUESTS", "ERRORS", "PER SECOND", "P50", "P99", "CPU/REQUEST")
				for _, r := range results {
					row(w, r.Mode, r.Clients, r.Requests, r.Errors, fmt.Sprintf("%.0f", r.PerSecond),
						time.Duration(r.P50), time.Duration(r.P99), fmt.Sprintf("%.1fµs", r.CPUPerRequest))
				}
			})
		},
	}
	cmd.Flags().StringVar(&clients, "clients", "1,8,32", "comma-separated numbers of concurrent clients")
	cmd.Flags().DurationVar(&duration, "duration", 3*time.Second, "how long each run lasts")
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

func runBench(ctx context.Context, g *globals, clients []int, d time.Duration) ([]benchResult, error) {
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
		op, err := httpAcquirer(base, g.apiKey, g.namespace, n)
		if err != nil {
			return nil, err
		}
		out = append(out, load("http", n, d, op))
		out = append(out, load("in-process", n, d, libAcquirer(ctx, lim)))
	}
	return out, nil
}

// benchLimit is generous enough never to refuse.
var benchLimit = tollgate.PerSecond("rps", 1_000_000_000)

// load runs op from n goroutines for d; op(i) is one acquire by client i.
func load(mode string, n int, d time.Duration, op func(i int) error) benchResult {
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
				if err := op(i); err != nil {
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
	r := benchResult{Mode: mode, Clients: n, Requests: requests.Load(), Errors: errs.Load(),
		PerSecond: float64(requests.Load()) / elapsed.Seconds(), DurationMS: elapsed.Milliseconds()}
	if len(all) > 0 {
		r.P50, r.P99 = int64(all[len(all)/2]), int64(all[len(all)*99/100])
	}
	if n := requests.Load() + errs.Load(); n > 0 {
		r.CPUPerRequest = float64(cpu.Nanoseconds()) / 1000 / float64(n)
	}
	return r
}

// httpAcquirer returns op for load: one POST /v1/acquire with commit by
// client i, over keep-alive connections, its answer read whole and its
// status checked. Each client's request is built once and sent again (as
// net/http allows once the previous response's body is closed), so the
// generator, which shares the machine with the server, spends its time on
// HTTP rather than on building requests (URL parsing and header maps were
// about 6% of its CPU time).
func httpAcquirer(base, key, ns string, n int) (func(int) error, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: n, MaxIdleConnsPerHost: n, IdleConnTimeout: time.Minute}, Timeout: 10 * time.Second}
	reqs := make([]*http.Request, n)
	for i := range reqs {
		body, err := json.Marshal(map[string]any{"entity": "bench-" + strconv.Itoa(i), "resource": "bench",
			"consume": map[string]int64{"rps": 1}, "limits": []string{benchLimit.String()}, "commit": true})
		if err != nil {
			return nil, err
		}
		// As http.NewRequest with a bytes.Reader: the length and GetBody
		// (which lets the transport resend on a connection that died
		// before the request went out) are set.
		req, err := http.NewRequest("POST", base+"/v1/acquire", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Tollgate-Namespace", ns)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		reqs[i] = req
	}
	return func(i int) error {
		req := reqs[i]
		// A new body each time: the transport may close the last one
		// from another goroutine after the response came.
		body, _ := req.GetBody()
		req.Body = body
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}, nil
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
