package rls_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/rls"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// downStore is the memory backend whose Consume can be made to fail, as a
// store that cannot be reached does (down), or as one that did not answer
// within its own deadline does (stalled).
type downStore struct {
	*memory.Store
	down, stalled atomic.Bool
}

var (
	errDown = errors.New("connection refused")
	// errStalled is the error of a store call that its own deadline ended
	// while the caller's context is alive (the DynamoDB backend's wraps
	// dynamodb.ErrTimeout instead; a backend could well wrap the
	// context's).
	errStalled = fmt.Errorf("store call: %w", context.DeadlineExceeded)
)

func (s *downStore) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	switch {
	case s.down.Load():
		return false, errDown
	case s.stalled.Load():
		return false, errStalled
	}
	return s.Store.Consume(ctx, ns, req)
}

// env is a Service over the memory backend with a frozen fake clock, served
// on loopback and reached through a real gRPC client.
type env struct {
	clk    *clock.Fake
	store  *downStore
	addr   string // the server's
	conn   *grpc.ClientConn
	client pb.RateLimitServiceClient

	mu       sync.Mutex
	limiters map[string]*tollgate.Limiter
	calls    atomic.Int64 // calls of the limiter function
}

func start(t *testing.T, cfgText string, opts ...rls.Option) *env {
	t.Helper()
	cfg, err := rls.ParseConfig([]byte(cfgText))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	e := &env{clk: clock.NewFake(epoch), store: &downStore{Store: memory.New()}, limiters: map[string]*tollgate.Limiter{}}
	e.serve(t, rls.New(cfg, e.limiter, opts...))
	return e
}

func (e *env) serve(t *testing.T, svc *rls.Service) { e.serveLimited(t, svc, nil) }

// serveLimited serves svc on a gRPC server with lim's options and
// listener, or on a bare one when lim is nil.
func (e *env) serveLimited(t *testing.T, svc *rls.Service, lim *rls.Limits) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opts []grpc.ServerOption
	if lim != nil {
		opts = lim.ServerOptions()
	}
	gs := grpc.NewServer(opts...)
	svc.Register(gs)
	e.addr = ln.Addr().String()
	if lim != nil {
		ln = lim.Listener(ln)
	}
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	e.conn = conn
	e.client = pb.NewRateLimitServiceClient(conn)
}

// limiter is the Service's LimiterFunc: one limiter per namespace over the
// shared store, as the HTTP server keeps them.
func (e *env) limiter(_ context.Context, ns string) (*tollgate.Limiter, error) {
	e.calls.Add(1)
	e.mu.Lock()
	defer e.mu.Unlock()
	if l, ok := e.limiters[ns]; ok {
		return l, nil
	}
	l, err := tollgate.New(e.store, tollgate.WithNamespace(ns), tollgate.WithClock(e.clk))
	if err != nil {
		return nil, err
	}
	e.limiters[ns] = l
	return l, nil
}

func (e *env) lim(t *testing.T) *tollgate.Limiter {
	t.Helper()
	l, err := e.limiter(context.Background(), tollgate.DefaultNamespace)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// admin is the control plane of the default namespace over the shared
// store, with the limiters' clock.
func (e *env) admin(t *testing.T) *tollgate.Admin {
	t.Helper()
	a, err := tollgate.NewAdmin(e.store, tollgate.WithClock(e.clk))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func req(domain string, hits uint32, descs ...*ratelimitv3.RateLimitDescriptor) *pb.RateLimitRequest {
	return &pb.RateLimitRequest{Domain: domain, HitsAddend: hits, Descriptors: descs}
}

func (e *env) call(t *testing.T, r *pb.RateLimitRequest) *pb.RateLimitResponse {
	t.Helper()
	resp, err := e.client.ShouldRateLimit(context.Background(), r)
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	if len(resp.GetStatuses()) != len(r.GetDescriptors()) {
		t.Fatalf("%d statuses for %d descriptors", len(resp.GetStatuses()), len(r.GetDescriptors()))
	}
	return resp
}

func (e *env) callErr(t *testing.T, r *pb.RateLimitRequest) codes.Code {
	t.Helper()
	resp, err := e.client.ShouldRateLimit(context.Background(), r)
	if err == nil {
		t.Fatalf("ShouldRateLimit succeeded (%v), want an error", resp.GetOverallCode())
	}
	return status.Code(err)
}

const edgeConfig = `
domains:
  - domain: edge
    descriptors:
      - key: api_key
        entity: "key-{value}"
        resource: http
        limits: ["rps:5/sec"]
      - key: remote_address
        entity: "ip-{value}"
        resource: http
        limits: ["rpm:1/min"]
      - key: plan
        value: gold
        entity: gold-plan
        resource: http
        limits: ["rpm:3/min"]
      - key: path
        entity: "{value}"
        resource: http
        limits: ["rpm:1/min"]
`

func TestWithinLimitThenOverLimit(t *testing.T) {
	e := start(t, edgeConfig)
	r := req("edge", 0, desc("api_key", "k1"))
	for i := range 5 {
		resp := e.call(t, r)
		st := resp.Statuses[0]
		if resp.OverallCode != pb.RateLimitResponse_OK || st.Code != pb.RateLimitResponse_OK {
			t.Fatalf("call %d: %v, want OK", i+1, resp.OverallCode)
		}
		if want := uint32(4 - i); st.LimitRemaining != want {
			t.Errorf("call %d: limit_remaining %d, want %d", i+1, st.LimitRemaining, want)
		}
		cl := st.CurrentLimit
		if cl.GetRequestsPerUnit() != 5 || cl.GetUnit() != pb.RateLimitResponse_RateLimit_SECOND || cl.GetName() != "rps" {
			t.Errorf("current_limit %v, want rps 5/SECOND", cl)
		}
	}
	resp := e.call(t, r)
	st := resp.Statuses[0]
	if resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT || st.Code != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("6th call: %v, want OVER_LIMIT", resp.OverallCode)
	}
	// 5 per second refills one token every 200ms, exactly.
	if got := st.DurationUntilReset.AsDuration(); got != 200*time.Millisecond {
		t.Errorf("duration_until_reset %v, want 200ms", got)
	}
	if st.LimitRemaining != 0 {
		t.Errorf("limit_remaining %d, want 0", st.LimitRemaining)
	}
	e.clk.Advance(199 * time.Millisecond)
	if got := e.call(t, r).OverallCode; got != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("after 199ms: %v, want OVER_LIMIT", got)
	}
	e.clk.Advance(time.Millisecond)
	if got := e.call(t, r).OverallCode; got != pb.RateLimitResponse_OK {
		t.Fatalf("after 200ms: %v, want OK", got)
	}
	if got := e.call(t, r).OverallCode; got != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("refilled token spent: %v, want OVER_LIMIT", got)
	}
	// Another key has a bucket of its own.
	if got := e.call(t, req("edge", 0, desc("api_key", "k2"))).OverallCode; got != pb.RateLimitResponse_OK {
		t.Fatalf("other key: %v, want OK", got)
	}
}

func TestHitsAddend(t *testing.T) {
	e := start(t, edgeConfig)
	d := desc("api_key", "k1")
	if st := e.call(t, req("edge", 3, d)).Statuses[0]; st.Code != pb.RateLimitResponse_OK || st.LimitRemaining != 2 {
		t.Fatalf("hits 3 of 5: %v remaining %d, want OK remaining 2", st.Code, st.LimitRemaining)
	}
	if st := e.call(t, req("edge", 3, d)).Statuses[0]; st.Code != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("hits 3 of 2 left: %v, want OVER_LIMIT", st.Code)
	} else if got := st.DurationUntilReset.AsDuration(); got != 200*time.Millisecond {
		t.Errorf("duration_until_reset %v, want 200ms (one token short)", got)
	}
	// A denial consumed nothing: the 2 left can still be taken, and the
	// descriptor's own hits_addend overrides the request's.
	d2 := desc("api_key", "k1")
	d2.HitsAddend = wrapperspb.UInt64(2)
	if st := e.call(t, req("edge", 3, d2)).Statuses[0]; st.Code != pb.RateLimitResponse_OK || st.LimitRemaining != 0 {
		t.Fatalf("descriptor hits 2 of 2: %v remaining %d, want OK remaining 0", st.Code, st.LimitRemaining)
	}
	// A descriptor hits_addend of 0 checks without charging: OK while the
	// balance is not negative, and nothing is taken.
	d0 := desc("api_key", "k1")
	d0.HitsAddend = wrapperspb.UInt64(0)
	if st := e.call(t, req("edge", 0, d0)).Statuses[0]; st.Code != pb.RateLimitResponse_OK || st.LimitRemaining != 0 {
		t.Fatalf("descriptor hits 0 on an empty bucket: %v remaining %d, want OK remaining 0", st.Code, st.LimitRemaining)
	}
	// More than the capacity can never pass: OVER_LIMIT with no reset.
	e.clk.Advance(time.Second)
	st := e.call(t, req("edge", 6, d)).Statuses[0]
	if st.Code != pb.RateLimitResponse_OVER_LIMIT || st.DurationUntilReset != nil {
		t.Fatalf("hits 6 of capacity 5: %v reset %v, want OVER_LIMIT without reset", st.Code, st.DurationUntilReset)
	}
	if st := e.call(t, req("edge", 5, d)).Statuses[0]; st.Code != pb.RateLimitResponse_OK {
		t.Fatalf("hits 5 after refill: %v, want OK (the refused 6 took nothing)", st.Code)
	}
}

func TestTwoDescriptorsOneOver(t *testing.T) {
	e := start(t, edgeConfig)
	r := req("edge", 0, desc("api_key", "k1"), desc("remote_address", "10.0.0.1"))
	resp := e.call(t, r)
	if resp.OverallCode != pb.RateLimitResponse_OK {
		t.Fatalf("first call: %v, want OK", resp.OverallCode)
	}
	resp = e.call(t, r)
	if resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("second call: %v, want OVER_LIMIT", resp.OverallCode)
	}
	if got := resp.Statuses[0].Code; got != pb.RateLimitResponse_OK {
		t.Errorf("api_key status %v, want OK", got)
	}
	st := resp.Statuses[1]
	if st.Code != pb.RateLimitResponse_OVER_LIMIT || st.DurationUntilReset.AsDuration() != time.Minute {
		t.Errorf("remote_address status %v reset %v, want OVER_LIMIT reset 1m", st.Code, st.DurationUntilReset.AsDuration())
	}
	if cl := st.CurrentLimit; cl.GetRequestsPerUnit() != 1 || cl.GetUnit() != pb.RateLimitResponse_RateLimit_MINUTE {
		t.Errorf("remote_address current_limit %v, want 1/MINUTE", cl)
	}
	// Descriptors are charged independently: the api_key was charged twice.
	if got := resp.Statuses[0].LimitRemaining; got != 3 {
		t.Errorf("api_key limit_remaining %d, want 3", got)
	}
}

func TestUnmatchedDescriptorsAndUnknownDomain(t *testing.T) {
	e := start(t, edgeConfig)
	resp := e.call(t, req("edge", 0, desc("user_agent", "curl"), desc("plan", "silver"), desc()))
	if resp.OverallCode != pb.RateLimitResponse_OK {
		t.Fatalf("unmatched: %v, want OK", resp.OverallCode)
	}
	for i, st := range resp.Statuses {
		if st.Code != pb.RateLimitResponse_OK || st.CurrentLimit != nil {
			t.Errorf("status %d: %v limit %v, want OK without a limit", i, st.Code, st.CurrentLimit)
		}
	}
	for range 3 {
		if got := e.call(t, req("other", 0, desc("api_key", "k1"))).OverallCode; got != pb.RateLimitResponse_OK {
			t.Fatalf("unknown domain: %v, want OK", got)
		}
	}
	if n := e.calls.Load(); n != 0 {
		t.Errorf("limiter asked for %d times, want 0 (nothing matched)", n)
	}
}

func TestRuleMatching(t *testing.T) {
	e := start(t, edgeConfig)
	// A rule with a value matches that value only: three gold calls pass.
	for i := range 3 {
		if got := e.call(t, req("edge", 0, desc("plan", "gold"))).OverallCode; got != pb.RateLimitResponse_OK {
			t.Fatalf("gold %d: %v, want OK", i+1, got)
		}
	}
	if got := e.call(t, req("edge", 0, desc("plan", "gold"))).OverallCode; got != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("gold 4: %v, want OVER_LIMIT", got)
	}
	// A descriptor with several entries is charged to the first rule (in
	// configuration order) that matches any of them: api_key before
	// remote_address, whichever entry comes first.
	d := desc("remote_address", "10.0.0.9", "api_key", "k9")
	for i := range 5 {
		if got := e.call(t, req("edge", 0, d)).OverallCode; got != pb.RateLimitResponse_OK {
			t.Fatalf("combined %d: %v, want OK (charged to api_key)", i+1, got)
		}
	}
	st, err := e.lim(t).Available(context.Background(), "key-k9", "http", tollgate.WithLimits(tollgate.PerSecond("rps", 5)))
	if err != nil || len(st) != 1 || st[0].Available != 0 {
		t.Fatalf("key-k9 statuses %+v, %v: want rps exhausted", st, err)
	}
}

func TestEntityIDs(t *testing.T) {
	e := start(t, edgeConfig)
	lim := e.lim(t)
	perMin := tollgate.WithLimits(tollgate.PerMinute("rpm", 1))
	cases := []struct {
		key, value, entity string
	}{
		{"remote_address", "2001:db8::1", "ip-2001:db8::1"},
		{"remote_address", "::1", "ip-::1"},
		{"path", "::1", hashed("::1")}, // an id cannot begin with ':'
		{"path", "/v1/chat", hashed("/v1/chat")},
		{"path", "a b", hashed("a b")},
		{"path", "", hashed("")},
		{"path", strings.Repeat("x", 257), hashed(strings.Repeat("x", 257))},
		{"path", "v1.chat", "v1.chat"},
	}
	for _, c := range cases {
		if got := e.call(t, req("edge", 0, desc(c.key, c.value))).OverallCode; got != pb.RateLimitResponse_OK {
			t.Fatalf("%s=%q: %v, want OK", c.key, c.value, got)
		}
		st, err := lim.Available(context.Background(), c.entity, "http", perMin)
		if err != nil || len(st) != 1 || st[0].Available != 0 {
			t.Errorf("%s=%q: entity %q statuses %+v, %v: want its bucket charged", c.key, c.value, c.entity, st, err)
		}
		// The mapping is deterministic: the same value hits the same bucket.
		if got := e.call(t, req("edge", 0, desc(c.key, c.value))).OverallCode; got != pb.RateLimitResponse_OVER_LIMIT {
			t.Errorf("%s=%q again: %v, want OVER_LIMIT", c.key, c.value, got)
		}
	}
}

// hashed is the documented stand-in for a value that makes an invalid id.
func hashed(v string) string {
	sum := sha256.Sum256([]byte(v))
	return "h-" + hex.EncodeToString(sum[:])[:32]
}

func TestStoredLimits(t *testing.T) {
	e := start(t, `
domains:
  - domain: llm
    descriptors:
      - key: api_key
        resource: chat
        consume: [rpm]
`)
	ctx := context.Background()
	r := req("llm", 0, desc("api_key", "k1"))
	if got := e.callErr(t, r); got != codes.InvalidArgument {
		t.Fatalf("no stored limits: %v, want InvalidArgument", got)
	}
	limits, err := tollgate.ParseLimits([]string{"rpm:2", "tpm:1000"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.admin(t).SetLimits(ctx, tollgate.ResourceScope("chat"), tollgate.Config{Limits: limits}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		resp := e.call(t, r)
		if resp.OverallCode != pb.RateLimitResponse_OK {
			t.Fatalf("call %d: %v, want OK", i+1, resp.OverallCode)
		}
		if cl := resp.Statuses[0].CurrentLimit; cl.GetName() != "rpm" || cl.GetRequestsPerUnit() != 2 || cl.GetUnit() != pb.RateLimitResponse_RateLimit_UNKNOWN {
			t.Errorf("current_limit %v, want rpm 2 with an unknown unit", cl)
		}
	}
	st := e.call(t, r).Statuses[0]
	if st.Code != pb.RateLimitResponse_OVER_LIMIT || st.DurationUntilReset.AsDuration() != 30*time.Second {
		t.Fatalf("3rd call: %v reset %v, want OVER_LIMIT reset 30s", st.Code, st.DurationUntilReset.AsDuration())
	}
	// Above the stored capacity: over the limit for good, not an error.
	e.clk.Advance(time.Minute)
	st = e.call(t, req("llm", 3, desc("api_key", "k1"))).Statuses[0]
	if st.Code != pb.RateLimitResponse_OVER_LIMIT || st.DurationUntilReset != nil {
		t.Fatalf("hits 3 of capacity 2: %v reset %v, want OVER_LIMIT without reset", st.Code, st.DurationUntilReset)
	}
}

func TestHostileRequests(t *testing.T) {
	e := start(t, edgeConfig, rls.WithMaxDescriptors(4), rls.WithMaxEntries(3), rls.WithMaxHitsAddend(1000))
	many := make([]*ratelimitv3.RateLimitDescriptor, 5)
	for i := range many {
		many[i] = desc("api_key", "k1")
	}
	bigDesc := desc("api_key", "k1")
	bigDesc.HitsAddend = wrapperspb.UInt64(1 << 63)
	cases := []struct {
		name string
		req  *pb.RateLimitRequest
		want codes.Code
	}{
		{"empty domain", req("", 0, desc("api_key", "k1")), codes.InvalidArgument},
		{"no descriptors", req("edge", 0), codes.InvalidArgument},
		{"too many descriptors", req("edge", 0, many...), codes.InvalidArgument},
		{"too many entries", req("edge", 0, desc("a", "1", "b", "2", "c", "3", "api_key", "k1")), codes.InvalidArgument},
		{"huge hits_addend", req("edge", 1<<32-1, desc("api_key", "k1")), codes.InvalidArgument},
		{"huge descriptor hits_addend", req("edge", 0, bigDesc), codes.InvalidArgument},
		{"hits_addend over the bound, unknown domain", req("nope", 1001, desc("x", "y")), codes.InvalidArgument},
		{"domain too long", req(strings.Repeat("d", rls.MaxNameBytes+1), 0, desc("api_key", "k1")), codes.InvalidArgument},
		{"entry key too long", req("edge", 0, desc("api_key", "k1", strings.Repeat("k", rls.MaxNameBytes+1), "v")), codes.InvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := e.callErr(t, c.req); got != c.want {
				t.Errorf("code %v, want %v", got, c.want)
			}
		})
	}
	// Nothing was charged by the refused requests.
	st, err := e.lim(t).Available(context.Background(), "key-k1", "http", tollgate.WithLimits(tollgate.PerSecond("rps", 5)))
	if err != nil || len(st) != 1 || st[0].Available != 5 {
		t.Errorf("key-k1 after refused requests: %+v, %v; want untouched", st, err)
	}
	// Entry values are not bounded by the service (a client could make
	// Envoy send a long header to escape its limit): a long one is charged
	// to its hashed id.
	long := strings.Repeat("v", 64<<10)
	if got := e.call(t, req("edge", 0, desc("api_key", long))).Statuses[0].GetLimitRemaining(); got != 4 {
		t.Errorf("a 64 KiB api_key: %d remaining, want 4 (charged)", got)
	}
	// Within the bounds, a request full of odd values is still answered.
	odd := req("edge", 1000, desc("api_key", "\x00", "path", "?"), desc(), desc("", ""), desc("remote_address", strings.Repeat("€", 1000)))
	if got := e.call(t, odd).OverallCode; got != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("odd values with hits 1000: %v, want OVER_LIMIT (above every capacity)", got)
	}
	// is_negative_hits (a refund) is not supported: answered OK, nothing given back.
	neg := desc("remote_address", "10.0.0.1")
	neg.IsNegativeHits = true
	if got := e.call(t, req("edge", 0, neg)).OverallCode; got != pb.RateLimitResponse_OK {
		t.Errorf("negative hits: %v, want OK", got)
	}
}

func TestStoreUnavailable(t *testing.T) {
	e := start(t, edgeConfig)
	ctx := context.Background()
	r := req("edge", 0, desc("api_key", "k1"))
	e.call(t, r) // warm the namespace and mode caches
	e.store.down.Store(true)
	if got := e.callErr(t, r); got != codes.Unavailable {
		t.Fatalf("store down, block mode: %v, want Unavailable", got)
	}
	e.store.down.Store(false)
	// A store that ends its own call with a deadline while the call's
	// context is alive is unavailable too, not the caller's deadline.
	e.store.stalled.Store(true)
	if got := e.callErr(t, r); got != codes.Unavailable {
		t.Fatalf("store stalled, block mode: %v, want Unavailable", got)
	}
	e.store.stalled.Store(false)
	lim := e.lim(t)
	if err := e.admin(t).SetLimits(ctx, tollgate.SystemScope(), tollgate.Config{OnUnavailable: tollgate.Allow}); err != nil {
		t.Fatal(err)
	}
	e.call(t, r) // reads the new mode
	e.store.down.Store(true)
	resp := e.call(t, r)
	if resp.OverallCode != pb.RateLimitResponse_OK {
		t.Fatalf("store down, allow mode: %v, want OK", resp.OverallCode)
	}
	if lim.Stats().Degraded == 0 {
		t.Error("no degraded lease counted")
	}
	if cl := resp.Statuses[0].CurrentLimit; cl.GetName() != "rps" {
		t.Errorf("degraded current_limit %v, want the configured rps", cl)
	}
}

func TestNamespaces(t *testing.T) {
	e := start(t, `
domains:
  - domain: a
    namespace: tenant-a
    descriptors: [{key: k, resource: r, limits: ["rpm:1"]}]
  - domain: b
    descriptors: [{key: k, resource: r, limits: ["rpm:1"]}]
`)
	r := func(domain string) *pb.RateLimitRequest { return req(domain, 0, desc("k", "same")) }
	if got := e.callErr(t, r("a")); got != codes.FailedPrecondition {
		t.Fatalf("unregistered namespace: %v, want FailedPrecondition", got)
	}
	if _, err := e.admin(t).RegisterNamespace(context.Background(), "tenant-a"); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	delete(e.limiters, "tenant-a") // forget the cached "not found"
	e.mu.Unlock()
	for _, domain := range []string{"a", "b"} {
		if got := e.call(t, r(domain)).OverallCode; got != pb.RateLimitResponse_OK {
			t.Fatalf("domain %s: %v, want OK (namespaces are apart)", domain, got)
		}
	}
}

func TestInvalidConfigRefusesCalls(t *testing.T) {
	e := &env{clk: clock.NewFake(epoch), store: &downStore{Store: memory.New()}, limiters: map[string]*tollgate.Limiter{}}
	e.serve(t, rls.New(&rls.Config{}, e.limiter))
	if got := e.callErr(t, req("edge", 0, desc("api_key", "k"))); got != codes.FailedPrecondition {
		t.Fatalf("code %v, want FailedPrecondition", got)
	}
}

func TestConcurrentCallsGrantExactlyCapacity(t *testing.T) {
	const capacity, workers, perWorker = 37, 16, 8
	e := start(t, `
domains:
  - domain: edge
    descriptors:
      - key: api_key
        resource: http
        limits: ["rpm:37/min"]
`)
	var ok, over atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range perWorker {
				resp, err := e.client.ShouldRateLimit(context.Background(), req("edge", 0, desc("api_key", "hot")))
				if err != nil {
					errs <- err
					return
				}
				switch resp.OverallCode {
				case pb.RateLimitResponse_OK:
					ok.Add(1)
				case pb.RateLimitResponse_OVER_LIMIT:
					over.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if ok.Load() != capacity || over.Load() != workers*perWorker-capacity {
		t.Fatalf("%d OK and %d OVER_LIMIT, want %d and %d", ok.Load(), over.Load(), capacity, workers*perWorker-capacity)
	}
}
