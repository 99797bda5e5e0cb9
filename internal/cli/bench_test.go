package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// The load generator sends one acquire with commit per operation, for the
// client's own entity, with the API key and namespace, and reports any
// answer but 200 as an error.
func TestHTTPAcquirer(t *testing.T) {
	key, hash := server.GenerateKey()
	keys, err := server.LoadKeys(strings.NewReader(hash + " default acquire bench allow_limits\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(memory.New(), server.WithKeys(keys), server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	var mu sync.Mutex
	perEntity := map[string]int{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Entity string
			Commit bool
		}
		if err := json.Unmarshal(body, &req); err != nil || !req.Commit || r.URL.Path != "/v1/acquire" {
			t.Errorf("%s %s %s: not an acquire with commit", r.Method, r.URL, body)
		}
		mu.Lock()
		perEntity[req.Entity]++
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		srv.ServeHTTP(w, r)
	}))
	defer ts.Close()

	h, err := newHTTPBench(ts.URL, key, "default", 3)
	if err != nil {
		t.Fatal(err)
	}
	op := h.op(routeAcquireCommit)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			for range 5 {
				if err := op(i); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if want := map[string]int{"bench-0": 5, "bench-1": 5, "bench-2": 5}; !maps.Equal(perEntity, want) {
		t.Errorf("requests by entity %v, want %v", perEntity, want)
	}

	h, err = newHTTPBench(ts.URL, "tg_wrong", "default", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.op(routeAcquireCommit)(0); err == nil || err.Error() != "status 401" {
		t.Errorf("with an unknown key: %v, want status 401", err)
	}
}

// tollgate bench runs each number of clients over HTTP, then in-process,
// without errors.
func TestRunBench(t *testing.T) {
	g := &globals{store: "memory:", namespace: "default"}
	results, err := runBench(context.Background(), g, []int{1, 4}, []string{routeAcquireCommit}, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range results {
		got = append(got, r.Mode)
		if r.Requests == 0 || r.Errors != 0 || r.P50 <= 0 || r.P99 < r.P50 {
			t.Errorf("%+v", r)
		}
		// Every request costs some CPU, and none a whole millisecond.
		if r.CPUPerRequest <= 0 || r.CPUPerRequest > 1000 {
			t.Errorf("%s with %d clients: %.2f µs of CPU per request", r.Mode, r.Clients, r.CPUPerRequest)
		}
	}
	if strings.Join(got, ",") != "http,in-process,http,in-process" {
		t.Errorf("modes %v", got)
	}
}

// Every route runs over HTTP, commit ending the leases acquire left open
// (no more commits than acquires, and every open lease committed when
// there is time), and only acquire+commit has an in-process baseline.
func TestBenchRoutes(t *testing.T) {
	routes, err := parseRoutes("commit,available")
	if err != nil || !slices.Equal(routes, []string{routeAcquire, routeCommit, routeAvailable}) {
		t.Fatalf("parseRoutes(commit,available) = %v, %v; want acquire brought in, in order", routes, err)
	}
	if _, err := parseRoutes("acquire,delete"); err == nil {
		t.Error("an unknown route was accepted")
	}
	g := &globals{store: "memory:", namespace: "default"}
	results, err := runBench(context.Background(), g, []int{2}, benchRoutes, 150*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	byRoute := map[string]benchResult{}
	var modes []string
	for _, r := range results {
		modes = append(modes, r.Mode+" "+r.Route)
		if r.Mode == "http" {
			byRoute[r.Route] = r
		}
		if r.Requests == 0 || r.Errors != 0 {
			t.Errorf("%s %s: %+v", r.Mode, r.Route, r)
		}
	}
	want := []string{"http acquire+commit", "in-process acquire+commit", "http acquire", "http commit", "http available"}
	if !slices.Equal(modes, want) {
		t.Errorf("runs %v, want %v", modes, want)
	}
	if a, c := byRoute[routeAcquire].Requests, byRoute[routeCommit].Requests; c > a {
		t.Errorf("%d commits of %d leases acquired", c, a)
	}
}

// With --server, the server's CPU per request is read from its metrics
// around each HTTP run; a server whose metrics do not answer leaves it
// unknown (0), and the in-process baseline never has one.
func TestBenchServerCPU(t *testing.T) {
	srv, err := server.New(memory.New(), server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	withMetrics := httptest.NewServer(srv)
	defer withMetrics.Close()
	without := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			http.NotFound(w, r)
			return
		}
		srv.ServeHTTP(w, r)
	}))
	defer without.Close()
	for _, tc := range []struct {
		name  string
		url   string
		known bool
	}{{"metrics", withMetrics.URL, true}, {"no metrics", without.URL, false}} {
		g := &globals{store: "memory:", namespace: "default", server: tc.url}
		results, err := runBench(context.Background(), g, []int{2}, []string{routeAcquireCommit}, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			known := r.ServerCPUPerRequest > 0
			if want := tc.known && r.Mode == "http"; known != want || r.ServerCPUPerRequest > 1000 {
				t.Errorf("%s: %s: server CPU per request %.2f µs, want known=%v", tc.name, r.Mode, r.ServerCPUPerRequest, want)
			}
		}
	}
}
