package server

import (
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/internal/lossystore"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// /metrics lists a series once it has counted something, and only then;
// the method label is the request's (HEAD on a GET route, any method on
// an unknown path).
func TestMetricsSeries(t *testing.T) {
	e := newEnv(t)
	for range 2 {
		e.want(http.StatusOK, "POST", "/v1/acquire", acquireBody("rpm:2/min"), nil)
	}
	e.want(http.StatusTooManyRequests, "POST", "/v1/acquire", acquireBody("rpm:2/min"), nil)
	e.want(http.StatusBadRequest, "POST", "/v1/acquire", `{"entity":1}`, nil)
	e.want(http.StatusOK, "HEAD", "/healthz", nil, nil)
	e.want(http.StatusOK, "GET", "/healthz", nil, nil)
	e.want(http.StatusNotFound, "DELETE", "/nowhere", nil, nil)
	e.want(http.StatusNotFound, "PUT", "/nowhere", nil, nil)

	resp, err := e.ts.Client().Get(e.ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got []string
	for _, line := range strings.Split(string(data), "\n") {
		if regexp.MustCompile(`^tollgate_(acquires_total|http_requests_total|http_request_duration_seconds_count)\{`).MatchString(line) {
			got = append(got, line)
		}
	}
	want := []string{
		`tollgate_acquires_total{outcome="granted"} 2`,
		`tollgate_acquires_total{outcome="invalid"} 1`,
		`tollgate_acquires_total{outcome="limited"} 1`,
		`tollgate_http_request_duration_seconds_count{route="/"} 2`,
		`tollgate_http_request_duration_seconds_count{route="/healthz"} 2`,
		`tollgate_http_request_duration_seconds_count{route="/v1/acquire"} 4`,
		`tollgate_http_requests_total{code="200",method="GET",route="/healthz"} 1`,
		`tollgate_http_requests_total{code="200",method="HEAD",route="/healthz"} 1`,
		`tollgate_http_requests_total{code="200",method="POST",route="/v1/acquire"} 2`,
		`tollgate_http_requests_total{code="400",method="POST",route="/v1/acquire"} 1`,
		`tollgate_http_requests_total{code="404",method="DELETE",route="/"} 1`,
		`tollgate_http_requests_total{code="404",method="PUT",route="/"} 1`,
		`tollgate_http_requests_total{code="429",method="POST",route="/v1/acquire"} 1`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("series:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The method label takes the methods of HTTP, and "other" for any other
// token: a caller sending a new method each time must not add a series
// (and a label as long as its request line) each time.
func TestMetricsMethodsBounded(t *testing.T) {
	e := newEnv(t)
	for i := range 200 {
		for _, path := range []string{"/nowhere", "/healthz", "/v1/acquire"} {
			req, err := http.NewRequest("M"+strconv.Itoa(i)+strings.Repeat("X", 1000), e.ts.URL+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := e.ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	e.want(http.StatusNotFound, "OPTIONS", "/nowhere", nil, nil)
	resp, err := e.ts.Client().Get(e.ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	methods := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^tollgate_http_requests_total\{[^}]*method="([^"]*)"`).FindAllStringSubmatch(string(data), -1) {
		methods[m[1]] = true
	}
	if len(methods) != 2 || !methods["other"] || !methods["OPTIONS"] {
		t.Errorf("%d method labels %v, want other and OPTIONS", len(methods), slices.Sorted(maps.Keys(methods)))
	}
}

// A concurrency slot's acquire whose answer is lost is a 503 for its
// caller; the server's limiter rolls the lease back (docs/semantics.md 8),
// so the slot is free again, and /metrics counts it ended.
func TestMetricsAbandonedAcquires(t *testing.T) {
	ended := make(chan struct{}, 1)
	st := lossystore.New(memory.New())
	st.Set(lossystore.Lost)
	e := newEnvOver(t, st, WithLimiterOptions(tollgate.WithOnAbandon(func(a tollgate.Abandoned) {
		if a.Outcome == tollgate.AbandonEnded {
			ended <- struct{}{}
		}
	})))
	slot := map[string]any{"entity": "key-1", "resource": "db", "consume": map[string]int64{"conns": 1}, "limits": []string{"conns:1/concurrent"}}
	e.want(http.StatusServiceUnavailable, "POST", "/v1/acquire", slot, nil)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("no abandonment ended within 10 s")
	}
	resp, err := e.ts.Client().Get(e.ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`tollgate_acquires_abandoned_total{outcome="ended"} 1`, `tollgate_acquires_abandoned_total{outcome="dropped"} 0`} {
		if !strings.Contains(string(data), "\n"+want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
	var avail api.AvailableResponse
	e.want(http.StatusOK, "GET", "/v1/available?entity=key-1&resource=db&limits=conns:1/concurrent", nil, &avail)
	if len(avail.Limits) != 1 || avail.Limits[0].Available != 1 {
		t.Errorf("available %+v, want the slot back", avail.Limits)
	}
}
