package server

import (
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
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
