package middleware_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/middleware"
)

// WithSkip, WithDenyHandler and WithDefaultEntity, over a limiter with 3
// requests a minute per caller: each case's requests in turn, and what
// each answers.
func TestHTTPOptions(t *testing.T) {
	type step struct {
		path, caller string
		code         int
		lease        bool // the handler found a lease
	}
	health := middleware.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" })
	teapot := middleware.WithDenyHandler(func(w http.ResponseWriter, _ *http.Request, ex *tollgate.RateLimitExceeded) {
		if ex.Primary().Limit != "rpm" {
			t.Errorf("deny handler got %v", ex)
		}
		w.WriteHeader(http.StatusTeapot)
	})
	anon := middleware.WithDefaultEntity("anonymous")
	work := func(caller string, code int) step { return step{"/work", caller, code, code == http.StatusNoContent} }
	for _, c := range []struct {
		name  string
		opts  []middleware.Option
		steps []step
	}{
		{"skip runs unlimited, without a lease", []middleware.Option{health}, []step{
			{"/healthz", "", http.StatusNoContent, false}, // no caller needed
			work("a", 204), work("a", 204), work("a", 204),
			{"/healthz", "a", http.StatusNoContent, false}, // not charged, not refused
			work("a", 429),
		}},
		{"deny handler answers refusals", []middleware.Option{teapot}, []step{
			work("a", 204), work("a", 204), work("a", 204), work("a", http.StatusTeapot),
			work("", http.StatusBadRequest), // not a refusal: the default answer
		}},
		{"default entity charges callers who name none", []middleware.Option{anon}, []step{
			work("", 204), work("", 204), work("", 204), work("", 429),
			work("a", 204), // a named caller has its own budget
		}},
		{"without a default entity, no caller is a 400", nil, []step{work("", http.StatusBadRequest)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			lim := newLimiter(t)
			var leased bool
			h := middleware.HTTP(lim, byHeader, append(c.opts, quiet)...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, leased = middleware.LeaseFrom(r.Context())
				w.WriteHeader(http.StatusNoContent)
			}))
			for i, s := range c.steps {
				leased = false
				rec := httptest.NewRecorder()
				req := httptest.NewRequest("GET", s.path, nil)
				if s.caller != "" {
					req.Header.Set("X-Caller", s.caller)
				}
				h.ServeHTTP(rec, req)
				if rec.Code != s.code || leased != s.lease {
					t.Errorf("step %d %s as %q: %d, lease %v; want %d, %v", i, s.path, s.caller, rec.Code, leased, s.code, s.lease)
				}
				if s.code == http.StatusTeapot && rec.Header().Get("Retry-After") != "20" {
					t.Errorf("deny handler: Retry-After %q not set before it ran", rec.Header().Get("Retry-After"))
				}
				if s.path == "/healthz" && rec.Header().Get("RateLimit") != "" {
					t.Errorf("a skipped request has RateLimit %q", rec.Header().Get("RateLimit"))
				}
			}
		})
	}
}

// The entity never reaches the RateLimit header fields: an API key used
// as the entity stays secret.
func TestHTTPHeadersKeepTheEntitySecret(t *testing.T) {
	h := middleware.HTTP(newLimiter(t), byHeader, quiet)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	for range 4 {
		rec := call(h, "sk-live-0123456789")
		for _, f := range []string{"RateLimit-Policy", "RateLimit"} {
			if v := rec.Header().Get(f); v == "" || strings.Contains(v, "sk-live") {
				t.Errorf("%d: %s %q: missing or names the entity", rec.Code, f, v)
			}
		}
	}
}

// The interceptors' options: WithGRPCSkip, WithGRPCDenyHandler and
// WithDefaultEntity.
func TestGRPCOptions(t *testing.T) {
	ctx := context.Background()
	noCaller := func(context.Context, string) (middleware.Key, error) {
		return middleware.Key{Resource: "api", Consume: tollgate.Consume{"rpm": 1}, Options: []tollgate.AcquireOption{limits}}, nil
	}
	fine := func(ctx context.Context, _ any) (any, error) {
		_, leased := middleware.LeaseFrom(ctx)
		return leased, nil
	}
	info := func(m string) *grpc.UnaryServerInfo { return &grpc.UnaryServerInfo{FullMethod: m} }
	errBusy := status.Error(codes.Unavailable, "busy, come back later")

	t.Run("no entity", func(t *testing.T) {
		ic := middleware.UnaryServerInterceptor(newLimiter(t), noCaller, quiet)
		if _, err := ic(ctx, nil, info("/s/Call"), fine); status.Code(err) != codes.InvalidArgument {
			t.Errorf("no entity: %v, want InvalidArgument", err)
		}
	})
	t.Run("options", func(t *testing.T) {
		ic := middleware.UnaryServerInterceptor(newLimiter(t), noCaller, quiet,
			middleware.WithDefaultEntity("anonymous"),
			middleware.WithGRPCSkip(func(_ context.Context, m string) bool { return m == "/grpc.health.v1.Health/Check" }),
			middleware.WithGRPCDenyHandler(func(_ context.Context, m string, ex *tollgate.RateLimitExceeded) error {
				if m != "/s/Call" || ex.Primary().Entity != "anonymous" {
					t.Errorf("deny handler got %s, %v", m, ex)
				}
				return errBusy
			}))
		for i, c := range []struct {
			method string
			leased bool
			err    error
		}{
			{"/s/Call", true, nil}, {"/s/Call", true, nil}, {"/s/Call", true, nil},
			{"/grpc.health.v1.Health/Check", false, nil}, // skipped: not charged, not refused
			{"/s/Call", false, errBusy},
		} {
			resp, err := ic(ctx, nil, info(c.method), fine)
			if !errors.Is(err, c.err) || (err == nil && resp != c.leased) {
				t.Errorf("call %d %s: %v, %v; want leased %v, %v", i, c.method, resp, err, c.leased, c.err)
			}
		}
	})
	t.Run("stream skip", func(t *testing.T) {
		ic := middleware.StreamServerInterceptor(newLimiter(t), noCaller, quiet, middleware.WithGRPCSkip(func(context.Context, string) bool { return true }))
		ran := false
		err := ic(nil, fakeStream{ctx: ctx}, &grpc.StreamServerInfo{FullMethod: "/s/Watch"}, func(any, grpc.ServerStream) error { ran = true; return nil })
		if err != nil || !ran {
			t.Errorf("skipped stream without an entity: ran %v, %v; want run", ran, err)
		}
	})
}

// fakeStream is a server stream of ctx alone (its other methods are not
// called).
type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s fakeStream) Context() context.Context { return s.ctx }
