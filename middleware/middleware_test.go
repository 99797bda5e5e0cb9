package middleware_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/middleware"
	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store/memory"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var quiet = middleware.WithLogger(slog.New(slog.DiscardHandler))

// limits: 3 requests a minute and 2 in flight, per caller.
var limits = tollgate.WithLimits(tollgate.PerMinute("rpm", 3), tollgate.ConcurrencyLimit("inflight", 2))

// byHeader charges the caller named in X-Caller one request and one slot.
func byHeader(r *http.Request) (middleware.Key, error) {
	return middleware.Key{Entity: r.Header.Get("X-Caller"), Resource: "api",
		Consume: tollgate.Consume{"rpm": 1, "inflight": 1}, Options: []tollgate.AcquireOption{limits}}, nil
}

func newLimiter(t *testing.T) *tollgate.Limiter {
	t.Helper()
	lim, err := tollgate.New(memory.New(), tollgate.WithClock(clock.NewFake(epoch)))
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

func newClient(t *testing.T) *client.Client {
	t.Helper()
	srv, err := server.New(memory.New(), server.WithClock(clock.NewFake(epoch)), server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); _ = srv.Close(context.Background()) })
	c, err := client.New(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func call(h http.Handler, caller string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/work", nil)
	if caller != "" {
		req.Header.Set("X-Caller", caller)
	}
	h.ServeHTTP(rec, req)
	return rec
}

// httpCases runs the HTTP middleware over a (a Limiter or a Client).
func httpCases[L tollgate.Held](t *testing.T, a tollgate.Acquirer[L]) {
	ctx := context.Background()
	mw := middleware.HTTP(a, byHeader, quiet)
	ok := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		le, found := middleware.LeaseFrom(r.Context())
		if !found || le.Entity() != r.Header.Get("X-Caller") {
			t.Errorf("LeaseFrom = %v, %v", le, found)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	rec := call(ok, "a")
	if rec.Code != http.StatusNoContent {
		t.Fatalf("granted: %d %s", rec.Code, rec.Body)
	}
	if p, rl := rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit"); p != `"rpm";q=3;w=60, "inflight";q=2` || rl != `"rpm";r=2, "inflight";r=1` {
		t.Errorf("RateLimit-Policy %q, RateLimit %q", p, rl)
	}
	free := func(limit string) int64 {
		sts, err := a.Available(ctx, "a", "api", limits)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sts {
			if s.Limit == limit {
				return s.Available
			}
		}
		t.Fatalf("no %s", limit)
		return 0
	}
	if free("inflight") != 2 || free("rpm") != 2 {
		t.Errorf("after a request: inflight %d (want 2: committed), rpm %d (want 2)", free("inflight"), free("rpm"))
	}

	failing := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	if rec := call(failing, "a"); rec.Code != http.StatusBadGateway {
		t.Fatalf("5xx: %d", rec.Code)
	}
	if free("rpm") != 2 {
		t.Errorf("a 5xx was rolled back: rpm %d, want 2", free("rpm"))
	}
	panicking := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not continue")
			}
		}()
		call(panicking, "a")
	}()
	if free("rpm") != 2 || free("inflight") != 2 {
		t.Errorf("a panic was rolled back: rpm %d inflight %d, want 2 and 2", free("rpm"), free("inflight"))
	}

	call(ok, "a")
	call(ok, "a")
	rec = call(ok, "a") // the fourth of 3 a minute
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "20" {
		t.Errorf("denied: %d, Retry-After %q; want 429 and 20", rec.Code, rec.Header().Get("Retry-After"))
	}
	// The server's error body: a client parses it as it parses tollgate serve's.
	er := errorBody(t, rec)
	if er.Code != api.CodeRateLimited || er.RetryAfterMS != 20_000 || len(er.Limits) != 2 || er.Limits[0].Limit != "rpm" || !er.Limits[0].Exceeded {
		t.Errorf("429 body %+v, want rate_limited, 20000 ms, the limits", er)
	}
	if err := api.AsError(rec.Code, er); !errors.Is(err, tollgate.ErrRateLimited) {
		t.Errorf("the 429 body read back: %v, want a rate limit error", err)
	}
	rec = call(ok, "")
	if er := errorBody(t, rec); rec.Code != http.StatusBadRequest || er.Code != api.CodeInvalidArgument || er.Message != "the request names no entity" {
		t.Errorf("no caller: %d %+v, want 400 invalid_argument", rec.Code, er)
	}
}

// errorBody reads rec's JSON error body.
func errorBody(t *testing.T, rec *httptest.ResponseRecorder) api.Error {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var er api.Error
	if err := json.Unmarshal(rec.Body.Bytes(), &er); err != nil {
		t.Fatalf("error body %q: %v", rec.Body, err)
	}
	return er
}

func TestHTTP(t *testing.T) {
	t.Run("library", func(t *testing.T) { httpCases[*tollgate.Lease](t, newLimiter(t)) })
	t.Run("client", func(t *testing.T) { httpCases(t, newClient(t)) })
}

// grpcCases runs the unary interceptor over a.
func grpcCases[L tollgate.Held](t *testing.T, a tollgate.Acquirer[L]) {
	ctx := context.Background()
	key := func(context.Context, string) (middleware.Key, error) {
		return middleware.Key{Entity: "svc", Resource: "api", Consume: tollgate.Consume{"rpm": 1}, Options: []tollgate.AcquireOption{limits}}, nil
	}
	ic := middleware.UnaryServerInterceptor(a, key, quiet)
	info := &grpc.UnaryServerInfo{FullMethod: "/demo.Service/Call"}
	internal := func(context.Context, any) (any, error) { return nil, status.Error(codes.Internal, "broke") }
	if _, err := ic(ctx, nil, info, internal); status.Code(err) != codes.Internal {
		t.Fatalf("handler error: %v", err)
	}
	fine := func(ctx context.Context, _ any) (any, error) {
		if _, ok := middleware.LeaseFrom(ctx); !ok {
			t.Error("no lease in the handler's context")
		}
		return "ok", nil
	}
	for i := range 3 { // the failed call was rolled back: 3 more fit
		if resp, err := ic(ctx, nil, info, fine); err != nil || resp != "ok" {
			t.Fatalf("call %d: %v, %v", i, resp, err)
		}
	}
	_, err := ic(ctx, nil, info, fine)
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("denied: %v, want ResourceExhausted", err)
	}
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			retry = ri
		}
	}
	if retry == nil || retry.RetryDelay.AsDuration() != 20*time.Second {
		t.Errorf("RetryInfo = %v, want 20s", retry)
	}
}

func TestGRPCUnary(t *testing.T) {
	t.Run("library", func(t *testing.T) { grpcCases[*tollgate.Lease](t, newLimiter(t)) })
	t.Run("client", func(t *testing.T) { grpcCases(t, newClient(t)) })
}

// With the store down, fail closed refuses (503, Unavailable), and fail
// open runs the handler on a degraded lease.
func TestFailOpenAndClosed(t *testing.T) {
	lim := newLimiter(t)
	for _, c := range []struct {
		mode tollgate.OnUnavailable
		want int
	}{{tollgate.Block, http.StatusServiceUnavailable}, {tollgate.Allow, http.StatusNoContent}} {
		key := func(r *http.Request) (middleware.Key, error) {
			k, err := byHeader(r)
			k.Options = append(k.Options, tollgate.WithOnUnavailable(c.mode))
			return k, err
		}
		h := middleware.HTTP[*tollgate.Lease](downAcquirer{lim}, key, quiet)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		}))
		if rec := call(h, "a"); rec.Code != c.want {
			t.Errorf("%s: %d, want %d", c.mode, rec.Code, c.want)
		}
	}
}

// downAcquirer answers as a limiter whose store does not answer: in Block
// mode an *UnavailableError, in Allow mode a degraded lease (from a
// limiter over a store that fails).
type downAcquirer struct{ *tollgate.Limiter }

func (d downAcquirer) Acquire(ctx context.Context, entity, resource string, c tollgate.Consume, opts ...tollgate.AcquireOption) (*tollgate.Lease, error) {
	lim, err := tollgate.New(failingStore{memory.New()})
	if err != nil {
		return nil, err
	}
	return lim.Acquire(ctx, entity, resource, c, opts...)
}

var errDown = errors.New("connection refused")

// failingStore is a memory store whose every read and consume fails.
type failingStore struct{ *memory.Store }

func (failingStore) GetNamespace(context.Context, string) (tollgate.Namespace, error) {
	return tollgate.Namespace{}, errDown
}

func (failingStore) GetEntity(context.Context, string, string) (tollgate.Entity, error) {
	return tollgate.Entity{}, errDown
}
