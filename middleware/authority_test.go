package middleware_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/middleware"
	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// Through a tollgate serve, the middleware's own limits (Key.Options) are
// a permission of its API key, as a client's are (docs/security.md):
// with an acquire key without allow_limits the request is refused, its
// handler does not run, and the stored limit stays in force, unchanged.
func TestOwnLimitsNeedThePermissionThroughTheServer(t *testing.T) {
	ctx := context.Background()
	ops, opsHash := server.GenerateKey()
	svc, svcHash := server.GenerateKey()
	keys, err := server.LoadKeys(strings.NewReader(opsHash + " default admin ops\n" + svcHash + " default acquire svc\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(memory.New(), server.WithKeys(keys), server.WithClock(clock.NewFake(epoch)),
		server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); _ = srv.Close(ctx) })
	newClient := func(key string) *client.Client {
		c, err := client.New(ts.URL, client.WithAPIKey(key))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if err := newClient(ops).SetLimits(ctx, tollgate.ResourceScope("api"), tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 3)}}); err != nil {
		t.Fatal(err)
	}
	c := newClient(svc)
	ran := 0
	handler := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran++ })
	charge := func(own ...tollgate.AcquireOption) http.Handler {
		return middleware.HTTP(c, func(r *http.Request) (middleware.Key, error) {
			return middleware.Key{Entity: r.Header.Get("X-Caller"), Resource: "api", Consume: tollgate.Consume{"rpm": 1}, Options: own}, nil
		}, quiet)(handler)
	}
	if rec := call(charge(tollgate.WithLimits(tollgate.PerMinute("rpm", 1_000_000))), "k"); rec.Code == http.StatusOK || ran != 0 {
		t.Fatalf("own limits without allow_limits: %d, handler ran %d times; want a refusal, not run", rec.Code, ran)
	}
	stored := charge()
	for i := range 3 {
		if rec := call(stored, "k"); rec.Code != http.StatusOK {
			t.Fatalf("request %d under the stored 3/min: %d %s", i, rec.Code, rec.Body)
		}
	}
	if rec := call(stored, "k"); rec.Code != http.StatusTooManyRequests || ran != 3 {
		t.Errorf("the 4th under the stored 3/min: %d (handler ran %d times), want 429 and 3 runs", rec.Code, ran)
	}
}
