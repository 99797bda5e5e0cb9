package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/client"
)

// fakeServer answers every request with h.
func fakeServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

// deadListener accepts connections on a loopback port it keeps for the
// whole test and closes each at once, before reading a byte: a server that
// is down, at an address no other process can take meanwhile (a closed
// port could be taken, and a port that refuses is not guaranteed free).
func deadListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return "http://" + ln.Addr().String()
}

func TestServerDownIsUnavailable(t *testing.T) {
	c := newClient(t, deadListener(t))
	_, err := c.Acquire(context.Background(), "key-1", "gpt", tollgate.Consume{"rpm": 1})
	var ue *tollgate.UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, tollgate.ErrUnavailable) {
		t.Fatalf("Acquire against a dead server: err = %v (%T), want *UnavailableError", err, err)
	}
	if ue.Op != "POST /v1/acquire" {
		t.Errorf("Op = %q, want POST /v1/acquire", ue.Op)
	}
	// It failed on the connection, not by waiting out the client's timeout.
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire waited for its timeout: %v", err)
	}
	wantErr(t, "Healthy against a dead server", c.Healthy(context.Background()), tollgate.ErrUnavailable)
}

// slowServer answers nothing until the client gives up or the test ends.
func slowServer(t *testing.T) *httptest.Server {
	release := make(chan struct{})
	ts := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before ts.Close
	return ts
}

func TestTimeoutIsUnavailable(t *testing.T) {
	const timeout = 100 * time.Millisecond
	c := newClient(t, slowServer(t).URL, client.WithTimeout(timeout))
	start := time.Now()
	_, err := c.GetEntity(context.Background(), "org-1")
	elapsed := time.Since(start)
	wantErr(t, "GetEntity from a slow server", err, tollgate.ErrUnavailable)
	wantErr(t, "GetEntity from a slow server", err, context.DeadlineExceeded)
	if elapsed < timeout || elapsed > timeout+10*time.Second {
		t.Errorf("gave up after %v, want just over %v", elapsed, timeout)
	}
}

func TestCallerCancelIsUnavailableAndCanceled(t *testing.T) {
	c := newClient(t, slowServer(t).URL)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := c.ListNamespaces(ctx)
	wantErr(t, "cancelled call", err, context.Canceled)
	wantErr(t, "cancelled call", err, tollgate.ErrUnavailable)
}

func TestAnswersThatAreNotAPIErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		header map[string]string
		body   string
		check  func(t *testing.T, err error)
	}{
		{"proxy 502 page", http.StatusBadGateway, nil, "<html>bad gateway</html>", func(t *testing.T, err error) {
			wantErr(t, "502", err, tollgate.ErrUnavailable)
		}},
		{"readyz 503", http.StatusServiceUnavailable, nil, `{"status":"store unreachable"}`, func(t *testing.T, err error) {
			wantErr(t, "503", err, tollgate.ErrUnavailable)
		}},
		{"bare 429", http.StatusTooManyRequests, map[string]string{"Retry-After": "7"}, "slow down", func(t *testing.T, err error) {
			var ex *tollgate.RateLimitExceeded
			if !errors.As(err, &ex) || ex.RetryAfter != 7*time.Second {
				t.Errorf("err = %v, want *RateLimitExceeded with RetryAfter 7s", err)
			}
		}},
		{"proxy 401", http.StatusUnauthorized, nil, "who are you", func(t *testing.T, err error) {
			wantErr(t, "401", err, api.ErrUnauthenticated)
		}},
		{"proxy 404 is not a missing config", http.StatusNotFound, nil, "<html>no</html>", func(t *testing.T, err error) {
			var se *api.StatusError
			if !errors.As(err, &se) || se.Status != http.StatusNotFound || errors.Is(err, tollgate.ErrNotFound) {
				t.Errorf("err = %v (%T), want a plain *api.StatusError 404", err, err)
			}
		}},
		{"garbage 200", http.StatusOK, nil, "<html>welcome</html>", func(t *testing.T, err error) {
			wantErr(t, "garbage 200", err, client.ErrBadResponse)
			wantErr(t, "garbage 200", err, tollgate.ErrUnavailable)
		}},
		{"huge 200", http.StatusOK, nil, `{"limits":["` + strings.Repeat("x", client.MaxResponseBytes) + `"]}`, func(t *testing.T, err error) {
			wantErr(t, "huge 200", err, client.ErrBadResponse)
		}},
		{"200 with an unparsable limit", http.StatusOK, nil, `{"limits":["rpm:banana"]}`, func(t *testing.T, err error) {
			wantErr(t, "bad limit", err, client.ErrBadResponse)
		}},
		{"huge message", http.StatusConflict, nil, `{"error":"conflict","reason":"conflict","message":"` + strings.Repeat("é", 100_000) + `"}`, func(t *testing.T, err error) {
			wantErr(t, "conflict", err, api.ErrConflict)
			if n := len(err.Error()); n > 1024 {
				t.Errorf("error text is %d bytes, want it bounded", n)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			})
			_, err := newClient(t, ts.URL).GetLimits(context.Background(), tollgate.SystemScope())
			if err == nil {
				t.Fatal("err = nil")
			}
			tt.check(t, err)
		})
	}
}

func TestGrantWithoutLeaseIDIsBadResponse(t *testing.T) {
	ts := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"consumed":{"rpm":1},"limits":[]}`))
	})
	_, err := newClient(t, ts.URL).Acquire(context.Background(), "key-1", "gpt", tollgate.Consume{"rpm": 1})
	wantErr(t, "grant without a lease id", err, client.ErrBadResponse)
}

func TestRequestHeadersAndPaths(t *testing.T) {
	type seen struct {
		method, path, query string
		header              http.Header
	}
	var (
		mu   sync.Mutex
		reqs []seen
	)
	ts := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone()})
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	c := newClient(t, ts.URL+"/tollgate/", client.WithAPIKey("k3y"), client.WithNamespace("tenant-a"),
		client.WithPrincipal("alice"), client.WithUserAgent("checkout/2"))
	ctx := context.Background()
	must(t, "DeleteLimits", c.DeleteLimits(ctx, tollgate.ResourceScope("openai/gpt-4o")))
	must(t, "DeleteLimits", c.DeleteLimits(ctx, tollgate.EntityScope("org:1", "openai/gpt-4o")))
	must(t, "DeleteLimits", c.DeleteLimits(ctx, tollgate.EntityScope("org:1", "")))
	must(t, "DeleteLimits", c.DeleteLimits(ctx, tollgate.SystemScope()))
	must(t, "DeleteEntity", c.DeleteEntity(ctx, "a b/c"))

	want := []seen{
		{"DELETE", "/tollgate/v1/limits/resources/openai%2Fgpt-4o", "", nil},
		{"DELETE", "/tollgate/v1/limits/entities/org:1", "resource=openai%2Fgpt-4o", nil},
		{"DELETE", "/tollgate/v1/limits/entities/org:1", "", nil},
		{"DELETE", "/tollgate/v1/limits/system", "", nil},
		{"DELETE", "/tollgate/v1/entities/a%20b%2Fc", "", nil},
	}
	if len(reqs) != len(want) {
		t.Fatalf("server saw %d requests, want %d", len(reqs), len(want))
	}
	for i, w := range want {
		got := reqs[i]
		if got.method != w.method || got.path != w.path || got.query != w.query {
			t.Errorf("request %d: %s %s ?%s, want %s %s ?%s", i, got.method, got.path, got.query, w.method, w.path, w.query)
		}
		h := got.header
		if h.Get("Authorization") != "Bearer k3y" || h.Get(api.NamespaceHeader) != "tenant-a" ||
			h.Get(client.PrincipalHeader) != "alice" || h.Get("User-Agent") != "checkout/2" {
			t.Errorf("request %d headers = %v", i, h)
		}
	}
}

func TestNewRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "localhost:8080", "ftp://host", "http://", "http://host/?q=1", "http://host/#f", "://x"} {
		_, err := client.New(u)
		var ve *tollgate.ValidationError
		if !errors.As(err, &ve) || ve.Field != "base_url" {
			t.Errorf("New(%q): err = %v, want a *ValidationError on base_url", u, err)
		}
	}
}

func TestConnectionsAreReused(t *testing.T) {
	var conns atomic.Int32
	e := startEnv(t, func(hs *http.Server) {
		hs.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
	})
	c := e.client(t)
	ctx := context.Background()
	for range 20 {
		_, err := c.GetEntity(ctx, "missing") // an error answer, with a body
		wantErr(t, "GetEntity", err, tollgate.ErrEntityNotFound)
		must(t, "Healthy", c.Healthy(ctx))
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("40 sequential calls opened %d connections, want 1", n)
	}
}
