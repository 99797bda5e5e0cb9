package securitytest

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store"
)

// env is two servers (replicas) over one store, with a keys file of an
// operator (every namespace), a namespace admin, an acquire key and a read
// key, on one fake clock.
type env struct {
	t    *testing.T
	a, b string // the replicas' URLs
	clk  *clock.Fake
	keys map[string]string // secret by role: root, ops, svc, reader
}

// refresh is the replicas' refresh interval: short, so that a change made
// through one is seen by the other quickly.
const refresh = 100 * time.Millisecond

func newEnv(t *testing.T, open func(t *testing.T) (a, b store.Store)) *env {
	t.Helper()
	e := &env{t: t, clk: clock.NewFake(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)), keys: map[string]string{}}
	var file strings.Builder
	for _, k := range []struct{ name, ns, role string }{{"root", "*", "admin"}, {"ops", "default", "admin"}, {"svc", "default", "acquire"}, {"reader", "default", "read"}} {
		secret, hash := server.GenerateKey()
		e.keys[k.name] = secret
		file.WriteString(hash + " " + k.ns + " " + k.role + " " + k.name + "\n")
	}
	keys, err := server.LoadKeys(strings.NewReader(file.String()))
	if err != nil {
		t.Fatal(err)
	}
	sa, sb := open(t)
	for i, st := range []store.Store{sa, sb} {
		srv, err := server.New(st, server.WithKeys(keys), server.WithClock(e.clk), server.WithRefreshInterval(refresh),
			server.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			e.a = serve(t, srv)
		} else {
			e.b = serve(t, srv)
		}
	}
	return e
}

// answer is a response: its status and body.
type answer struct {
	status int
	body   []byte
}

// err decodes the body as an error.
func (a answer) err() api.Error {
	var e api.Error
	_ = json.Unmarshal(a.body, &e)
	return e
}

// call sends a request to the server at url with the secret key (none if
// ""), body as JSON (a string is sent as it is).
func (e *env) call(url, key, method, path string, body any) answer {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, data}
}

// want is call on replica a, failing unless the status is status; it
// decodes a JSON answer into out (if not nil).
func (e *env) want(status int, key, method, path string, body, out any) answer {
	e.t.Helper()
	a := e.call(e.a, key, method, path, body)
	if a.status != status {
		e.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, a.status, status, a.body)
	}
	if out != nil {
		if err := json.Unmarshal(a.body, out); err != nil {
			e.t.Fatalf("%s %s: %v in %s", method, path, err, a.body)
		}
	}
	return a
}

// denied is want with 403, checking the field the answer names.
func (e *env) denied(field, key, method, path string, body any) {
	e.t.Helper()
	a := e.want(http.StatusForbidden, key, method, path, body, nil)
	if got := a.err(); got.Code != api.CodePermissionDenied || got.Field != field {
		e.t.Errorf("%s %s: %+v, want permission_denied naming %q", method, path, got, field)
	}
}

// available returns what GET /v1/available says of one limit.
func (e *env) available(entity, resource, limit string) int64 {
	e.t.Helper()
	var out api.AvailableResponse
	e.want(http.StatusOK, e.keys["ops"], "GET", "/v1/available?entity="+entity+"&resource="+resource, nil, &out)
	for _, l := range out.Limits {
		if l.Limit == limit && l.Entity == entity {
			return l.Available
		}
	}
	e.t.Fatalf("no limit %s of %s/%s in %+v", limit, entity, resource, out)
	return 0
}

// setLimits stores limits at a scope path (e.g. "/v1/limits/resources/api").
func (e *env) setLimits(path string, limits ...string) {
	e.t.Helper()
	e.want(http.StatusOK, e.keys["ops"], "PUT", path, map[string]any{"limits": limits}, nil)
}

// acquire is POST /v1/acquire with commit, for entity and resource.
func acquire(entity, resource string, consume map[string]int64, extra ...func(map[string]any)) map[string]any {
	b := map[string]any{"entity": entity, "resource": resource, "consume": consume, "commit": true}
	for _, f := range extra {
		f(b)
	}
	return b
}

func withLimits(limits ...string) func(map[string]any) {
	return func(b map[string]any) { b["limits"] = limits }
}

func held(b map[string]any) { delete(b, "commit") }
