package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// env is a real server over a memory store, on a frozen fake clock.
type env struct {
	clk *clock.Fake
	srv *server.Server
	ts  *httptest.Server
}

func newEnv(t testing.TB, opts ...server.Option) *env {
	t.Helper()
	return startEnv(t, nil, opts...)
}

// startEnv is newEnv with a hook to configure the http.Server before it
// starts (nil for none).
func startEnv(t testing.TB, configure func(*http.Server), opts ...server.Option) *env {
	t.Helper()
	return startEnvOver(t, memory.New(), configure, opts...)
}

// startEnvOver is startEnv over the store st.
func startEnvOver(t testing.TB, st store.Store, configure func(*http.Server), opts ...server.Option) *env {
	t.Helper()
	clk := clock.NewFake(epoch)
	base := []server.Option{server.WithClock(clk), server.WithLogger(slog.New(slog.DiscardHandler))}
	srv, err := server.New(st, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv)
	if configure != nil {
		configure(ts.Config)
	}
	ts.Start()
	t.Cleanup(func() {
		ts.Close()
		if err := srv.Close(context.Background()); err != nil {
			t.Errorf("server Close: %v", err)
		}
	})
	return &env{clk: clk, srv: srv, ts: ts}
}

// client returns a client of the env's server.
func (e *env) client(t testing.TB, opts ...client.Option) *client.Client {
	t.Helper()
	return newClient(t, e.ts.URL, opts...)
}

func newClient(t testing.TB, url string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, opts...)
	if err != nil {
		t.Fatalf("client.New(%q): %v", url, err)
	}
	return c
}

// wantErr fails unless errors.Is(err, target).
func wantErr(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v (%T), want one matching %v", what, err, err, target)
	}
}

// must fails on err.
func must(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
