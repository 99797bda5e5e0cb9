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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
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
// It reports each service's median requests/s and their ratio.
func BenchmarkEnvoyOnRedis(b *testing.B) {
	rlBin, tgBin := os.Getenv(envRatelimit), os.Getenv(envTollgate)
	if rlBin == "" || tgBin == "" || redisURL == "" {
		b.Skip("needs " + envRatelimit + ", " + envTollgate + " and a redis-server: make bench-envoy-redis")
	}
	dir := b.TempDir()
	tollgate := startTollgate(b, tgBin, dir)
	ratelimit := startRatelimit(b, rlBin, dir)
	const rounds, round = 5, 3 * time.Second
	for _, clients := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("clients-%d", clients), func(b *testing.B) {
			var tg, rl []float64
			for b.Loop() {
				for i := range rounds {
					// Alternate which goes first, so that neither always
					// meets the machine as the other left it.
					if i%2 == 0 {
						tg = append(tg, load(b, tollgate, clients, round))
						rl = append(rl, load(b, ratelimit, clients, round))
					} else {
						rl = append(rl, load(b, ratelimit, clients, round))
						tg = append(tg, load(b, tollgate, clients, round))
					}
				}
			}
			t, r := median(tg), median(rl)
			b.ReportMetric(t, "tollgate-req/s")
			b.ReportMetric(r, "ratelimit-req/s")
			b.ReportMetric(t/r, "x-ratelimit")
		})
	}
}

// load sends ShouldRateLimit calls to addr from clients clients for d and
// returns the rate of answers.
func load(b *testing.B, addr string, clients int, d time.Duration) float64 {
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
	return float64(ok.Load()) / d.Seconds()
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}

// startTollgate runs tollgate serve on the test's redis-server with the
// rate-limit service on a free port, and returns that port's address.
func startTollgate(b *testing.B, bin, dir string) string {
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
	start(b, exec.Command(bin, "serve", "--store", redisURL, "--addr", httpAddr, "--grpc-addr", grpcAddr, "--rls-config", cfg), nil, true)
	waitPort(b, grpcAddr)
	return grpcAddr
}

// startRatelimit runs envoyproxy/ratelimit on the test's redis-server with
// the same generous limit, and returns its gRPC address.
func startRatelimit(b *testing.B, bin, dir string) string {
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
	start(b, exec.Command(bin), env, false)
	waitPort(b, grpcAddr)
	return grpcAddr
}

// start starts cmd with env added, its output on stderr if show (the
// ratelimit service logs every flush of its statistics without statsd).
func start(b *testing.B, cmd *exec.Cmd, env []string, show bool) {
	cmd.Env = append(os.Environ(), env...)
	if show {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
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
