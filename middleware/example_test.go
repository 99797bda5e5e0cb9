package middleware_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/middleware"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// Limit an HTTP API per API key: 2 requests a minute each. The same
// middleware takes a client.Client to enforce the limits through a
// tollgate serve instead.
func ExampleHTTP() {
	lim, _ := tollgate.New(memory.New())
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
	}
	// Output:
	// 200 RateLimit: "key-1/rpm";r=1 Retry-After: ""
	// 200 RateLimit: "key-1/rpm";r=0 Retry-After: ""
	// 429 RateLimit: "key-1/rpm";r=0;t=30 Retry-After: "30"
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
