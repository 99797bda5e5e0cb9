package middleware_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/middleware"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// Limit an HTTP API per API key: 2 requests a minute each. The same
// middleware takes a client.Client to enforce the limits through a
// tollgate serve instead.
func ExampleHTTP() {
	clk := clock.NewFake(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)) // the example's time stands still
	lim, _ := tollgate.New(memory.New(), tollgate.WithClock(clk))
	perKey := func(r *http.Request) (middleware.Key, error) {
		return middleware.Key{
			Entity: r.Header.Get("X-API-Key"), Resource: "api", Consume: tollgate.Consume{"rpm": 1},
			Options: []tollgate.AcquireOption{tollgate.WithLimits(tollgate.PerMinute("rpm", 2))},
		}, nil
	}
	api := middleware.HTTP(lim, perKey)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))
	for range 3 {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-API-Key", "key-1")
		api.ServeHTTP(rec, req)
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n", rec.Code, rec.Header().Get("RateLimit"), rec.Header().Get("Retry-After"))
		if rec.Code == http.StatusTooManyRequests {
			fmt.Printf("RateLimit-Policy: %s\n%s", rec.Header().Get("RateLimit-Policy"), rec.Body)
		}
	}
	// Output:
	// 200 RateLimit: "rpm";r=1 Retry-After: ""
	// 200 RateLimit: "rpm";r=0 Retry-After: ""
	// 429 RateLimit: "rpm";r=0;t=30 Retry-After: "30"
	// RateLimit-Policy: "rpm";q=2;w=60
	// {"error":"rate_limited","message":"rate limited: rpm: requested 1, available 0; retry after 30s","retry_after_ms":30000,"limits":[{"entity":"","resource":"api","limit":"rpm","kind":"rate","capacity":2,"available":0,"requested":1,"exceeded":true,"source":"call","retry_after_ms":30000,"window_ms":60000}]}
}

// Limit a gRPC server per caller, named in the call's metadata.
func ExampleUnaryServerInterceptor() {
	lim, _ := tollgate.New(memory.New())
	byCaller := func(ctx context.Context, method string) (middleware.Key, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		var caller string
		if v := md.Get("x-caller"); len(v) > 0 {
			caller = v[0]
		}
		return middleware.Key{Entity: caller, Resource: method, Consume: tollgate.Consume{"rps": 1},
			Options: []tollgate.AcquireOption{tollgate.WithLimits(tollgate.PerSecond("rps", 10))}}, nil
	}
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(middleware.UnaryServerInterceptor(lim, byCaller)),
		grpc.StreamInterceptor(middleware.StreamServerInterceptor(lim, byCaller)),
	)
	defer srv.Stop()
	fmt.Println("serving")
	// Output: serving
}

// Options: health checks run unlimited, callers without a key share the
// "anonymous" budget, and a refusal is answered with a page of its own
// (the RateLimit and Retry-After header fields already set).
func ExampleWithDefaultEntity() {
	clk := clock.NewFake(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	lim, _ := tollgate.New(memory.New(), tollgate.WithClock(clk))
	perKey := func(r *http.Request) (middleware.Key, error) {
		return middleware.Key{
			Entity: r.Header.Get("X-API-Key"), Resource: "api", Consume: tollgate.Consume{"rph": 1},
			Options: []tollgate.AcquireOption{tollgate.WithLimits(tollgate.PerHour("rph", 1))},
		}, nil
	}
	api := middleware.HTTP(lim, perKey,
		middleware.WithDefaultEntity("anonymous"),
		middleware.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" }),
		middleware.WithDenyHandler(func(w http.ResponseWriter, r *http.Request, ex *tollgate.RateLimitExceeded) {
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintln(w, "Slow down: one request an hour without a key.")
		}),
	)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") }))
	for _, path := range []string{"/", "/healthz", "/"} {
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		fmt.Printf("%s %d %q %s", path, rec.Code, rec.Header().Get("RateLimit-Policy"), rec.Body)
	}
	// Output:
	// / 200 "\"rph\";q=1;w=3600" hello
	// /healthz 200 "" hello
	// / 429 "\"rph\";q=1;w=3600" Slow down: one request an hour without a key.
}
