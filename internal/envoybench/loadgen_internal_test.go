package envoybench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/rls"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// serveRLS serves Tollgate's rate-limit service in this process as
// tollgate serve does (rls.DefaultLimits), on the memory store, with the
// benchmarks' configuration but a limit of limit per second, and returns
// its address.
func serveRLS(t testing.TB, limit int) string {
	t.Helper()
	cfg, err := rls.ParseConfig([]byte(rlsConfig(limit)))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := tollgate.New(memory.New())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(rls.DefaultLimits().ServerOptions()...)
	rls.New(cfg, func(context.Context, string) (*tollgate.Limiter, error) { return lim, nil }).Register(gs)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	return ln.Addr().String()
}

// TestLoadGRPC runs the benchmarks' gRPC load generator (raw request
// bytes, answers checked) against an in-process rate-limit service: it
// counts answers, measures its own CPU, and fails a round that is denied.
func TestLoadGRPC(t *testing.T) {
	addr := serveRLS(t, generousLimit)
	for _, client := range []string{"own", "go"} {
		t.Run(client, func(t *testing.T) {
			t.Setenv(envClient, client)
			for _, hot := range []bool{false, true} {
				m, err := loadGRPC(addr, os.Getpid(), 0, envoyCalls(4, hot), 100*time.Millisecond)
				if err != nil {
					t.Fatalf("hot %v: %v", hot, err)
				}
				if m.rate <= 0 {
					t.Errorf("hot %v: rate %v, want > 0", hot, m.rate)
				}
			}
			// One request a second: the second call of a client is
			// OVER_LIMIT, which the check reports.
			_, err := loadGRPC(serveRLS(t, 1), os.Getpid(), 0, envoyCalls(1, false), 100*time.Millisecond)
			if err == nil || !strings.Contains(err.Error(), "OVER_LIMIT") {
				t.Errorf("denied round: error %v, want OVER_LIMIT", err)
			}
			// An unknown method is the server's error, grpc-status 12.
			_, err = loadGRPC(addr, os.Getpid(), 0, []grpcCall{{"/nope.V1/Nope", nil, checkEnvoy}}, 50*time.Millisecond)
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), "unimplemented") && !strings.Contains(err.Error(), "grpc-status 12") {
				t.Errorf("unknown method: error %v, want Unimplemented", err)
			}
		})
	}
}

// TestNoPingPerCall: tollgate serve's gRPC server (rls.DefaultLimits)
// has fixed flow-control windows, so it does not send a PING to estimate
// them after each call's data (gRPC's default did, for every call: one
// more frame each way).
func TestNoPingPerCall(t *testing.T) {
	addr := serveRLS(t, generousLimit)
	c, err := dialH2(addr, envoyMethod, envoyCalls(1, false)[0].req)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const calls = 200
	for range calls {
		resp, err := c.call()
		if err == nil {
			err = checkEnvoy(resp)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if c.pings > 0 {
		t.Errorf("%d calls drew %d PINGs from the server, want none", calls, c.pings)
	}
}

// TestGubernatorWire checks the GetRateLimits request the benchmark
// writes, field by field, and the answers its check accepts and refuses.
func TestGubernatorWire(t *testing.T) {
	var got []string
	err := eachField(gubernatorRequest("k1"), func(num protowire.Number, _ uint64, sub []byte) error {
		if num != guberRequests {
			return fmt.Errorf("field %d in GetRateLimitsReq", num)
		}
		return eachField(sub, func(num protowire.Number, v uint64, s []byte) error {
			if s != nil {
				got = append(got, fmt.Sprintf("%d=%s", num, s))
			} else {
				got = append(got, fmt.Sprintf("%d=%d", num, v))
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("1=bench 2=k1 3=1 4=%d 5=1000", generousLimit)
	if g := strings.Join(got, " "); g != want {
		t.Errorf("RateLimitReq fields %q, want %q", g, want)
	}

	resp := func(fields ...[2]any) []byte {
		var r []byte
		for _, f := range fields {
			switch v := f[1].(type) {
			case int:
				r = protowire.AppendTag(r, protowire.Number(f[0].(int)), protowire.VarintType)
				r = protowire.AppendVarint(r, uint64(v))
			case string:
				r = protowire.AppendTag(r, protowire.Number(f[0].(int)), protowire.BytesType)
				r = protowire.AppendString(r, v)
			}
		}
		out := protowire.AppendTag(nil, guberResponses, protowire.BytesType)
		return protowire.AppendBytes(out, r)
	}
	for _, c := range []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"under limit", resp([2]any{2, generousLimit}, [2]any{3, 7}), true},
		{"over limit", resp([2]any{guberStatus, 1}), false},
		{"error", resp([2]any{guberError, "no peer"}), false},
		{"no response", nil, false},
	} {
		if err := checkGubernator(c.b); (err == nil) != c.ok {
			t.Errorf("%s: check %v, want ok %v", c.name, err, c.ok)
		}
	}
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"responses":[{"status":"UNDER_LIMIT","limit":"1000000000","error":"","metadata":{}}]}`, true},
		{`{"responses":[{"status":"OVER_LIMIT","limit":"1000000000","error":""}]}`, false},
		{`{"responses":[{"status":"UNDER_LIMIT","error":"no peer"}]}`, false},
		{`{"code":3,"message":"bad"}`, false},
	} {
		if err := checkGateway([]byte(c.body)); (err == nil) != c.ok {
			t.Errorf("%s: check %v, want ok %v", c.body, err, c.ok)
		}
	}
}

// BenchmarkInProcess runs the gRPC load against Tollgate's rate-limit
// service served in this process (memory store), for a CPU profile of
// the service's path: go test -run '^$' -bench InProcess -cpuprofile
// cpu.out ./internal/envoybench/ (the profile holds the load generator's
// h2Conn too).
func BenchmarkInProcess(b *testing.B) {
	addr := serveRLS(b, generousLimit)
	for _, clients := range []int{8, 32} {
		b.Run(fmt.Sprintf("clients-%d", clients), func(b *testing.B) {
			for b.Loop() {
				m, err := loadGRPC(addr, 0, 0, envoyCalls(clients, false), roundLength(b, 2*time.Second))
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(m.rate, "req/s")
				b.ReportMetric(m.load, "cpu-us/req")
			}
		})
	}
}

// TestLoadHTTP runs the benchmarks' HTTP load generator, with either
// client, against a server that answers with a length, in chunks, and
// with a refusal: it reads every body whole, over the same connection,
// and fails the round that is refused.
func TestLoadHTTP(t *testing.T) {
	want := []byte(`{"consumed":{"rps":1}}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if body, _ := io.ReadAll(r.Body); !bytes.Equal(body, []byte(`{"x":1}`)) {
			http.Error(w, "body "+string(body), http.StatusBadRequest)
			return
		}
		switch r.URL.Path {
		case "/chunked":
			_, _ = w.Write(want[:5])
			w.(http.Flusher).Flush()
			_, _ = w.Write(want[5:])
		case "/deny":
			http.Error(w, `{"error":"rate limited"}`, http.StatusTooManyRequests)
		default:
			_, _ = w.Write(want)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	check := func(b []byte) error {
		if !bytes.Equal(b, want) {
			return fmt.Errorf("body %q, want %q", b, want)
		}
		return nil
	}
	for _, client := range []string{"own", "go"} {
		t.Run(client, func(t *testing.T) {
			t.Setenv(envClient, client)
			for _, path := range []string{"/length", "/chunked"} {
				calls := []httpCall{{addr, path, []byte(`{"x":1}`), check}, {addr, path, []byte(`{"x":1}`), check}}
				m, err := loadHTTP(os.Getpid(), 0, calls, 100*time.Millisecond)
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				if m.rate <= 0 {
					t.Errorf("%s: rate %v, want > 0", path, m.rate)
				}
			}
			_, err := loadHTTP(os.Getpid(), 0, []httpCall{{addr, "/deny", []byte(`{"x":1}`), check}}, 50*time.Millisecond)
			if err == nil || !strings.Contains(err.Error(), "status 429") {
				t.Errorf("refused round: error %v, want status 429", err)
			}
		})
	}
}
