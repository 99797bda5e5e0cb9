package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/aggregator"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type env struct {
	t   testing.TB
	srv *Server
	ts  *httptest.Server
	clk *clock.Fake
	hdr http.Header // sent with every request
}

func newEnv(t testing.TB, opts ...Option) *env {
	t.Helper()
	return newEnvOver(t, memory.New(), opts...)
}

// newEnvOver is newEnv over the store st.
func newEnvOver(t testing.TB, st store.Store, opts ...Option) *env {
	t.Helper()
	clk := clock.NewFake(epoch)
	srv := mustServer(New(st, append([]Option{WithClock(clk), WithLogger(slog.New(slog.DiscardHandler))}, opts...)...))
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		_ = srv.Close(context.Background())
	})
	return &env{t: t, srv: srv, ts: ts, clk: clk, hdr: http.Header{}}
}

// do sends a request (body: nil, a string of raw JSON, or a value to
// encode) and decodes a JSON answer into out (if not nil).
func (e *env) do(method, path string, body any, out any) (int, http.Header) {
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
	req, err := http.NewRequest(method, e.ts.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range e.hdr {
		req.Header[k] = v
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode, resp.Header
}

func (e *env) want(status int, method, path string, body any, out any) http.Header {
	e.t.Helper()
	var raw json.RawMessage
	got, h := e.do(method, path, body, &raw)
	if got != status {
		e.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, got, status, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			e.t.Fatal(err)
		}
	}
	return h
}

func acquireBody(limits ...string) map[string]any {
	return map[string]any{"entity": "key-1", "resource": "api", "consume": map[string]int64{"rpm": 1}, "limits": limits}
}

func TestLeaseLifecycle(t *testing.T) {
	e := newEnv(t)
	e.want(http.StatusOK, "PUT", "/v1/limits/resources/api", api.Limits{Limits: []string{"rpm:10/min"}}, nil)
	var acq api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", map[string]any{"entity": "key-1", "resource": "api", "consume": map[string]int64{"rpm": 2}}, &acq)
	if acq.LeaseID == "" || acq.Consumed["rpm"] != 2 || len(acq.Limits) != 1 || acq.Limits[0].Available != 8 {
		t.Fatalf("acquire = %+v", acq)
	}
	if want := epoch.Add(DefaultLeaseTTL).UnixMilli(); acq.ExpiresMS != want {
		t.Errorf("expires %d, want %d (default TTL)", acq.ExpiresMS, want)
	}
	var lr api.LeaseResponse
	e.want(http.StatusOK, "POST", "/v1/leases/"+acq.LeaseID+"/adjust", api.AdjustRequest{Consume: map[string]int64{"rpm": 3}}, &lr)
	if lr.Consumed["rpm"] != 5 || lr.State != "open" {
		t.Errorf("after adjust +3: %+v", lr)
	}
	e.want(http.StatusOK, "POST", "/v1/leases/"+acq.LeaseID+"/adjust", api.AdjustRequest{Consume: map[string]int64{"rpm": -1}}, &lr)
	e.want(http.StatusOK, "POST", "/v1/leases/"+acq.LeaseID+"/commit", nil, &lr)
	if lr.Consumed["rpm"] != 4 || lr.State != "committed" {
		t.Errorf("commit: %+v", lr)
	}
	var avail api.AvailableResponse
	e.want(http.StatusOK, "GET", "/v1/available?entity=key-1&resource=api", nil, &avail)
	if len(avail.Limits) != 1 || avail.Limits[0].Available != 6 {
		t.Errorf("available after committing 4 of 10: %+v", avail.Limits)
	}
	// An ended lease says how it ended: a commit again answers the first
	// commit's body (its answer may have been lost), anything else is 409;
	// an id never granted is 404.
	var again api.LeaseResponse
	e.want(http.StatusOK, "POST", "/v1/leases/"+acq.LeaseID+"/commit", `{}`, &again)
	if again.State != "committed" || again.Consumed["rpm"] != 4 || again.LeaseID != acq.LeaseID {
		t.Errorf("commit again: %+v, want the first commit's answer", again)
	}
	for _, path := range []string{acq.LeaseID + "/rollback", acq.LeaseID + "/adjust", acq.LeaseID + "/extend"} {
		var er api.Error
		e.want(http.StatusConflict, "POST", "/v1/leases/"+path, `{}`, &er)
		if er.Code != api.CodeConflict || er.Reason != "lease_closed" || er.Ended != "committed" {
			t.Errorf("%s: %+v, want 409 lease_closed, ended committed", path, er)
		}
	}
	e.want(http.StatusConflict, "GET", "/v1/leases/"+acq.LeaseID, nil, nil)
	for _, path := range []string{"nope/commit", strings.Repeat("0", 32) + "/commit"} {
		var er api.Error
		e.want(http.StatusNotFound, "POST", "/v1/leases/"+path, `{}`, &er)
		if er.Code != api.CodeNotFound || er.Reason != "lease_not_found" {
			t.Errorf("%s: %+v, want 404 lease_not_found", path, er)
		}
	}
}

func TestRollbackGivesBack(t *testing.T) {
	e := newEnv(t)
	var acq api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", acquireBody("rpm:1/min"), &acq)
	e.want(http.StatusTooManyRequests, "POST", "/v1/acquire", acquireBody("rpm:1/min"), nil)
	var lr api.LeaseResponse
	e.want(http.StatusOK, "POST", "/v1/leases/"+acq.LeaseID+"/rollback", nil, &lr)
	if lr.State != "rolled_back" || lr.Consumed["rpm"] != 0 {
		t.Errorf("rollback: %+v", lr)
	}
	e.want(http.StatusOK, "POST", "/v1/acquire", acquireBody("rpm:1/min"), nil)
}

func TestRateLimitedResponse(t *testing.T) {
	e := newEnv(t)
	body := acquireBody("rpm:1/min")
	body["commit"] = true
	var acq api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", body, &acq)
	if acq.LeaseID != "" || acq.Consumed["rpm"] != 1 {
		t.Errorf("acquire with commit: %+v", acq)
	}
	var er api.Error
	h := e.want(http.StatusTooManyRequests, "POST", "/v1/acquire", body, &er)
	if got := h.Get("Retry-After"); got != "60" {
		t.Errorf("Retry-After %q, want 60", got)
	}
	want := api.LimitStatus{Entity: "key-1", Resource: "api", Limit: "rpm", Kind: "rate", Capacity: 1, Available: 0, Requested: 1, Exceeded: true, RetryAfterMS: 60_000,
		Source: "call", WindowMS: 60_000}
	if er.Code != api.CodeRateLimited || er.RetryAfterMS != 60_000 || len(er.Limits) != 1 || er.Limits[0] != want {
		t.Errorf("429 body %+v, want rate_limited, 60000 ms, limits [%+v]", er, want)
	}
	e.clk.Advance(time.Minute)
	e.want(http.StatusOK, "POST", "/v1/acquire", body, nil)
}

func TestBadInput(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, body, field string
	}{
		{"malformed", `{"entity":`, "body"},
		{"empty", ``, "body"},
		{"unknown field", `{"entity":"k","resource":"api","consme":{"rpm":1}}`, "consme"},
		{"wrong type", `{"entity":"k","resource":"api","consume":{"rpm":"1"}}`, "consume"},
		{"trailing data", `{"entity":"k","resource":"api","consume":{"rpm":1}} {}`, "body"},
		{"negative", `{"entity":"k","resource":"api","consume":{"rpm":-1},"limits":["rpm:5/min"]}`, "consume"},
		{"bad limit", `{"entity":"k","resource":"api","consume":{"rpm":1},"limits":["rpm:lots"]}`, "limit"},
		{"bad entity", `{"entity":"k k","resource":"api","consume":{"rpm":1},"limits":["rpm:5/min"]}`, "entity"},
		{"ttl too short", `{"entity":"k","resource":"api","consume":{"rpm":1},"limits":["rpm:5/min"],"lease_ttl_ms":5}`, "lease_ttl_ms"},
		{"bad mode", `{"entity":"k","resource":"api","consume":{"rpm":1},"limits":["rpm:5/min"],"on_unavailable":"maybe"}`, "on_unavailable"},
		{"too large", `{"entity":"` + strings.Repeat("k", api.MaxBodyBytes) + `"}`, "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var er api.Error
			e.want(http.StatusBadRequest, "POST", "/v1/acquire", tt.body, &er)
			if er.Code != api.CodeInvalidArgument || !strings.HasPrefix(er.Field, tt.field) {
				t.Errorf("error %+v, want invalid_argument on field %s...", er, tt.field)
			}
		})
	}
	// Nothing was consumed by any of them.
	var avail api.AvailableResponse
	e.want(http.StatusOK, "GET", "/v1/available?entity=k&resource=api&limits=rpm:5/min", nil, &avail)
	if len(avail.Limits) != 1 || avail.Limits[0].Available != 5 {
		t.Errorf("available after bad requests: %+v", avail.Limits)
	}
}

func TestEntitiesAndLimits(t *testing.T) {
	e := newEnv(t)
	e.hdr.Set("X-Tollgate-Principal", "alice")
	var ent api.Entity
	e.want(http.StatusCreated, "POST", "/v1/entities", api.Entity{ID: "org-1", Name: "Org"}, &ent)
	if ent.ID != "org-1" || ent.CreatedAtMS != epoch.UnixMilli() {
		t.Errorf("created %+v", ent)
	}
	e.want(http.StatusCreated, "POST", "/v1/entities", api.Entity{ID: "key-1", ParentID: "org-1", Cascade: true}, nil)
	e.want(http.StatusConflict, "POST", "/v1/entities", api.Entity{ID: "key-1"}, nil)
	var kids api.EntitiesResponse
	e.want(http.StatusOK, "GET", "/v1/entities/org-1/children", nil, &kids)
	if len(kids.Entities) != 1 || kids.Entities[0].ID != "key-1" || !kids.Entities[0].Cascade {
		t.Errorf("children %+v", kids)
	}
	for _, path := range []string{"/v1/limits/system", "/v1/limits/resources/openai%2Fgpt-4o", "/v1/limits/entities/org-1", "/v1/limits/entities/org-1?resource=api"} {
		e.want(http.StatusNotFound, "GET", path, nil, nil)
		e.want(http.StatusOK, "PUT", path, api.Limits{Limits: []string{"rpm:100/min", "tpm:10000/min:15000"}}, nil)
		var got api.Limits
		e.want(http.StatusOK, "GET", path, nil, &got)
		if strings.Join(got.Limits, ",") != "rpm:100/min,tpm:10000/min:15000" {
			t.Errorf("GET %s = %v", path, got.Limits)
		}
		e.want(http.StatusNoContent, "DELETE", path, nil, nil)
		e.want(http.StatusNotFound, "DELETE", path, nil, nil)
	}
	e.want(http.StatusBadRequest, "PUT", "/v1/limits/system", api.Limits{Limits: []string{"x"}}, nil)
	var audit api.AuditResponse
	e.want(http.StatusOK, "GET", "/v1/audit?entity=org-1", nil, &audit)
	if len(audit.Events) == 0 || audit.Events[0].Principal != "alice" {
		t.Errorf("audit %+v", audit)
	}
	e.want(http.StatusNoContent, "DELETE", "/v1/entities/key-1", nil, nil)
	e.want(http.StatusNotFound, "GET", "/v1/entities/key-1", nil, nil)
}

func TestNamespaces(t *testing.T) {
	e := newEnv(t)
	e.want(http.StatusCreated, "POST", "/v1/entities", api.Entity{ID: "org-1"}, nil)
	e.hdr.Set(api.NamespaceHeader, "tenant-b")
	var er api.Error
	e.want(http.StatusNotFound, "GET", "/v1/entities/org-1", nil, &er)
	if er.Reason != "namespace_not_found" {
		t.Errorf("unregistered namespace: %+v", er)
	}
	e.want(http.StatusCreated, "POST", "/v1/namespaces", api.Namespace{Name: "tenant-b"}, nil)
	e.want(http.StatusNotFound, "GET", "/v1/entities/org-1", nil, &er) // registered, but apart
	if er.Reason != "entity_not_found" {
		t.Errorf("other namespace's entity: %+v", er)
	}
	var list api.NamespacesResponse
	e.want(http.StatusOK, "GET", "/v1/namespaces", nil, &list)
	if len(list.Namespaces) != 2 {
		t.Errorf("namespaces %+v", list)
	}
	e.want(http.StatusNoContent, "DELETE", "/v1/namespaces/tenant-b", nil, nil)
	e.want(http.StatusConflict, "GET", "/v1/entities/org-1", nil, &er)
	e.want(http.StatusNoContent, "POST", "/v1/namespaces/tenant-b/recover", nil, nil)
	e.want(http.StatusNotFound, "GET", "/v1/entities/org-1", nil, nil)
	e.want(http.StatusNoContent, "DELETE", "/v1/namespaces/tenant-b", nil, nil)
	var purged api.PurgeResponse
	e.want(http.StatusOK, "POST", "/v1/namespaces/tenant-b/purge", nil, &purged)
	e.want(http.StatusNotFound, "GET", "/v1/namespaces/tenant-b", nil, nil)
}

func TestAPIKeys(t *testing.T) {
	admin, adminHash := GenerateKey()
	acq, acqHash := GenerateKey()
	root, rootHash := GenerateKey()
	keys, err := LoadKeys(strings.NewReader("# keys\n" +
		adminHash + " default admin ops\n" +
		acqHash + " default acquire svc allow_limits\n" +
		rootHash + " * admin root\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, WithKeys(keys))
	as := func(key string) {
		e.hdr = http.Header{}
		if key != "" {
			e.hdr.Set("Authorization", "Bearer "+key)
		}
	}
	as("")
	if h := e.want(http.StatusUnauthorized, "POST", "/v1/acquire", acquireBody("rpm:5/min"), nil); h.Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
	e.hdr.Set("Authorization", "bearer "+acq) // the scheme is case-insensitive
	e.want(http.StatusOK, "GET", "/v1/available?entity=key-1&resource=api&limits=rpm:5/min", nil, nil)
	as("tg_unknown")
	e.want(http.StatusUnauthorized, "POST", "/v1/acquire", acquireBody("rpm:5/min"), nil)
	as(acq)
	e.want(http.StatusOK, "POST", "/v1/acquire", acquireBody("rpm:5/min"), nil)
	e.want(http.StatusOK, "GET", "/v1/available?entity=key-1&resource=api&limits=rpm:5/min", nil, nil)
	e.want(http.StatusForbidden, "PUT", "/v1/limits/system", api.Limits{Limits: []string{"rpm:5/min"}}, nil)
	e.hdr.Set(api.NamespaceHeader, "other")
	e.want(http.StatusForbidden, "POST", "/v1/acquire", acquireBody("rpm:5/min"), nil)
	as(admin)
	e.want(http.StatusOK, "PUT", "/v1/limits/system", api.Limits{Limits: []string{"rpm:5/min"}}, nil)
	e.want(http.StatusForbidden, "POST", "/v1/namespaces", api.Namespace{Name: "other"}, nil)
	as(root)
	e.want(http.StatusCreated, "POST", "/v1/namespaces", api.Namespace{Name: "other"}, nil)
	e.hdr.Set(api.NamespaceHeader, "other")
	e.want(http.StatusOK, "POST", "/v1/acquire", acquireBody("rpm:5/min"), nil)
	// Health needs no key.
	as("")
	e.want(http.StatusOK, "GET", "/healthz", nil, nil)
}

func TestLoadKeysErrors(t *testing.T) {
	_, h := GenerateKey()
	for _, text := range []string{"", "# only comments\n", h + " default admin\n", "md5:abc default admin x\n",
		h + " default root x\n", h + " bad/ns admin x\n", h + " default admin x\n" + h + " default read y\n"} {
		if _, err := LoadKeys(strings.NewReader(text)); err == nil {
			t.Errorf("LoadKeys(%q) accepted", text)
		}
	}
}

func TestOperations(t *testing.T) {
	e := newEnv(t)
	e.want(http.StatusOK, "GET", "/healthz", nil, nil)
	e.want(http.StatusOK, "GET", "/readyz", nil, nil)
	e.want(http.StatusOK, "POST", "/v1/acquire", acquireBody("rpm:1/min"), nil)
	e.want(http.StatusTooManyRequests, "POST", "/v1/acquire", acquireBody("rpm:1/min"), nil)
	var er api.Error
	e.want(http.StatusNotFound, "GET", "/v2/nothing", nil, &er)
	if er.Reason != "no_route" {
		t.Errorf("unknown route: %+v", er)
	}
	e.want(http.StatusBadRequest, "DELETE", "/v1/namespaces/default", nil, nil)
	resp, err := e.ts.Client().Get(e.ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`tollgate_acquires_total{outcome="granted"} 1`,
		`tollgate_acquires_total{outcome="limited"} 1`,
		`tollgate_http_requests_total{code="429",method="POST",route="/v1/acquire"} 1`,
		`tollgate_config_cache_misses_total`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// Concurrent clients on one limit with the clock frozen get exactly its
// capacity.
func TestConcurrentAcquiresExactBound(t *testing.T) {
	e := newEnv(t)
	body, _ := json.Marshal(map[string]any{"entity": "hot", "resource": "api", "consume": map[string]int64{"rpm": 1},
		"limits": []string{"rpm:50/min"}, "commit": true})
	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 10 {
				resp, err := e.ts.Client().Post(e.ts.URL+"/v1/acquire", "application/json", bytes.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					ok.Add(1)
				case http.StatusTooManyRequests:
					limited.Add(1)
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	if ok.Load() != 50 || limited.Load() != 110 {
		t.Errorf("%d granted, %d limited; want exactly 50 and 110", ok.Load(), limited.Load())
	}
}

// Whatever the body, the server answers with a JSON body and a status
// below 500, and nothing but a 200 consumes anything.
func FuzzAcquireBody(f *testing.F) {
	for _, seed := range []string{
		`{"entity":"k","resource":"api","consume":{"rpm":1},"limits":["rpm:5/min"]}`,
		`{"entity":"k","resource":"api","consume":{"rpm":1},"limits":["rpm:5/min"],"commit":true,"lease_ttl_ms":1000}`,
		`{"entity":"k","resource":"api","consume":{"rpm":99999999999999999999}}`,
		`{"entity":"","consume":{}}`, `[]`, `null`, `{"limits":[1]}`, "\x00", `{"entity":"k","resource":"api","consume":{"rpm":1},"limits":["inflight:2/concurrent","rpm:1/s:3"]}`,
	} {
		f.Add(seed)
	}
	for _, seed := range probeBodies {
		f.Add(seed)
	}
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, body string) {
		e.t = t
		var before, after api.AvailableResponse
		e.want(http.StatusOK, "GET", "/v1/available?entity=k&resource=api&limits=rpm:5/min", nil, &before)
		var raw json.RawMessage
		status, _ := e.do("POST", "/v1/acquire", body, &raw)
		if status >= 500 {
			t.Fatalf("status %d for %q: %s", status, body, raw)
		}
		if status != http.StatusOK {
			var er api.Error
			if err := json.Unmarshal(raw, &er); err != nil || er.Code == "" {
				t.Fatalf("status %d without an error body: %s", status, raw)
			}
			e.want(http.StatusOK, "GET", "/v1/available?entity=k&resource=api&limits=rpm:5/min", nil, &after)
			if before.Limits[0].Available != after.Limits[0].Available {
				t.Fatalf("a %d changed availability: %+v -> %+v", status, before.Limits, after.Limits)
			}
		}
	})
}

func TestUsageEndpoints(t *testing.T) {
	clk := clock.NewFake(epoch)
	mem := memory.New()
	rec := aggregator.NewRecorder(mem, mem, aggregator.WithClock(clk))
	srv := mustServer(New(rec, WithClock(clk), WithLogger(slog.New(slog.DiscardHandler))))
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close(context.Background())
	e := &env{t: t, srv: srv, ts: ts, clk: clk, hdr: http.Header{}}
	body := acquireBody("tpm:1000/min")
	body["consume"] = map[string]int64{"tpm": 250}
	body["commit"] = true
	e.want(http.StatusOK, "POST", "/v1/acquire", body, nil)
	e.want(http.StatusOK, "POST", "/v1/acquire", body, nil)
	if err := rec.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var capacity api.Capacity
	e.want(http.StatusOK, "GET", "/v1/capacity?resource=api", nil, &capacity)
	if capacity.Entities != 1 || len(capacity.Limits) != 1 || capacity.Limits[0].Capacity != 1000 || capacity.Limits[0].Available != 500 {
		t.Errorf("capacity %+v", capacity)
	}
	e.want(http.StatusBadRequest, "GET", "/v1/capacity", nil, nil)
	clk.Advance(time.Minute)
	var u api.UsageResponse
	e.want(http.StatusOK, "GET", "/v1/usage?entity=key-1&resource=api", nil, &u)
	if len(u.Usage) != 1 || u.Usage[0].Consumed["tpm"] != 500 || u.Usage[0].Events != 2 || u.Usage[0].Window != "hour" || u.Usage[0].StartMS != epoch.UnixMilli() {
		t.Errorf("usage %+v", u)
	}
	var sum api.UsageSummary
	e.want(http.StatusOK, "GET", "/v1/usage/summary?resource=api&window=day", nil, &sum)
	if sum.Events != 2 || sum.Limits["tpm"].Total != 500 || sum.Windows != 30 {
		t.Errorf("summary %+v", sum)
	}
	e.want(http.StatusBadRequest, "GET", "/v1/usage?entity=key-1&window=week", nil, nil)
	e.want(http.StatusBadRequest, "GET", "/v1/usage?entity=key-1&from=yesterday", nil, nil)
	e.want(http.StatusBadRequest, "GET", "/v1/usage", nil, nil)

	plain := newEnv(t) // a store that keeps no usage
	plain.srv.store = struct{ store.Store }{memory.New()}
	var er api.Error
	plain.want(http.StatusNotImplemented, "GET", "/v1/usage?entity=k", nil, &er)
	if er.Reason != "usage_unsupported" {
		t.Errorf("no usage: %+v", er)
	}
}

// mustServer returns srv, or panics with err: for tests whose options
// are valid.
func mustServer(srv *Server, err error) *Server {
	if err != nil {
		panic(err)
	}
	return srv
}
