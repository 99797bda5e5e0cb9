package envoybench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
)

// rawCodec sends a request's wire bytes as they are and copies the
// answer's into a reused buffer: the load generator shares the machine
// with the services it measures, so it marshals each client's request
// once, before the round, and decodes of the answer only what it checks.
// Its name is "proto", so the content type is the one every server of
// these protocols expects.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	out := v.(*[]byte)
	n := data.Len()
	if cap(*out) < n {
		*out = make([]byte, n)
	}
	*out = (*out)[:n]
	data.CopyTo(*out)
	return nil
}

// grpcCall is what one client of a round sends over gRPC: the method, the
// request's wire bytes, and a check of the answer's (an error for an
// answer that is not a plain grant).
type grpcCall struct {
	method string
	req    []byte
	check  func([]byte) error
}

// httpCall is what one client of a round sends over HTTP: a POST of body
// to path at addr, and a check of the answer's body.
type httpCall struct {
	addr, path string
	body       []byte
	check      func([]byte) error
}

// measure is one round against one service: its rate, and the CPU time
// per request of the service's process, of its store's (the redis-server;
// 0 without one) and of the load generator (microseconds; 0 where /proc
// is not there).
type measure struct{ rate, service, store, load float64 }

func rateOf(m measure) float64     { return m.rate }
func serviceCPU(m measure) float64 { return m.service }
func storeCPU(m measure) float64   { return m.store }
func loadCPU(m measure) float64    { return m.load }

func medianOf(ms []measure, f func(measure) float64) float64 {
	v := make([]float64, len(ms))
	for i, m := range ms {
		v[i] = f(m)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// pairedRatio is the median over rounds of a's rate over b's in the same
// round (a[i] and b[i] ran one after the other): steadier than the ratio
// of the medians when the machine's load drifts during a run.
func pairedRatio(a, b []measure) float64 {
	r := make([]measure, min(len(a), len(b)))
	for i := range r {
		r[i].rate = a[i].rate / b[i].rate
	}
	return medianOf(r, rateOf)
}

// ceiling is the ratio to peer's rate that a service costing no CPU at
// all would reach on the same cores: the load generator's CPU per request
// against the peer's whole (service, store and generator).
func ceiling(peer []measure, gen float64) float64 {
	if gen <= 0 {
		return 0
	}
	return (medianOf(peer, serviceCPU) + medianOf(peer, storeCPU) + gen) / gen
}

// round runs clients goroutines, each calling op(client) in a loop for d,
// and measures the rate of successful calls and their CPU: of the process
// pid (the service), of storePID (0: none) and of this process.
func round(pid, storePID, clients int, d time.Duration, op func(client int) error) (measure, error) {
	cpu0, scpu0, lcpu0 := cpuTime(pid), cpuTime(storePID), cpuTime(os.Getpid())
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for c := range clients {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if err := op(c); err != nil {
					if failed.Add(1) == 1 {
						firstErr.Store(err)
					}
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return measure{}, fmt.Errorf("%d calls failed; first: %v", n, firstErr.Load())
	}
	n := float64(ok.Load())
	if n == 0 {
		return measure{}, fmt.Errorf("no call answered in %v", d)
	}
	return measure{rate: n / d.Seconds(), service: float64(cpuTime(pid)-cpu0) / n,
		store: float64(cpuTime(storePID)-scpu0) / n, load: float64(cpuTime(os.Getpid())-lcpu0) / n}, nil
}

// envClient chooses the load generator's clients: its own (the default:
// h2Conn for gRPC, h1Conn for HTTP) or, set to "go", the Go libraries'
// (grpc-go's client with rawCodec, net/http's), to compare what each
// costs.
const envClient = "TOLLGATE_BENCH_CLIENT"

// goClients reports whether envClient asks for the Go libraries' clients.
func goClients() bool { return os.Getenv(envClient) == "go" }

// loadGRPC sends calls[c] from client c (one connection each) to addr for
// d; see round.
func loadGRPC(addr string, pid, storePID int, calls []grpcCall, d time.Duration) (measure, error) {
	if goClients() {
		return loadGRPCGo(addr, pid, storePID, calls, d)
	}
	conns := make([]*h2Conn, len(calls))
	for c, call := range calls {
		conn, err := dialH2(addr, call.method, call.req)
		if err != nil {
			return measure{}, err
		}
		defer conn.Close()
		conns[c] = conn
	}
	return round(pid, storePID, len(calls), d, func(c int) error {
		resp, err := conns[c].call()
		if err != nil {
			return err
		}
		return calls[c].check(resp)
	})
}

// loadGRPCGo is loadGRPC with grpc-go's client.
func loadGRPCGo(addr string, pid, storePID int, calls []grpcCall, d time.Duration) (measure, error) {
	conns := make([]*grpc.ClientConn, len(calls))
	for c := range calls {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})))
		if err != nil {
			return measure{}, err
		}
		defer conn.Close()
		conns[c] = conn
	}
	bufs := make([][]byte, len(calls))
	return round(pid, storePID, len(calls), d, func(c int) error {
		call := &calls[c]
		if err := conns[c].Invoke(context.Background(), call.method, call.req, &bufs[c]); err != nil {
			return err
		}
		return call.check(bufs[c])
	})
}

// loadHTTP posts calls[c] from client c (one keep-alive connection each)
// for d; see round.
func loadHTTP(pid, storePID int, calls []httpCall, d time.Duration) (measure, error) {
	if goClients() {
		return loadHTTPGo(pid, storePID, calls, d)
	}
	conns := make([]*h1Conn, len(calls))
	for c, call := range calls {
		conn, err := dialH1(call.addr, call.path, call.body)
		if err != nil {
			return measure{}, err
		}
		defer conn.Close()
		conns[c] = conn
	}
	return round(pid, storePID, len(calls), d, func(c int) error {
		status, body, err := conns[c].call()
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("status %d: %s", status, body)
		}
		return calls[c].check(body)
	})
}

// loadHTTPGo is loadHTTP with net/http's client.
func loadHTTPGo(pid, storePID int, calls []httpCall, d time.Duration) (measure, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: len(calls), MaxIdleConnsPerHost: len(calls)}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	reqs := make([]*http.Request, len(calls))
	for c, call := range calls {
		req, err := http.NewRequest("POST", "http://"+call.addr+call.path, bytes.NewReader(call.body))
		if err != nil {
			return measure{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		reqs[c] = req
	}
	bufs := make([]bytes.Buffer, len(calls))
	return round(pid, storePID, len(calls), d, func(c int) error {
		req := reqs[c]
		// A new body each time: the transport may close the last one from
		// another goroutine after the response came.
		req.Body, _ = req.GetBody()
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		buf := &bufs[c]
		buf.Reset()
		if _, err := io.Copy(buf, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d: %s", resp.StatusCode, buf.Bytes())
		}
		return calls[c].check(buf.Bytes())
	})
}

// cpuTime returns the CPU time (user and system) process pid has used, in
// microseconds, from /proc (0 elsewhere, and for pid 0).
func cpuTime(pid int) int64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command (in parentheses, which may hold
	// spaces): utime and stime are the 12th and 13th after it, in ticks.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return (ut + st) * 1_000_000 / clockTicks
}

// clockTicks is the kernel's USER_HZ, 100 on Linux.
const clockTicks = 100

// start starts cmd with env added, its output on stderr if show (the
// ratelimit service logs every flush of its statistics without statsd).
func start(tb testing.TB, cmd *exec.Cmd, env []string, show bool) int {
	cmd.Env = append(os.Environ(), env...)
	if show {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

func write(tb testing.TB, path, s string) {
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func freeAddr(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// waitPort waits until addr accepts connections (the services start in
// well under the deadline).
func waitPort(tb testing.TB, addr string) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("%s did not listen within 30 s", addr)
}

// envRound overrides the length of a round (a Go duration), e.g. to try
// a benchmark out quickly.
const envRound = "TOLLGATE_BENCH_ROUND"

// roundLength is the length of a benchmark's rounds: def, or envRound's.
func roundLength(tb testing.TB, def time.Duration) time.Duration {
	s := os.Getenv(envRound)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		tb.Fatalf("%s=%q: want a positive duration", envRound, s)
	}
	return d
}
