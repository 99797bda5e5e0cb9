package envoybench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate-rl/tollgate/internal/redislocal"
)

// Environment the benchmark needs (make bench-envoy-redis sets them).
const (
	envRatelimit = "TOLLGATE_RATELIMIT_BIN" // envoyproxy/ratelimit's service_cmd
	envTollgate  = "TOLLGATE_BIN"           // a built tollgate
)

var redisURL string

func TestMain(m *testing.M) { os.Exit(redislocal.Main(m, &redisURL)) }

// BenchmarkEnvoyOnRedis runs Tollgate's rate-limit service (tollgate serve
// --grpc-addr, store redis://) and envoyproxy/ratelimit (its defaults,
// BACKEND_TYPE=redis) on one redis-server, each a process of its own, and
// sends both the same ShouldRateLimit calls from 1, 8 and 32 clients (one
// gRPC connection each, each client its own descriptor value: its own
// key, a generous limit so nothing is denied), in alternating rounds.
// It reports each service's median requests/s, their ratio, and the CPU
// time per request of each service's process, of the redis-server and of
// the load generator (this process). The machine's cores are shared by
// all three, so the generator's CPU per request bounds any ratio: a
// service costing nothing would answer (its peer's CPU + the
// generator's) / the generator's times its peer's rate (ceiling-x).
func BenchmarkEnvoyOnRedis(b *testing.B) {
	rlBin, tgBin := os.Getenv(envRatelimit), os.Getenv(envTollgate)
	if rlBin == "" || tgBin == "" || redisURL == "" {
		b.Skip("needs " + envRatelimit + ", " + envTollgate + " and a redis-server: make bench-envoy-redis")
	}
	dir := b.TempDir()
	redisPID := serverPID(b)
	tollgate := startTollgate(b, tgBin, dir)
	ratelimit := startRatelimit(b, rlBin, dir)
	const rounds, round = 5, 3 * time.Second
	for _, clients := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("clients-%d", clients), func(b *testing.B) {
			var tg, rl []measure
			for b.Loop() {
				for i := range rounds {
					// Alternate which goes first, so that neither always
					// meets the machine as the other left it.
					if i%2 == 0 {
						tg = append(tg, load(b, tollgate, redisPID, clients, round))
						rl = append(rl, load(b, ratelimit, redisPID, clients, round))
					} else {
						rl = append(rl, load(b, ratelimit, redisPID, clients, round))
						tg = append(tg, load(b, tollgate, redisPID, clients, round))
					}
				}
			}
			t, r := medianOf(tg, rateOf), medianOf(rl, rateOf)
			b.ReportMetric(t, "tollgate-req/s")
			b.ReportMetric(r, "ratelimit-req/s")
			b.ReportMetric(t/r, "x-ratelimit")
			b.ReportMetric(medianOf(tg, serviceCPU), "tollgate-cpu-us/req")
			b.ReportMetric(medianOf(rl, serviceCPU), "ratelimit-cpu-us/req")
			b.ReportMetric(medianOf(tg, redisCPU), "tollgate-redis-cpu-us/req")
			b.ReportMetric(medianOf(rl, redisCPU), "ratelimit-redis-cpu-us/req")
			gen := medianOf(append(tg, rl...), loadCPU)
			b.ReportMetric(gen, "loadgen-cpu-us/req")
			if gen > 0 {
				b.ReportMetric((medianOf(rl, serviceCPU)+medianOf(rl, redisCPU)+gen)/gen, "ceiling-x")
			}
		})
	}
}

// measure is one round against one service: its rate, and the CPU time
// per request of the service's process, of the redis-server and of the
// load generator (microseconds; 0 where /proc is not there).
type measure struct{ rate, service, redis, load float64 }

func rateOf(m measure) float64     { return m.rate }
func serviceCPU(m measure) float64 { return m.service }
func redisCPU(m measure) float64   { return m.redis }
func loadCPU(m measure) float64    { return m.load }

func medianOf(ms []measure, f func(measure) float64) float64 {
	v := make([]float64, len(ms))
	for i, m := range ms {
		v[i] = f(m)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// load sends ShouldRateLimit calls to svc from clients clients for d and
// measures the rate of answers and the CPU time they cost.
func load(b *testing.B, svc service, redisPID, clients int, d time.Duration) measure {
	addr := svc.addr
	cpu0, rcpu0, lcpu0 := cpuTime(svc.pid), cpuTime(redisPID), cpuTime(os.Getpid())
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	var firstErr atomic.Value
	for c := range clients {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		client := pb.NewRateLimitServiceClient(conn)
		req := &pb.RateLimitRequest{Domain: "bench", HitsAddend: 1, Descriptors: []*rlcommon.RateLimitDescriptor{{
			Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "key", Value: fmt.Sprintf("client-%d-%d", clients, c)}},
		}}}
		wg.Go(func() {
			defer conn.Close()
			for time.Now().Before(stop) {
				resp, err := client.ShouldRateLimit(context.Background(), req)
				if err != nil || resp.OverallCode != pb.RateLimitResponse_OK {
					if failed.Add(1) == 1 {
						firstErr.Store(fmt.Sprint(resp, err))
					}
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%s: %d calls failed or were limited; first: %v", addr, n, firstErr.Load())
	}
	n := float64(ok.Load())
	return measure{rate: n / d.Seconds(), service: float64(cpuTime(svc.pid)-cpu0) / n, redis: float64(cpuTime(redisPID)-rcpu0) / n,
		load: float64(cpuTime(os.Getpid())-lcpu0) / n}
}

// cpuTime returns the CPU time (user and system) process pid has used, in
// microseconds, from /proc (0 elsewhere).
func cpuTime(pid int) int64 {
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

// serverPID asks the test's redis-server for its process id.
func serverPID(b *testing.B) int {
	conn, err := net.Dial("tcp", strings.TrimPrefix(redisURL, "redis://"))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("INFO server\r\n")); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 8192)
	tmp := make([]byte, 4096)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for !strings.Contains(string(buf), "process_id:") || !strings.Contains(string(buf[strings.Index(string(buf), "process_id:"):]), "\r\n") {
		n, err := conn.Read(tmp)
		if err != nil {
			b.Fatal(err)
		}
		buf = append(buf, tmp[:n]...)
	}
	s := string(buf)
	s = s[strings.Index(s, "process_id:")+len("process_id:"):]
	pid, err := strconv.Atoi(s[:strings.Index(s, "\r\n")])
	if err != nil {
		b.Fatal(err)
	}
	return pid
}

// service is a running rate-limit service: its gRPC address and its
// process.
type service struct {
	addr string
	pid  int
}

// startTollgate runs tollgate serve on the test's redis-server with the
// rate-limit service on a free port, and returns that port's address.
func startTollgate(b *testing.B, bin, dir string) service {
	cfg := filepath.Join(dir, "rls.yaml")
	write(b, cfg, `domains:
  - domain: bench
    descriptors:
      - key: key
        entity: "{value}"
        resource: api
        limits: ["rps:1000000000/sec"]
`)
	grpcAddr, httpAddr := freeAddr(b), freeAddr(b)
	pid := start(b, exec.Command(bin, "serve", "--store", redisURL, "--addr", httpAddr, "--grpc-addr", grpcAddr, "--rls-config", cfg), nil, true)
	waitPort(b, grpcAddr)
	return service{grpcAddr, pid}
}

// startRatelimit runs envoyproxy/ratelimit on the test's redis-server with
// the same generous limit, and returns its gRPC address.
func startRatelimit(b *testing.B, bin, dir string) service {
	root := filepath.Join(dir, "runtime")
	if err := os.MkdirAll(filepath.Join(root, "ratelimit", "config"), 0o755); err != nil {
		b.Fatal(err)
	}
	write(b, filepath.Join(root, "ratelimit", "config", "bench.yaml"), `domain: bench
descriptors:
  - key: key
    rate_limit:
      unit: second
      requests_per_unit: 1000000000
`)
	grpcAddr, httpAddr, debugAddr := freeAddr(b), freeAddr(b), freeAddr(b)
	host := func(a string) (string, string) { h, p, _ := net.SplitHostPort(a); return h, p }
	gh, gp := host(grpcAddr)
	hh, hp := host(httpAddr)
	dh, dp := host(debugAddr)
	redis := redisURL[len("redis://"):]
	env := []string{"USE_STATSD=false", "LOG_LEVEL=error", "BACKEND_TYPE=redis", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + redis,
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"GRPC_HOST=" + gh, "GRPC_PORT=" + gp, "HOST=" + hh, "PORT=" + hp, "DEBUG_HOST=" + dh, "DEBUG_PORT=" + dp}
	pid := start(b, exec.Command(bin), env, false)
	waitPort(b, grpcAddr)
	return service{grpcAddr, pid}
}

// start starts cmd with env added, its output on stderr if show (the
// ratelimit service logs every flush of its statistics without statsd).
func start(b *testing.B, cmd *exec.Cmd, env []string, show bool) int {
	cmd.Env = append(os.Environ(), env...)
	if show {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

func write(b *testing.B, path, s string) {
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		b.Fatal(err)
	}
}

func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// waitPort waits until addr accepts connections (the services start in
// well under the deadline).
func waitPort(b *testing.B, addr string) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("%s did not listen within 30 s", addr)
}
