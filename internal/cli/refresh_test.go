package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/internal/redislocal"
	"github.com/tollgate-rl/tollgate/model"
)

// serve's --refresh-interval and --cache-ttl (issue 21 item 3): three
// servers over one Redis; a limit stored through the first is in force on
// one refreshing every 100 ms within 600 ms, and still not on one
// refreshing (and caching) hourly 1.5 s later, when the default interval
// of a second would have shown it. Values out of range are usage errors.
// (And --store-timeout 0 over Redis is warned of.)
func TestServeRefreshInterval(t *testing.T) {
	needRedisServer(t)
	ctx := context.Background()
	srv, err := redislocal.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	writer := startServe(t, "--store", srv.URL)
	fast := startServe(t, "--store", srv.URL, "--refresh-interval", "100ms")
	slow := startServe(t, "--store", srv.URL, "--refresh-interval", "1h", "--cache-ttl", "1h")
	cl := func(url string) *client.Client {
		c, err := client.New(url)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	w, f, s := cl(writer.url), cl(fast.url), cl(slow.url)
	set := func(n int64) {
		t.Helper()
		if err := w.SetLimits(ctx, model.ResourceScope("api"), model.Config{Limits: []model.Limit{model.PerMinute("rpm", n)}}); err != nil {
			t.Fatal(err)
		}
	}
	capacity := func(c *client.Client) int64 {
		t.Helper()
		st, err := c.Available(ctx, "k", "api")
		if err != nil || len(st) != 1 {
			t.Fatalf("Available: %v, %v", st, err)
		}
		return st[0].Capacity
	}
	set(10)
	if capacity(f) != 10 || capacity(s) != 10 {
		t.Fatal("the first limit is not in force")
	}
	set(20)
	changed := time.Now()
	for capacity(f) != 20 {
		if time.Since(changed) > 600*time.Millisecond {
			t.Fatalf("--refresh-interval 100ms: the change not in force after %v", time.Since(changed))
		}
		time.Sleep(10 * time.Millisecond) // polling the server's answers, not a race fix
	}
	t.Logf("--refresh-interval 100ms: in force after %v", time.Since(changed))
	time.Sleep(time.Until(changed.Add(1500 * time.Millisecond))) // longer than the default interval
	if got := capacity(s); got != 10 {
		t.Errorf("--refresh-interval 1h --cache-ttl 1h: capacity %d 1.5 s after the change, want the cached 10", got)
	}
	// No store timeout over Redis is allowed, and warned of.
	startServe(t, "--store", srv.URL, "--store-timeout", "0").waitLog(t, "a Redis that stops answering holds requests")
	for _, args := range [][]string{{"--refresh-interval", "0s"}, {"--cache-ttl", "-1s"}} {
		if code, _, stderr := run(t, "", append([]string{"serve", "--store", "memory:"}, args...)...); code != ExitUsage || !strings.Contains(stderr, "--refresh-interval") {
			t.Errorf("serve %v: exit %d (%s), want %d", args, code, strings.TrimSpace(stderr), ExitUsage)
		}
	}
}
