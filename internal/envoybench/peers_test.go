package envoybench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// envGubernator names gubernator's binary (make bench-peers sets it).
const envGubernator = "TOLLGATE_GUBERNATOR_BIN"

// BenchmarkPeers runs Tollgate (tollgate serve --store memory:, with its
// Envoy rate-limit service) and gubernator (v2.13.0, one node: member-list
// discovery pointed at itself) as processes, and sends each the same load
// in alternating rounds: over gRPC from 1, 8 and 32 clients, Tollgate's
// ShouldRateLimit against gubernator's GetRateLimits; over HTTP from 32,
// Tollgate's POST /v1/acquire with commit against gubernator's gateway
// (POST /v1/GetRateLimits). Each client has a connection and a key of its
// own and one hit of a generous limit per call: nothing is denied, and a
// denial fails the benchmark. It reports each service's median requests/s,
// their ratio, the CPU time per request of each service's process and of
// the load generator, and the ceiling (see ceiling).
func BenchmarkPeers(b *testing.B) {
	gbBin, tgBin := os.Getenv(envGubernator), os.Getenv(envTollgate)
	if gbBin == "" || tgBin == "" {
		b.Skip("needs " + envGubernator + " and " + envTollgate + ": make bench-peers")
	}
	dir := b.TempDir()
	tg := startTollgate(b, tgBin, dir, "memory:")
	gb := startGubernator(b, gbBin)
	const rounds = 7
	d := roundLength(b, 3*time.Second)
	type side struct {
		name string
		run  func(clients int) (measure, error)
	}
	grpcPair := func(clients int) [2]side {
		return [2]side{
			{"tollgate", func(int) (measure, error) {
				return loadGRPC(tg.grpc, tg.pid, 0, envoyCalls(clients, false), d)
			}},
			{"gubernator", func(int) (measure, error) {
				return loadGRPC(gb.grpc, gb.pid, 0, gubernatorCalls(clients), d)
			}},
		}
	}
	httpPair := func(clients int) [2]side {
		return [2]side{
			{"tollgate", func(int) (measure, error) { return loadHTTP(tg.pid, 0, acquireCalls(tg.http, clients), d) }},
			{"gubernator", func(int) (measure, error) { return loadHTTP(gb.pid, 0, gatewayCalls(gb.http, clients), d) }},
		}
	}
	cases := []struct {
		name    string
		clients int
		pair    func(int) [2]side
	}{
		{"grpc/clients-1", 1, grpcPair},
		{"grpc/clients-8", 8, grpcPair},
		{"grpc/clients-32", 32, grpcPair},
		{"http/clients-32", 32, httpPair},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var ms [2][]measure
			pair := c.pair(c.clients)
			for b.Loop() {
				for i := range rounds {
					// Alternate which goes first, so that neither always
					// meets the machine as the other left it.
					for j := range 2 {
						k := (i + j) % 2
						m, err := pair[k].run(c.clients)
						if err != nil {
							b.Fatalf("%s: %v", pair[k].name, err)
						}
						ms[k] = append(ms[k], m)
					}
				}
			}
			t, g := medianOf(ms[0], rateOf), medianOf(ms[1], rateOf)
			b.ReportMetric(t, "tollgate-req/s")
			b.ReportMetric(g, "gubernator-req/s")
			b.ReportMetric(t/g, "x-gubernator")
			b.ReportMetric(pairedRatio(ms[0], ms[1]), "x-gubernator-paired")
			b.ReportMetric(medianOf(ms[0], serviceCPU), "tollgate-cpu-us/req")
			b.ReportMetric(medianOf(ms[1], serviceCPU), "gubernator-cpu-us/req")
			gen := medianOf(append(ms[0], ms[1]...), loadCPU)
			b.ReportMetric(gen, "loadgen-cpu-us/req")
			b.ReportMetric(ceiling(ms[1], gen), "ceiling-x")
		})
	}
}

// gubernatorService is a running gubernator node.
type gubernatorService struct {
	grpc, http string
	pid        int
}

// startGubernator runs gubernator as one node: member-list discovery with
// itself as the only known node, tracing off, logging errors only.
func startGubernator(tb testing.TB, bin string) gubernatorService {
	grpcAddr, httpAddr, mlAddr := freeAddr(tb), freeAddr(tb), freeAddr(tb)
	env := []string{"GUBER_GRPC_ADDRESS=" + grpcAddr, "GUBER_HTTP_ADDRESS=" + httpAddr,
		"GUBER_ADVERTISE_ADDRESS=" + grpcAddr, "GUBER_PEER_DISCOVERY_TYPE=member-list",
		"GUBER_MEMBERLIST_ADDRESS=" + mlAddr, "GUBER_MEMBERLIST_BIND_ADDRESS=" + mlAddr,
		"GUBER_MEMBERLIST_KNOWN_NODES=" + mlAddr,
		"GUBER_LOG_LEVEL=error", "OTEL_TRACES_EXPORTER=none"}
	pid := start(tb, exec.Command(bin), env, true)
	waitPort(tb, grpcAddr)
	waitPort(tb, httpAddr)
	g := gubernatorService{grpcAddr, httpAddr, pid}
	// The node owns every key once it has seen itself in the member list;
	// until then it answers with an error. Wait for a grant.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := loadGRPC(grpcAddr, pid, 0, gubernatorCalls(1), 50*time.Millisecond)
		if err == nil {
			return g
		}
		if time.Now().After(deadline) {
			tb.Fatalf("gubernator at %s does not grant: %v", grpcAddr, err)
		}
	}
}

// Gubernator's API (gubernator.proto, v2.13.0): the field numbers the
// benchmark writes and reads.
const (
	gubernatorMethod = "/pb.gubernator.V1/GetRateLimits"

	guberRequests  = 1 // GetRateLimitsReq.requests, RateLimitReq
	guberName      = 1 // RateLimitReq.name
	guberUniqueKey = 2 // RateLimitReq.unique_key
	guberHits      = 3 // RateLimitReq.hits
	guberLimit     = 4 // RateLimitReq.limit
	guberDuration  = 5 // RateLimitReq.duration, ms

	guberResponses = 1 // GetRateLimitsResp.responses, RateLimitResp
	guberStatus    = 1 // RateLimitResp.status: UNDER_LIMIT 0, OVER_LIMIT 1
	guberError     = 5 // RateLimitResp.error
)

// generousLimit is the benchmarks' limit per second: no round comes near.
const generousLimit = 1_000_000_000

// gubernatorRequest is the wire form of a GetRateLimitsReq of one hit of
// key's token bucket (the default algorithm and behaviour) of
// generousLimit per second.
func gubernatorRequest(key string) []byte {
	var r []byte
	r = protowire.AppendTag(r, guberName, protowire.BytesType)
	r = protowire.AppendString(r, "bench")
	r = protowire.AppendTag(r, guberUniqueKey, protowire.BytesType)
	r = protowire.AppendString(r, key)
	for _, f := range []struct {
		num protowire.Number
		v   uint64
	}{{guberHits, 1}, {guberLimit, generousLimit}, {guberDuration, 1000}} {
		r = protowire.AppendTag(r, f.num, protowire.VarintType)
		r = protowire.AppendVarint(r, f.v)
	}
	var req []byte
	req = protowire.AppendTag(req, guberRequests, protowire.BytesType)
	return protowire.AppendBytes(req, r)
}

// checkGubernator accepts a GetRateLimitsResp whose every answer is
// UNDER_LIMIT without an error, and at least one.
func checkGubernator(b []byte) error {
	n := 0
	err := eachField(b, func(num protowire.Number, _ uint64, sub []byte) error {
		if num != guberResponses {
			return nil
		}
		n++
		return eachField(sub, func(num protowire.Number, v uint64, s []byte) error {
			switch {
			case num == guberStatus && v != 0:
				return fmt.Errorf("status %d (OVER_LIMIT)", v)
			case num == guberError && len(s) > 0:
				return fmt.Errorf("error %q", s)
			}
			return nil
		})
	})
	if err == nil && n == 0 {
		err = errors.New("no response")
	}
	return err
}

// eachField calls f with every field of the message b: its number, and
// its value (a varint's) or bytes (a length-delimited field's).
func eachField(b []byte, f func(protowire.Number, uint64, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v uint64
		var sub []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			sub, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, v, sub); err != nil {
			return err
		}
	}
	return nil
}

// gubernatorCalls returns clients GetRateLimits calls, each of its own key.
func gubernatorCalls(clients int) []grpcCall {
	calls := make([]grpcCall, clients)
	for c := range calls {
		calls[c] = grpcCall{gubernatorMethod, gubernatorRequest(clientKey(clients, c)), checkGubernator}
	}
	return calls
}

// gatewayCalls returns clients POSTs of gubernator's HTTP gateway, each of
// its own key: the same request as gubernatorCalls', in JSON.
func gatewayCalls(base string, clients int) []httpCall {
	calls := make([]httpCall, clients)
	for c := range calls {
		body := fmt.Sprintf(`{"requests":[{"name":"bench","unique_key":%q,"hits":"1","limit":"%d","duration":"1000"}]}`,
			clientKey(clients, c), generousLimit)
		calls[c] = httpCall{base, "/v1/GetRateLimits", []byte(body), checkGateway}
	}
	return calls
}

// checkGateway accepts a gateway answer that is neither over the limit
// nor an error (the gateway writes UNDER_LIMIT and an empty error out).
func checkGateway(b []byte) error {
	if !bytes.Contains(b, []byte(`"status":"UNDER_LIMIT"`)) || bytes.Contains(b, []byte("OVER_LIMIT")) ||
		bytes.Contains(b, []byte(`"error":"`)) && !bytes.Contains(b, []byte(`"error":""`)) {
		return fmt.Errorf("answer %s", b)
	}
	return nil
}

// acquireCalls returns clients POSTs of Tollgate's /v1/acquire with
// commit, each of its own entity, of the same generous limit.
func acquireCalls(base string, clients int) []httpCall {
	calls := make([]httpCall, clients)
	for c := range calls {
		body := fmt.Sprintf(`{"entity":%q,"resource":"api","consume":{"rps":1},"limits":["rps:%d/sec"],"commit":true}`,
			clientKey(clients, c), generousLimit)
		calls[c] = httpCall{base, "/v1/acquire", []byte(body), checkAcquire}
	}
	return calls
}

// checkAcquire accepts an acquire's answer that is not degraded (the
// status, 200, is checked by loadHTTP).
func checkAcquire(b []byte) error {
	if !bytes.Contains(b, []byte(`"consumed"`)) || bytes.Contains(b, []byte(`"degraded":true`)) {
		return fmt.Errorf("answer %s", b)
	}
	return nil
}

// clientKey is client c's key in a round of clients clients.
func clientKey(clients, c int) string {
	return "client-" + strconv.Itoa(clients) + "-" + strconv.Itoa(c)
}
