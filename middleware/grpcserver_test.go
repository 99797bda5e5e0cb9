package middleware_test

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/middleware"
)

// Through a real gRPC server: the RateLimit metadata reaches the client
// on a grant and on a denial, named by limit, never by the caller.
func TestGRPCMetadataOverTheWire(t *testing.T) {
	byCaller := func(ctx context.Context, _ string) (middleware.Key, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		var caller string
		if v := md.Get("x-caller"); len(v) > 0 {
			caller = v[0]
		}
		return middleware.Key{Entity: caller, Resource: "api", Consume: tollgate.Consume{"rpm": 1},
			Options: []tollgate.AcquireOption{tollgate.WithLimits(tollgate.PerMinute("rpm", 2))}}, nil
	}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.UnaryInterceptor(middleware.UnaryServerInterceptor(newLimiter(t), byCaller, quiet)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	hc := healthpb.NewHealthClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-caller", "sk-secret")
	for i, want := range []struct {
		code  codes.Code
		state string
	}{
		{codes.OK, `"rpm";r=1`},
		{codes.OK, `"rpm";r=0`},
		{codes.ResourceExhausted, `"rpm";r=0;t=30`},
	} {
		var md metadata.MD
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
		if status.Code(err) != want.code {
			t.Fatalf("call %d: %v, want %v", i, err, want.code)
		}
		if p, st := md.Get("ratelimit-policy"), md.Get("ratelimit"); len(p) != 1 || p[0] != `"rpm";q=2;w=60` || len(st) != 1 || st[0] != want.state {
			t.Errorf("call %d: ratelimit-policy %q, ratelimit %q; want %q", i, p, st, want.state)
		}
	}
}
