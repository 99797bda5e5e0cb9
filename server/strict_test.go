package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// member is one member of a JSON object, its value raw JSON.
type member struct{ key, value string }

// object writes members as a JSON object, in order, duplicates included.
func object(ms []member) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.WriteString(m.value)
	}
	b.WriteByte('}')
	return b.String()
}

// badBody is a body a route must refuse with 400 naming field.
type badBody struct{ body, field string }

// badVariants returns the invalid variants of a valid body: each member
// null; the first member twice; the first member's name in upper case; a
// member the route does not know; trailing data.
func badVariants(ms []member) []badBody {
	var out []badBody
	for i, m := range ms {
		v := slices.Clone(ms)
		v[i].value = "null"
		out = append(out, badBody{object(v), m.key})
	}
	first := ms[0]
	upper := slices.Clone(ms)
	upper[0].key = strings.ToUpper(first.key)
	return append(out,
		badBody{object(append(slices.Clone(ms), first)), first.key},
		badBody{object(upper), upper[0].key},
		badBody{object(append(slices.Clone(ms), member{"nope", "1"})), "nope"},
		badBody{object(ms) + " {}", "body"},
	)
}

// strictEnv is a server over a counting store with what the JSON routes
// act on: stored limits for resource api, an entity org, and an open lease
// of entity k.
type strictEnv struct {
	*env
	cs    *countingStore
	lease string
}

func newStrictEnv(t *testing.T) *strictEnv {
	cs := &countingStore{Store: memory.New()}
	e := &strictEnv{env: newEnvOver(t, cs), cs: cs}
	e.want(http.StatusOK, "PUT", "/v1/limits/resources/api", `{"limits":["rpm:5/min","tpm:1000/min","slots:2/reserved"]}`, nil)
	e.want(http.StatusCreated, "POST", "/v1/entities", `{"id":"org"}`, nil)
	var a api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", `{"entity":"k","resource":"api","consume":{"rpm":1,"tpm":100}}`, &a)
	e.lease = a.LeaseID
	return e
}

// state is what the JSON routes could change, read through the API: the
// availability of k's limits, its lease, org, the system config, whether
// entity new-1 and namespace team-x exist, and the stored keys (once one
// exists, the server authenticates: the listing then answers 401).
func (e *strictEnv) state() string {
	e.t.Helper()
	var out []string
	for _, path := range []string{
		"/v1/available?entity=k&resource=api", "/v1/leases/" + e.lease, "/v1/entities/org", "/v1/entities/new-1",
		"/v1/limits/system", "/v1/limits/resources/api2", "/v1/limits/entities/org?resource=api", "/v1/reservations/job-1",
		"/v1/namespaces/team-x", "/v1/keys", "/v1/namespaces/default",
	} {
		var raw json.RawMessage
		status, _ := e.do("GET", path, nil, &raw)
		out = append(out, path+" "+http.StatusText(status)+" "+string(raw))
	}
	return strings.Join(out, "\n")
}

// jsonRoutes are the routes that read a JSON body (every decode and
// decodeAcquire of the package), each with a valid body, member by
// member, and invalid bodies inside its members' values.
var jsonRoutes = []struct {
	pattern string // as registered
	path    string // {lease} is the open lease's id
	body    []member
	status  int // of the valid body
	nested  []badBody
}{
	{
		pattern: "POST /v1/acquire", path: "/v1/acquire", status: http.StatusOK,
		body: []member{{"entity", `"k"`}, {"resource", `"api"`}, {"consume", `{"rpm":1,"tpm":10}`},
			{"limits", `["rpm:5/min","tpm:1000/min"]`}, {"commit", "false"}, {"lease_ttl_ms", "60000"}, {"on_unavailable", `"block"`}},
		nested: []badBody{
			{`{"entity":"k","resource":"api","consume":{"q":null}}`, "consume.q"}, // a probe's
			{`{"entity":"k","resource":"api","consume":{"rpm":1,"rpm":1}}`, "consume.rpm"},
			{`{"entity":"k","resource":"api","consume":{"rpm":1},"limits":["rpm:5/min",null]}`, "limits[1]"},
			{`{"entity":"k","resource":"api","consume":{"rpm":1},"Limits":["rpm:5/min"]}`, "Limits"},
			{`{"entity":"k","resource":"api","consume":{"rpm":1.0}}`, "consume.rpm"},
			{`{"entity":"k","resource":"api","consume":{"rpm":4611686018427388}}`, "consume.rpm"},
			{`{"entity":"k","resource":"api","consume":{"rpm":-1}}`, "consume.rpm"},
		},
	},
	{
		pattern: "POST /v1/leases/{id}/adjust", path: "/v1/leases/{lease}/adjust", status: http.StatusOK,
		body: []member{{"consume", `{"tpm":5}`}},
		nested: []badBody{
			{`{"consume":{"tpm":null}}`, "consume.tpm"},
			{`{"consume":{"tpm":1,"tpm":1}}`, "consume.tpm"},
			{`{"consume":{"tpm":4611686018427387}}`, "consume.tpm"}, // net above MaxTokens
			{`{"consume":{"tpm":-101}}`, "consume.tpm"},             // net below zero
		},
	},
	{
		pattern: "POST /v1/leases/{id}/extend", path: "/v1/leases/{lease}/extend", status: http.StatusOK,
		body: []member{{"ttl_ms", "60000"}},
	},
	{
		pattern: "POST /v1/leases/{id}/penalize", path: "/v1/leases/{lease}/penalize", status: http.StatusNoContent,
		body:   []member{{"retry_after_ms", "1000"}, {"reason", `"a vendor's 429"`}, {"limits", `["rpm"]`}},
		nested: []badBody{{`{"retry_after_ms":1000,"limits":[null]}`, "limits[0]"}},
	},
	{
		pattern: "POST /v1/reservations", path: "/v1/reservations", status: http.StatusCreated,
		body: []member{{"entity", `"k"`}, {"resource", `"api"`}, {"id", `"job-1"`}, {"consume", `{"slots":1}`},
			{"limits", `["slots:2/reserved"]`}, {"ttl_ms", "60000"}, {"on_unavailable", `"block"`}},
		nested: []badBody{
			{`{"entity":"k","resource":"api","id":"job-1","consume":{"slots":null}}`, "consume.slots"},
			{`{"entity":"k","resource":"api","id":"job-1","consume":{"slots":1,"slots":1}}`, "consume.slots"},
		},
	},
	{
		pattern: "POST /v1/penalize", path: "/v1/penalize", status: http.StatusNoContent,
		body: []member{{"entity", `"k"`}, {"resource", `"api"`}, {"until_ms", "1767225660000"}, {"reason", `"429"`},
			{"limits", `["tpm"]`}},
		nested: []badBody{
			{`{"entity":"k","resource":"api","Penalty":{"retry_after_ms":1000,"limits":["tpm"]}}`, "Penalty"},
			{`{"entity":"k","resource":"api","retry_after_ms":"1000","limits":["tpm"]}`, "retry_after_ms"},
		},
	},
	{
		pattern: "POST /v1/entities", path: "/v1/entities", status: http.StatusCreated,
		body: []member{{"id", `"new-1"`}, {"name", `"New"`}, {"parent_id", `"org"`}, {"cascade", "true"},
			{"metadata", `{"team":"a"}`}},
		nested: []badBody{
			{`{"id":"new-1","metadata":{"team":null}}`, "metadata.team"},
			{`{"id":"new-1","metadata":{"team":"a","team":"b"}}`, "metadata.team"},
			{`{"id":"new-1","parentID":"org"}`, "parentID"},
		},
	},
	{
		pattern: "PATCH /v1/entities/{id}", path: "/v1/entities/org", status: http.StatusOK,
		body: []member{{"name", `"Org"`}, {"parent_id", `""`}, {"cascade", "false"}, {"metadata", `{"team":"b"}`}},
		nested: []badBody{
			{`{"metadata":{"team":null}}`, "metadata.team"},
			{`{"metadata":{"team":"a","team":"b"}}`, "metadata.team"},
			{`{"Name":"x"}`, "Name"},
		},
	},
	{
		pattern: "PUT /v1/limits/system", path: "/v1/limits/system", status: http.StatusOK,
		body:   []member{{"limits", `["rpm:100/min"]`}, {"on_unavailable", `"block"`}},
		nested: []badBody{{`{"limits":["rpm:100/min",null]}`, "limits[1]"}},
	},
	{
		pattern: "PUT /v1/limits/resources/{resource...}", path: "/v1/limits/resources/api2", status: http.StatusOK,
		body: []member{{"limits", `["rpm:100/min"]`}},
	},
	{
		pattern: "PUT /v1/limits/entities/{id}", path: "/v1/limits/entities/org?resource=api", status: http.StatusOK,
		body: []member{{"limits", `["rpm:100/min"]`}},
	},
	{
		pattern: "POST /v1/namespaces", path: "/v1/namespaces", status: http.StatusCreated,
		body: []member{{"name", `"team-x"`}},
	},
	{
		pattern: "PUT /v1/namespaces/{name}/audit-retention", path: "/v1/namespaces/default/audit-retention", status: http.StatusNoContent,
		body:   []member{{"audit_retention_s", "7776000"}},
		nested: []badBody{{`{"audit_retention_s":1.5}`, "audit_retention_s"}},
	},
	{
		pattern: "POST /v1/reset", path: "/v1/reset", status: http.StatusNoContent,
		body:   []member{{"entity", `"k"`}, {"resource", `"api"`}, {"limits", `["rpm","tpm"]`}, {"reason", `"undo"`}},
		nested: []badBody{{`{"entity":"k","resource":"api","limits":["rpm",null]}`, "limits[1]"}},
	},
	{
		pattern: "POST /v1/keys", path: "/v1/keys", status: http.StatusCreated,
		body: []member{{"name", `"kx"`}, {"role", `"read"`}, {"entity", `"org"`}, {"allow_limits", "true"},
			{"expires_in_s", "3600"}},
		nested: []badBody{{`{"name":"kx","role":"read","expires_in_s":1.5}`, "expires_in_s"}},
	},
}

// Every JSON route refuses null, duplicate keys, names in the wrong case,
// unknown members and trailing data, naming the member, and writes
// nothing: the store sees no write, and nothing the route could change
// has changed. The valid body passes.
func TestStrictBodies(t *testing.T) {
	for _, r := range jsonRoutes {
		t.Run(r.pattern, func(t *testing.T) {
			e := newStrictEnv(t)
			path := strings.ReplaceAll(r.path, "{lease}", e.lease)
			method, _, _ := strings.Cut(r.pattern, " ")
			before, writes := e.state(), e.cs.writes.Load()
			for _, bad := range append(badVariants(r.body), r.nested...) {
				var er api.Error
				status, _ := e.do(method, path, bad.body, &er)
				if status != http.StatusBadRequest || er.Code != api.CodeInvalidArgument || er.Field != bad.field {
					t.Errorf("%s: %d %+v, want 400 invalid_argument on field %q", bad.body, status, er, bad.field)
				}
				if bad.field == strings.ToUpper(r.body[0].key) && !strings.HasPrefix(er.Reason, "unknown field") {
					t.Errorf("%s: reason %q, want unknown field", bad.body, er.Reason)
				}
			}
			if n := e.cs.writes.Load() - writes; n != 0 {
				t.Errorf("refused bodies wrote to the store %d times", n)
			}
			if after := e.state(); after != before {
				t.Errorf("refused bodies changed the state:\n%s\nto\n%s", before, after)
			}
			e.want(r.status, method, path, object(r.body), nil)
			if e.state() == before { // else the comparison above proves nothing
				t.Errorf("the valid body changed nothing that state reads")
			}
		})
	}
}

// jsonRoutes lists every route that reads a body: a route a client may
// send a body to is in it, or reads none.
func TestStrictBodiesCoverEveryRoute(t *testing.T) {
	bodiless := map[string]bool{
		"POST /v1/leases/{id}/commit": true, "POST /v1/leases/{id}/rollback": true,
		"POST /v1/namespaces/{name}/recover": true, "POST /v1/namespaces/{name}/purge": true,
	}
	listed := map[string]bool{}
	for _, r := range jsonRoutes {
		listed[r.pattern] = true
	}
	srv := mustServer(New(memory.New()))
	for _, r := range srv.registered {
		method, _, _ := strings.Cut(r.pattern, " ")
		if (method == "POST" || method == "PUT" || method == "PATCH") && !listed[r.pattern] && !bodiless[r.pattern] {
			t.Errorf("%s: not in jsonRoutes, nor known to read no body", r.pattern)
		}
	}
}

// The fast acquire parser declines each probe's body, which the strict
// decoder then refuses, naming the member: null, a duplicate key, a name
// in the wrong case.
func TestAcquireProbes(t *testing.T) {
	for _, c := range []struct{ body, field string }{
		{`{"entity":"k","resource":"api","consume":{"q":null}}`, "consume.q"},
		{`{"entity":"k","entity":"j","resource":"api","consume":{"rpm":1}}`, "entity"},
		{`{"entity":"k","resource":"api","consume":{"rpm":1,"rpm":2}}`, "consume.rpm"},
		{`{"ENTITY":"k","resource":"api","consume":{"rpm":1}}`, "ENTITY"},
	} {
		var req api.AcquireRequest
		if parseAcquireRequest([]byte(c.body), &req) {
			t.Errorf("parseAcquireRequest(%s) accepts it", c.body)
		}
		r := httptest.NewRequest("POST", "/v1/acquire", strings.NewReader(c.body))
		err := decodeAcquire(httptest.NewRecorder(), r, &req)
		if got := fieldOf(err); got != c.field {
			t.Errorf("decodeAcquire(%s) = %v, want a 400 on %q", c.body, err, c.field)
		}
	}
}

// A member name the error repeats is cut short.
func TestStrictLongName(t *testing.T) {
	e := newEnv(t)
	var er api.Error
	e.want(http.StatusBadRequest, "POST", "/v1/entities", `{"id":"k","`+strings.Repeat("x", 10000)+`":1}`, &er)
	if want := strings.Repeat("x", maxFieldName) + "..."; er.Field != want || len(er.Message) > 1000 {
		t.Errorf("field %q, message of %d bytes", er.Field, len(er.Message))
	}
}

// fieldOf returns the field of a 400's error body, or the status.
func fieldOf(err error) string {
	status, body := api.ErrorBody(err)
	if status != http.StatusBadRequest {
		return http.StatusText(status)
	}
	return body.Field
}
