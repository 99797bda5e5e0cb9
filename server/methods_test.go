package server

import (
	"net/http"
	"testing"

	"github.com/tollgate-rl/tollgate/api"
)

// A known path asked with another method answers 405 with the methods it
// is served with; an unknown path 404.
func TestMethodNotAllowed(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/v1/acquire", http.StatusMethodNotAllowed, "POST"},
		{"DELETE", "/v1/limits/resources/openai/gpt-4o", http.StatusOK, ""}, // nothing stored: still served
		{"PATCH", "/v1/limits/resources/api", http.StatusMethodNotAllowed, "GET, HEAD, PUT, DELETE"},
		{"POST", "/v1/leases/0123456789abcdef0123456789abcdef", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"GET", "/v1/nothing-here", http.StatusNotFound, ""},
	}
	for _, c := range cases {
		var out api.Error
		status, hdr := e.do(c.method, c.path, nil, &out)
		if c.status == http.StatusOK {
			if status == http.StatusMethodNotAllowed || status == http.StatusNotFound && out.Reason == "no_route" {
				t.Errorf("%s %s = %d %s, want it served", c.method, c.path, status, out.Reason)
			}
			continue
		}
		if status != c.status || hdr.Get("Allow") != c.allow {
			t.Errorf("%s %s = %d, Allow %q; want %d, Allow %q", c.method, c.path, status, hdr.Get("Allow"), c.status, c.allow)
		}
		if status == http.StatusMethodNotAllowed && (out.Code != api.CodeMethodNotAllowed || out.Reason != "method_not_allowed") {
			t.Errorf("%s %s: body %+v, want method_not_allowed", c.method, c.path, out)
		}
	}
}
