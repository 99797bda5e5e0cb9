package faultsuite

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/internal/faultproxy"
	"github.com/tollgate-rl/tollgate/rls"
	"github.com/tollgate-rl/tollgate/server"
)

// httpAcquirer acquires with commit through POST /v1/acquire.
type httpAcquirer struct {
	c   *http.Client
	url string
}

func (a httpAcquirer) acquire(ctx context.Context, k bucketKey, mode tollgate.OnUnavailable) (outcome, error) {
	body := fmt.Sprintf(`{"entity":%q,"resource":%q,"consume":{%q:1},"limits":[%q],"commit":true`, k.entity, resource, k.limit.Name, k.limit)
	if mode != "" {
		body += fmt.Sprintf(`,"on_unavailable":%q`, mode)
	}
	status, answer, err := post(ctx, a.c, a.url+"/v1/acquire", body+"}")
	switch {
	case err != nil:
		return failed, err
	case status == http.StatusOK && bytes.Contains(answer, []byte(`"degraded":true`)):
		return degraded, nil
	case status == http.StatusOK:
		return granted, nil
	case status == http.StatusTooManyRequests:
		return denied, nil
	case status == http.StatusServiceUnavailable && bytes.Contains(answer, []byte(`"error":"unavailable"`)):
		return unavailable, nil
	}
	return failed, fmt.Errorf("%d %s", status, answer)
}

func post(ctx context.Context, c *http.Client, url, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	return do(c, req)
}

func get(ctx context.Context, c *http.Client, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	return do(c, req)
}

func do(c *http.Client, req *http.Request) (int, []byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// rlsConfig maps domain edge, descriptor key k, to a generous limit.
const rlsConfig = `
domains:
  - domain: edge
    descriptors:
      - key: k
        entity: "rls-{value}"
        resource: api
        limits: ["rps:100000/sec"]
`

// serverScene is a tollgate serve in this process: server.Server behind
// its HTTPServer (with its timeouts), and the Envoy rate-limit service,
// over the store through the proxy.
type serverScene struct {
	*scene
	url  string
	http *http.Client
	rls  pb.RateLimitServiceClient
}

func newServerScene(t *testing.T) *serverScene {
	t.Helper()
	s := newScene(t)
	srv, err := server.New(s.store, server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.HTTPServer(ln.Addr().String())
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })

	cfg, err := rls.ParseConfig([]byte(rlsConfig))
	if err != nil {
		t.Fatal(err)
	}
	gln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	rls.New(cfg, srv.Limiter).Register(gs)
	go func() { _ = gs.Serve(gln) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(gln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })

	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * workers}}
	t.Cleanup(c.CloseIdleConnections)
	return &serverScene{scene: s, url: "http://" + ln.Addr().String(), http: c, rls: pb.NewRateLimitServiceClient(conn)}
}

// readyz returns /readyz's status and how long it took.
func (s *serverScene) readyz() (int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	start := time.Now()
	status, _, err := get(ctx, s.http, s.url+"/readyz")
	return status, time.Since(start), err
}

// shouldRateLimit makes one call of the rate-limit service with no
// deadline of its own (the guard aside): the store's decides.
func (s *serverScene) shouldRateLimit() (codes.Code, pb.RateLimitResponse_Code, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	start := time.Now()
	resp, err := s.rls.ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}},
	}})
	return status.Code(err), resp.GetOverallCode(), time.Since(start)
}

// during checks /readyz and the rate-limit service while f lasts, a grace
// into it.
func (s *serverScene) during(t *testing.T, f fault, until time.Time) []string {
	pause(grace)
	wantReady, wantCode := http.StatusOK, codes.OK
	if f.failing {
		wantReady, wantCode = http.StatusServiceUnavailable, codes.Unavailable
	}
	var (
		st                 int
		readyTook, rlsTook time.Duration
		readyErr           error
		code               codes.Code
		overall            pb.RateLimitResponse_Code
		wg                 sync.WaitGroup
	)
	wg.Go(func() { st, readyTook, readyErr = s.readyz() })
	wg.Go(func() { code, overall, rlsTook = s.shouldRateLimit() })
	wg.Wait()
	if readyErr != nil || st != wantReady || readyTook > answerBound {
		t.Errorf("server, %s: /readyz %d (%v) in %v, want %d within %v", f.mode, st, readyErr, round(readyTook), wantReady, answerBound)
	}
	if code != wantCode || code == codes.OK && overall != pb.RateLimitResponse_OK || rlsTook > answerBound {
		t.Errorf("server, %s: ShouldRateLimit %v %v in %v, want %v within %v", f.mode, code, overall, round(rlsTook), wantCode, answerBound)
	}
	notes := []string{fmt.Sprintf("/readyz %d in %v", st, round(readyTook)), fmt.Sprintf("rate-limit service %v in %v", code, round(rlsTook))}
	if time.Now().After(until) {
		t.Errorf("server, %s: the probes outlasted the fault", f.mode)
	}
	return notes
}

// after measures how soon /readyz is ready again once f has ended.
func (s *serverScene) after(t *testing.T, f fault) []string {
	start := time.Now()
	var ready time.Duration = -1
	waitFor(2*recoveryBound, func() bool {
		if st, _, err := s.readyz(); err == nil && st == http.StatusOK {
			ready = time.Since(start)
			return true
		}
		return false
	})
	if ready < 0 || ready > recoveryBound {
		t.Errorf("server, %s: /readyz not ready within %v of the fault's end (%v)", f.mode, recoveryBound, round(ready))
	}
	return []string{fmt.Sprintf("/readyz 200 again after %v", round(ready))}
}

// metrics returns the server's tollgate_acquires_total and
// tollgate_store_errors_total lines.
func (s *serverScene) metrics(t *testing.T) string {
	_, b, err := get(context.Background(), s.http, s.url+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "tollgate_acquires_total") || strings.HasPrefix(line, "tollgate_store_errors_total") {
			out = append(out, line)
		}
	}
	return strings.Join(out, ", ")
}

// serverFaults last long enough for the probes and for answers that take
// the call timeout (see libraryFaults) to be given during them.
var serverFaults = []fault{
	{faultproxy.Hang, true, hangWindow},
	{faultproxy.Delay(100 * time.Millisecond), false, slowWindow},
	{faultproxy.Reset, true, slowWindow},
	{faultproxy.Throttle, true, slowWindow},
	{faultproxy.Unavailable, true, slowWindow},
}

// TestServerFaults: tollgate serve's server over store/dynamodb, under
// load over HTTP, through faults: the HTTP answers, /readyz and the Envoy
// rate-limit service's.
func TestServerFaults(t *testing.T) {
	t.Parallel()
	s := newServerScene(t)
	all, runs, l := runFaults(t, s.proxy, httpAcquirer{s.http, s.url}, serverFaults, probes{s.during, s.after})
	check(t, "server", all, runs, l, s.available(t))
	t.Logf("server: %s", s.metrics(t))
}
