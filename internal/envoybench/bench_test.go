package envoybench

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-rl/tollgate/internal/redislocal"
)

// Environment the benchmarks need (make bench-envoy-redis and make
// bench-peers set them).
const (
	envRatelimit = "TOLLGATE_RATELIMIT_BIN" // envoyproxy/ratelimit's service_cmd
	envTollgate  = "TOLLGATE_BIN"           // a built tollgate
)

var redisURL string

func TestMain(m *testing.M) { os.Exit(redislocal.Main(m, &redisURL)) }

// BenchmarkEnvoyOnRedis runs Tollgate's rate-limit service (tollgate serve
// --grpc-addr) twice, on the memory store (its fastest) and on the test's
// redis-server, and envoyproxy/ratelimit (its defaults, BACKEND_TYPE=redis)
// on the same redis-server, each a process of its own, and sends them the
// same ShouldRateLimit calls from 1, 8 and 32 clients (one gRPC connection
// each, one hit of a generous limit: nothing is denied) in alternating
// rounds: each client on a key of its own ("own"), and all on one ("hot").
// It reports each service's median requests/s, the ratios to ratelimit's,
// and the CPU time per request of each service's process, of the
// redis-server and of the load generator (this process). The machine's
// cores are shared by all of them, so the generator's CPU per request
// bounds any ratio (ceiling-x, see ceiling).
func BenchmarkEnvoyOnRedis(b *testing.B) {
	rlBin, tgBin := os.Getenv(envRatelimit), os.Getenv(envTollgate)
	if rlBin == "" || tgBin == "" || redisURL == "" {
		b.Skip("needs " + envRatelimit + ", " + envTollgate + " and a redis-server: make bench-envoy-redis")
	}
	dir := b.TempDir()
	redisPID := serverPID(b)
	services := []struct {
		name     string
		addr     string
		pid, rpd int
	}{
		{name: "tollgate-memory"}, {name: "tollgate-redis"}, {name: "ratelimit"},
	}
	mem := startTollgate(b, tgBin, filepath.Join(dir, "memory"), "memory:")
	rds := startTollgate(b, tgBin, filepath.Join(dir, "redis"), redisURL)
	rl := startRatelimit(b, rlBin, dir)
	services[0].addr, services[0].pid = mem.grpc, mem.pid
	services[1].addr, services[1].pid, services[1].rpd = rds.grpc, rds.pid, redisPID
	services[2].addr, services[2].pid, services[2].rpd = rl.grpc, rl.pid, redisPID
	const rounds = 7
	d := roundLength(b, 2*time.Second)
	for _, keys := range []string{"own", "hot"} {
		for _, clients := range []int{1, 8, 32} {
			if keys == "hot" && clients == 1 {
				continue // one client is its own key
			}
			b.Run(fmt.Sprintf("%s/clients-%d", keys, clients), func(b *testing.B) {
				calls := envoyCalls(clients, keys == "hot")
				ms := make([][]measure, len(services))
				for b.Loop() {
					for i := range rounds {
						// Rotate which goes first, so that none always
						// meets the machine as another left it.
						for j := range services {
							k := (i + j) % len(services)
							s := services[k]
							m, err := loadGRPC(s.addr, s.pid, s.rpd, calls, d)
							if err != nil {
								b.Fatalf("%s: %v", s.name, err)
							}
							ms[k] = append(ms[k], m)
						}
					}
				}
				peer := ms[len(services)-1]
				r := medianOf(peer, rateOf)
				var all []measure
				for k, s := range services {
					all = append(all, ms[k]...)
					rate := medianOf(ms[k], rateOf)
					b.ReportMetric(rate, s.name+"-req/s")
					if k < len(services)-1 {
						b.ReportMetric(rate/r, s.name+"-x")
						b.ReportMetric(pairedRatio(ms[k], peer), s.name+"-x-paired")
					}
					b.ReportMetric(medianOf(ms[k], serviceCPU), s.name+"-cpu-us/req")
					if s.rpd != 0 {
						b.ReportMetric(medianOf(ms[k], storeCPU), s.name+"-redis-cpu-us/req")
					}
				}
				gen := medianOf(all, loadCPU)
				b.ReportMetric(gen, "loadgen-cpu-us/req")
				b.ReportMetric(ceiling(peer, gen), "ceiling-x")
			})
		}
	}
}

// envoyCalls returns clients ShouldRateLimit calls of domain bench: each
// of a descriptor value of its own, or all of one if hot.
func envoyCalls(clients int, hot bool) []grpcCall {
	calls := make([]grpcCall, clients)
	for c := range calls {
		value := clientKey(clients, c)
		if hot {
			value = "hot"
		}
		req, err := proto.Marshal(&pb.RateLimitRequest{Domain: "bench", HitsAddend: 1, Descriptors: []*rlcommon.RateLimitDescriptor{{
			Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "key", Value: value}},
		}}})
		if err != nil {
			panic(err) // a fixed, valid message
		}
		calls[c] = grpcCall{envoyMethod, req, checkEnvoy}
	}
	return calls
}

// envoyMethod is ShouldRateLimit's full name.
const envoyMethod = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// checkEnvoy accepts a RateLimitResponse whose overall code (field 1) is
// OK.
func checkEnvoy(b []byte) error {
	code := uint64(0)
	err := eachField(b, func(num protowire.Number, v uint64, _ []byte) error {
		if num == 1 {
			code = v
		}
		return nil
	})
	if err == nil && code != uint64(pb.RateLimitResponse_OK) {
		err = fmt.Errorf("overall code %v", pb.RateLimitResponse_Code(code))
	}
	return err
}

// serverPID asks the test's redis-server for its process id.
func serverPID(tb testing.TB) int {
	conn, err := net.Dial("tcp", strings.TrimPrefix(redisURL, "redis://"))
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("INFO server\r\n")); err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, 0, 8192)
	tmp := make([]byte, 4096)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for !strings.Contains(string(buf), "process_id:") || !strings.Contains(string(buf[strings.Index(string(buf), "process_id:"):]), "\r\n") {
		n, err := conn.Read(tmp)
		if err != nil {
			tb.Fatal(err)
		}
		buf = append(buf, tmp[:n]...)
	}
	s := string(buf)
	s = s[strings.Index(s, "process_id:")+len("process_id:"):]
	pid, err := strconv.Atoi(s[:strings.Index(s, "\r\n")])
	if err != nil {
		tb.Fatal(err)
	}
	return pid
}

// tollgateService is a running tollgate serve: its gRPC (Envoy
// rate-limit service) and HTTP addresses and its process.
type tollgateService struct {
	grpc, http string
	pid        int
}

// startTollgate runs tollgate serve on store with the rate-limit service
// (domain bench: descriptor key "key", each value an entity, a generous
// limit) on a free port, and waits for both its ports.
func startTollgate(tb testing.TB, bin, dir, store string) tollgateService {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	cfg := filepath.Join(dir, "rls.yaml")
	write(tb, cfg, rlsConfig(generousLimit))
	grpcAddr, httpAddr := freeAddr(tb), freeAddr(tb)
	// A store call may take up to 10 s (not 1): the machine is shared, and a
	// stall of a loaded machine should slow a round, not end the run.
	pid := start(tb, exec.Command(bin, "serve", "--store", store, "--store-timeout", "10s", "--addr", httpAddr, "--grpc-addr", grpcAddr, "--rls-config", cfg), nil, true)
	waitPort(tb, grpcAddr)
	waitPort(tb, httpAddr)
	return tollgateService{grpcAddr, httpAddr, pid}
}

// startRatelimit runs envoyproxy/ratelimit on the test's redis-server with
// the same generous limit, and returns its gRPC address.
func startRatelimit(tb testing.TB, bin, dir string) tollgateService {
	root := filepath.Join(dir, "runtime")
	if err := os.MkdirAll(filepath.Join(root, "ratelimit", "config"), 0o755); err != nil {
		tb.Fatal(err)
	}
	write(tb, filepath.Join(root, "ratelimit", "config", "bench.yaml"), fmt.Sprintf(`domain: bench
descriptors:
  - key: key
    rate_limit:
      unit: second
      requests_per_unit: %d
`, generousLimit))
	grpcAddr, httpAddr, debugAddr := freeAddr(tb), freeAddr(tb), freeAddr(tb)
	host := func(a string) (string, string) { h, p, _ := net.SplitHostPort(a); return h, p }
	gh, gp := host(grpcAddr)
	hh, hp := host(httpAddr)
	dh, dp := host(debugAddr)
	redis := redisURL[len("redis://"):]
	env := []string{"USE_STATSD=false", "LOG_LEVEL=error", "BACKEND_TYPE=redis", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + redis,
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"GRPC_HOST=" + gh, "GRPC_PORT=" + gp, "HOST=" + hh, "PORT=" + hp, "DEBUG_HOST=" + dh, "DEBUG_PORT=" + dp}
	pid := start(tb, exec.Command(bin), env, false)
	waitPort(tb, grpcAddr)
	return tollgateService{grpc: grpcAddr, http: httpAddr, pid: pid}
}

// rlsConfig is the rate-limit service's configuration for the benchmarks:
// domain bench, each descriptor value an entity of its own, with limit
// requests a second.
func rlsConfig(limit int) string {
	return fmt.Sprintf(`domains:
  - domain: bench
    descriptors:
      - key: key
        entity: "{value}"
        resource: api
        limits: ["rps:%d/sec"]
`, limit)
}
