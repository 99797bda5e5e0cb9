package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/server/ui"
)

// The dashboard's files are public; its sign-in check takes admin keys
// only, and says where the key reaches.
func TestDashboardRoutes(t *testing.T) {
	global, globalHash := GenerateKey()
	team, teamHash := GenerateKey()
	reader, readerHash := GenerateKey()
	keys, err := LoadKeys(strings.NewReader(globalHash + " * admin ops\n" + teamHash + " team-a admin team-a-ops\n" +
		readerHash + " * read auditor\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, WithKeys(keys))

	status, hdr := e.do("GET", "/ui/", nil, nil)
	if status != http.StatusOK || hdr.Get("Content-Security-Policy") != ui.ContentSecurityPolicy {
		t.Errorf("GET /ui/ without a key: %d, CSP %q; want 200 and the policy", status, hdr.Get("Content-Security-Policy"))
	}
	if status, hdr := e.do("POST", "/ui/", nil, nil); status != http.StatusMethodNotAllowed || hdr.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /ui/: %d, Allow %q; want 405, GET, HEAD", status, hdr.Get("Allow"))
	}
	noRedirect := *e.ts.Client()
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	// The root and /ui lead a browser to the dashboard, without a key;
	// other paths and methods are still the API's 404 and 405.
	for _, c := range []struct {
		method, path string
		status       int
		location     string
	}{
		{"GET", "/ui", http.StatusTemporaryRedirect, "/ui/"},
		{"GET", "/", http.StatusFound, "/ui/"},
		{"HEAD", "/", http.StatusFound, "/ui/"},
		{"POST", "/", http.StatusMethodNotAllowed, ""},
		{"GET", "/nowhere", http.StatusNotFound, ""},
	} {
		req, err := http.NewRequest(c.method, e.ts.URL+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status || resp.Header.Get("Location") != c.location {
			t.Errorf("%s %s: %d to %q, want %d to %q", c.method, c.path, resp.StatusCode, resp.Header.Get("Location"), c.status, c.location)
		}
	}

	cases := []struct {
		name, key string
		status    int
		want      sessionResponse
	}{
		{"no key", "", http.StatusUnauthorized, sessionResponse{}},
		{"unknown key", "tg_nope", http.StatusUnauthorized, sessionResponse{}},
		{"read key", reader, http.StatusForbidden, sessionResponse{}},
		{"global admin", global, http.StatusOK, sessionResponse{Principal: "ops", Namespace: "default", AllNamespaces: true, KeysRequired: true}},
		{"namespace admin", team, http.StatusOK, sessionResponse{Principal: "team-a-ops", Namespace: "team-a", KeysRequired: true}},
	}
	for _, c := range cases {
		e.hdr = http.Header{}
		if c.key != "" {
			e.hdr.Set("Authorization", "Bearer "+c.key)
		}
		var got sessionResponse
		status, _ := e.do("GET", sessionPath, nil, &got)
		if status != c.status || status == http.StatusOK && got != c.want {
			t.Errorf("%s: GET %s = %d %+v, want %d %+v", c.name, sessionPath, status, got, c.status, c.want)
		}
	}
}

// Without keys the dashboard opens without signing in.
func TestDashboardSessionWithoutKeys(t *testing.T) {
	e := newEnv(t)
	var got sessionResponse
	status, _ := e.do("GET", sessionPath, nil, &got)
	want := sessionResponse{Namespace: "default", AllNamespaces: true}
	if status != http.StatusOK || got != want {
		t.Errorf("GET %s = %d %+v, want 200 %+v", sessionPath, status, got, want)
	}
}
