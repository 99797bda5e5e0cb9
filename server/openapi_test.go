package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tollgate-rl/tollgate/aggregator"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/server/ui"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// The API's description (api.OpenAPI, served at GET /v1/openapi.json) is
// held to the server here: every route the server registers is documented
// with the roles it takes, every documented operation is served, every
// example in the description is valid against its schema, and a real
// server's answers are valid against the response schemas.

// specURL is where the description is loaded from, for its $refs.
const specURL = "https://tollgate.invalid/openapi.json"

// httpMethods are the operation keys of an OpenAPI path item.
var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// spec is the parsed description and a compiler of the schemas in it.
type spec struct {
	doc     map[string]any
	c       *jsonschema.Compiler
	schemas map[string]*jsonschema.Schema // by JSON pointer
}

func loadSpec(t testing.TB) *spec {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(api.OpenAPI))
	if err != nil {
		t.Fatalf("api/openapi.json: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(specURL, doc); err != nil {
		t.Fatalf("api/openapi.json: %v", err)
	}
	m, ok := doc.(map[string]any)
	if !ok || m["openapi"] != "3.1.0" {
		t.Fatalf("api/openapi.json is not an OpenAPI 3.1.0 document")
	}
	return &spec{doc: m, c: c, schemas: map[string]*jsonschema.Schema{}}
}

// at returns the value at JSON pointer ptr ("" is the document).
func (s *spec) at(t testing.TB, ptr string) any {
	t.Helper()
	var v any = s.doc
	if ptr == "" {
		return v
	}
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("pointer %s: not an object on the way", ptr)
		}
		if v, ok = m[unescapeToken(tok)]; !ok {
			t.Fatalf("pointer %s: no %q", ptr, unescapeToken(tok))
		}
	}
	return v
}

// resolve follows the $ref of a non-schema object (a response, parameter
// or example), returning the object and its pointer.
func (s *spec) resolve(t testing.TB, v any, ptr string) (map[string]any, string) {
	t.Helper()
	for range 8 {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: not an object", ptr)
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m, ptr
		}
		target, ok := strings.CutPrefix(ref, "#")
		if !ok {
			t.Fatalf("%s: $ref %q leaves the document", ptr, ref)
		}
		v, ptr = s.at(t, target), target
	}
	t.Fatalf("%s: $ref chain too long", ptr)
	return nil, ""
}

// schema compiles the schema at ptr.
func (s *spec) schema(t testing.TB, ptr string) *jsonschema.Schema {
	t.Helper()
	if sch, ok := s.schemas[ptr]; ok {
		return sch
	}
	sch, err := s.c.Compile(specURL + "#" + ptr)
	if err != nil {
		t.Fatalf("schema %s: %v", ptr, err)
	}
	s.schemas[ptr] = sch
	return sch
}

func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func unescapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// operation is one documented method and path.
type operation struct {
	key string // "POST /v1/acquire"
	ptr string // its JSON pointer
	op  map[string]any
}

// operations lists the documented operations, sorted by key.
func (s *spec) operations() []operation {
	var out []operation
	paths, _ := s.doc["paths"].(map[string]any)
	for path, item := range paths {
		item, _ := item.(map[string]any)
		for _, m := range httpMethods {
			if op, ok := item[m].(map[string]any); ok {
				out = append(out, operation{key: strings.ToUpper(m) + " " + path,
					ptr: "/paths/" + escapeToken(path) + "/" + m, op: op})
			}
		}
	}
	slices.SortFunc(out, func(a, b operation) int { return strings.Compare(a.key, b.key) })
	return out
}

// servedRoutes is what New registers, by documented key: the pattern with
// wildcards as OpenAPI writes them ("{id...}" is "{id}"). The catch-all "/"
// is left out: it answers 404 no_route, which the description's Error
// schema covers, and OpenAPI has no path for it. So is the dashboard
// (/ui/..., and the root's redirect to it): its HTML, scripts and sign-in
// check are what its own page reads, not part of API v1, and change with
// the page; they are tested in dashboard_test.go and server/ui.
func servedRoutes(t *testing.T) map[string]route {
	t.Helper()
	srv := mustServer(New(memory.New(), WithLogger(slog.New(slog.DiscardHandler))))
	out := map[string]route{}
	for _, r := range srv.registered {
		if r.pattern == "/" || r.pattern == rootPattern || strings.HasPrefix(r.pattern, "GET "+ui.Prefix) {
			continue
		}
		method, path, ok := strings.Cut(r.pattern, " ")
		if !ok {
			t.Fatalf("pattern %q has no method: document it per method", r.pattern)
		}
		key := method + " " + strings.ReplaceAll(path, "...}", "}")
		if _, dup := out[key]; dup {
			t.Fatalf("pattern %q registered twice", r.pattern)
		}
		out[key] = r
	}
	return out
}

func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	s := loadSpec(t)
	served := servedRoutes(t)
	documented := map[string]bool{}
	for _, o := range s.operations() {
		documented[o.key] = true
		if _, ok := served[o.key]; !ok {
			t.Errorf("%s is documented but not served", o.key)
		}
	}
	for key := range served {
		if !documented[key] {
			t.Errorf("%s is served but not documented in api/openapi.json", key)
		}
	}
}

func TestOpenAPIOperations(t *testing.T) {
	s := loadSpec(t)
	served := servedRoutes(t)
	ids := map[string]string{}
	for _, o := range s.operations() {
		t.Run(o.key, func(t *testing.T) {
			id, _ := o.op["operationId"].(string)
			if id == "" {
				t.Error("no operationId")
			} else if other, dup := ids[id]; dup {
				t.Errorf("operationId %s also names %s", id, other)
			}
			ids[id] = o.key
			if o.op["summary"] == nil || o.op["description"] == nil {
				t.Error("no summary or description")
			}
			params := s.parameters(t, o)
			checkPathParams(t, o.key, params)
			if r, ok := served[o.key]; ok {
				checkAccess(t, o.op, r.access)
				checkQueryParams(t, s.queryParams(t, o), r.query)
				if r.access.roles != nil && !r.access.registry && !params["header X-Tollgate-Namespace"] {
					t.Error("works in a namespace but does not take X-Tollgate-Namespace")
				}
			}
			checkResponses(t, s, o)
		})
	}
}

// parameters returns the operation's parameters as "in name".
func (s *spec) parameters(t testing.TB, o operation) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	list, _ := o.op["parameters"].([]any)
	for i, p := range list {
		pm, _ := s.resolve(t, p, fmt.Sprintf("%s/parameters/%d", o.ptr, i))
		out[fmt.Sprint(pm["in"], " ", pm["name"])] = true
	}
	return out
}

// queryParams returns the operation's query parameters, each with
// whether its schema is an array (a parameter repeated once per value).
func (s *spec) queryParams(t testing.TB, o operation) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	list, _ := o.op["parameters"].([]any)
	for i, p := range list {
		pm, _ := s.resolve(t, p, fmt.Sprintf("%s/parameters/%d", o.ptr, i))
		if pm["in"] == "query" {
			sch, _ := pm["schema"].(map[string]any)
			out[fmt.Sprint(pm["name"])] = sch["type"] == "array"
		}
	}
	return out
}

// checkQueryParams checks that the documented query parameters are those
// the route reads (any other is a 400), arrays exactly its lists.
func checkQueryParams(t *testing.T, documented map[string]bool, read []param) {
	t.Helper()
	for _, p := range read {
		array, ok := documented[p.name]
		switch {
		case !ok:
			t.Errorf("query parameter %s is read but not documented", p.name)
		case array != p.list:
			t.Errorf("query parameter %s: documented as an array %v, read as a list %v", p.name, array, p.list)
		}
	}
	for name := range documented {
		if !slices.ContainsFunc(read, func(p param) bool { return p.name == name }) {
			t.Errorf("query parameter %s is documented but the route refuses it", name)
		}
	}
}

// checkPathParams checks that the path's wildcards and the operation's
// path parameters are the same.
func checkPathParams(t *testing.T, key string, params map[string]bool) {
	t.Helper()
	want := map[string]bool{}
	for rest := key; ; {
		_, after, ok := strings.Cut(rest, "{")
		if !ok {
			break
		}
		name, tail, _ := strings.Cut(after, "}")
		want["path "+name] = true
		rest = tail
	}
	for p := range params {
		if strings.HasPrefix(p, "path ") && !want[p] {
			t.Errorf("parameter %s is not in the path", p)
		}
	}
	for p := range want {
		if !params[p] {
			t.Errorf("the path's %s has no parameter", p)
		}
	}
}

// checkAccess checks that the operation's security, x-tollgate-roles,
// x-tollgate-registry and x-tollgate-scoped say what the route's access
// is.
func checkAccess(t *testing.T, op map[string]any, a access) {
	t.Helper()
	sec, hasSec := op["security"].([]any)
	roles, _ := op["x-tollgate-roles"].([]any)
	registry, _ := op["x-tollgate-registry"].(bool)
	scoped, _ := op["x-tollgate-scoped"].(bool)
	if a.roles == nil {
		if !hasSec || len(sec) != 0 || roles != nil {
			t.Errorf("public route: want security [] and no x-tollgate-roles, got %v and %v", op["security"], roles)
		}
		return
	}
	if hasSec {
		t.Errorf("route needs a key: want the document's security, got %v", sec)
	}
	var got []string
	for _, r := range roles {
		got = append(got, fmt.Sprint(r))
	}
	var want []string
	for _, r := range a.roles {
		want = append(want, string(r))
	}
	if !slices.Equal(got, want) {
		t.Errorf("x-tollgate-roles %v, want %v", got, want)
	}
	if registry != a.registry {
		t.Errorf("x-tollgate-registry %v, want %v", registry, a.registry)
	}
	if scoped != a.scoped {
		t.Errorf("x-tollgate-scoped %v, want %v", scoped, a.scoped)
	}
}

// checkResponses checks that an operation documents a success, that every
// JSON body it takes or gives (but the document's own) has an example, and
// that every route that needs a key documents 401 and 403.
func checkResponses(t *testing.T, s *spec, o operation) {
	t.Helper()
	rs, _ := o.op["responses"].(map[string]any)
	success := false
	for status, r := range rs {
		rm, ptr := s.resolve(t, r, o.ptr+"/responses/"+status)
		if status[0] != '2' {
			continue
		}
		success = true
		if mt, ok := mediaType(rm); ok && o.op["operationId"] != "openapi" && !hasExamples(mt) {
			t.Errorf("response %s (%s) has no example", status, ptr)
		}
	}
	if !success {
		t.Error("no 2xx response")
	}
	if rb, ok := o.op["requestBody"]; ok {
		rbm, _ := s.resolve(t, rb, o.ptr+"/requestBody")
		if mt, ok := mediaType(rbm); !ok || !hasExamples(mt) {
			t.Error("request body without an application/json example")
		}
	}
	if _, public := o.op["security"]; !public && (rs["401"] == nil || rs["403"] == nil) {
		t.Error("needs a key but documents no 401 or 403")
	}
}

// mediaType returns the application/json media type of a request body or
// response.
func mediaType(obj map[string]any) (map[string]any, bool) {
	content, _ := obj["content"].(map[string]any)
	mt, ok := content["application/json"].(map[string]any)
	return mt, ok
}

func hasExamples(mt map[string]any) bool {
	exs, _ := mt["examples"].(map[string]any)
	return mt["example"] != nil || len(exs) > 0
}

func TestOpenAPIExamplesMatchSchemas(t *testing.T) {
	s := loadSpec(t)
	used := map[string]bool{}
	n := s.checkExamples(t, s.doc, "", used)
	if n < 50 {
		t.Errorf("only %d examples checked; the walk missed some", n)
	}
	comps, _ := s.doc["components"].(map[string]any)
	exs, _ := comps["examples"].(map[string]any)
	for name := range exs {
		if !used["/components/examples/"+name] {
			t.Errorf("components/examples/%s is never used, so never checked", name)
		}
	}
}

// checkExamples validates every example under v (at ptr) against its
// schema: the examples of a schema (an array) against that schema, and
// the example or examples of a media type, parameter or header against
// its "schema". It records the example objects referenced in used and
// returns how many examples it checked.
func (s *spec) checkExamples(t *testing.T, v any, ptr string, used map[string]bool) int {
	t.Helper()
	n := 0
	switch v := v.(type) {
	case map[string]any:
		n += s.checkOwnExamples(t, v, ptr, used)
		for k, child := range v {
			n += s.checkExamples(t, child, ptr+"/"+escapeToken(k), used)
		}
	case []any:
		for i, child := range v {
			n += s.checkExamples(t, child, fmt.Sprintf("%s/%d", ptr, i), used)
		}
	}
	return n
}

func (s *spec) checkOwnExamples(t *testing.T, obj map[string]any, ptr string, used map[string]bool) int {
	t.Helper()
	if ptr == "/components" {
		return 0 // components/examples: checked where they are used
	}
	type example struct {
		where string
		value any
	}
	var exs []example
	schemaPtr := ptr + "/schema"
	switch list := obj["examples"].(type) {
	case []any: // a schema's own examples
		schemaPtr = ptr
		for i, x := range list {
			exs = append(exs, example{fmt.Sprintf("%s/examples/%d", ptr, i), x})
		}
	case map[string]any: // Example Objects of a media type, parameter or header
		for name, x := range list {
			xm, xptr := s.resolve(t, x, ptr+"/examples/"+escapeToken(name))
			used[xptr] = true
			exs = append(exs, example{xptr, xm["value"]})
		}
	}
	if x, ok := obj["example"]; ok && obj["schema"] != nil {
		exs = append(exs, example{ptr + "/example", x})
	}
	if len(exs) == 0 {
		return 0
	}
	if _, isSchema := obj["examples"].([]any); !isSchema && obj["schema"] == nil {
		t.Errorf("%s: examples without a schema", ptr)
		return 0
	}
	sch := s.schema(t, schemaPtr)
	for _, x := range exs {
		if err := sch.Validate(x.value); err != nil {
			t.Errorf("example %s does not match schema %s: %v", x.where, schemaPtr, err)
		}
	}
	return len(exs)
}

// TestOpenAPIServed checks that GET /v1/openapi.json answers the document
// as it is, without a key where every other /v1 route needs one.
func TestOpenAPIServed(t *testing.T) {
	_, hash := GenerateKey()
	keys, err := LoadKeys(strings.NewReader(hash + " * admin ops\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, WithKeys(keys))
	body, hdr := e.call(liveStep{method: "GET", path: api.OpenAPIPath, status: http.StatusOK})
	if body != nil && string(body) != api.OpenAPI {
		t.Errorf("GET %s: not api.OpenAPI as it is", api.OpenAPIPath)
	}
	if ct := hdr.Get("Content-Type"); body != nil && ct != "application/json" {
		t.Errorf("GET %s: Content-Type %q", api.OpenAPIPath, ct)
	}
	e.call(liveStep{method: "GET", path: "/v1/namespaces", status: http.StatusUnauthorized}) // the others need the key
}

// liveStep is one request of TestOpenAPILiveAnswers.
type liveStep struct {
	method, path string
	body         string
	status       int
	// capture stores these top-level string fields of the answer, for
	// later paths and bodies ("{lease_id}").
	capture []string
	// before, if set, runs first.
	before func() error
	// contains, if set, must be in the answer's body (so that the schema
	// checks more than an empty list).
	contains string
}

func TestOpenAPILiveAnswers(t *testing.T) {
	s := loadSpec(t)
	e, rec := newUsageEnv(t)
	flush := func() error { return rec.Flush(context.Background()) }
	inAMinute := strconv.FormatInt(epoch.Add(time.Minute).UnixMilli(), 10)
	inAnHour := strconv.FormatInt(epoch.Add(time.Hour).UnixMilli(), 10)
	steps := []liveStep{
		// Limits of a resource whose id holds '/': escaped in the path.
		{method: "PUT", path: "/v1/limits/resources/openai%2Fgpt-4o", body: `{"limits":["rpm:3","tpm:10000/min:15000"]}`, status: 200},
		{method: "GET", path: "/v1/limits/resources/openai%2Fgpt-4o", status: 200},
		{method: "GET", path: "/v1/limits/resources/openai/gpt-4o", status: 200, contains: `"rpm:3/min"`}, // a raw '/' too
		{method: "GET", path: "/v1/limits?limit=1", status: 200, contains: `"next":`},
		{method: "GET", path: "/v1/limits?after=x", status: 400},
		{method: "PATCH", path: "/v1/limits/resources/api", status: 405},
		{method: "POST", path: "/v1/entities", body: `{"id":"org-1","name":"Acme"}`, status: 201},
		{method: "POST", path: "/v1/entities", body: `{"id":"key-1","parent_id":"org-1","cascade":true,"metadata":{"team":"checkout"}}`, status: 201},
		{method: "POST", path: "/v1/entities", body: `{"id":"key-1"}`, status: 409},
		{method: "GET", path: "/v1/entities/org-1", status: 200},
		{method: "GET", path: "/v1/entities/ghost", status: 404},
		{method: "GET", path: "/v1/entities/org-1/children", status: 200},
		{method: "GET", path: "/v1/entities", status: 200, contains: `"id":"key-1"`},
		{method: "GET", path: "/v1/entities?limit=1", status: 200, contains: `"next":"key-1"`},
		{method: "GET", path: "/v1/entities?after=key-1&limit=1", status: 200, contains: `"id":"org-1"`},
		{method: "GET", path: "/v1/entities?limit=0", status: 400},
		{method: "POST", path: "/v1/entities", body: `{"id":"org-2"}`, status: 201},
		{method: "PATCH", path: "/v1/entities/key-1", body: `{"parent_id":"org-2","name":"moved"}`, status: 200, contains: `"cascade":true`},
		{method: "PATCH", path: "/v1/entities/org-2", body: `{"parent_id":"key-1"}`, status: 400, contains: `"field":"parent_id"`},
		{method: "PATCH", path: "/v1/entities/key-1", body: `{"parent_id":"ghost"}`, status: 404},
		{method: "PATCH", path: "/v1/entities/ghost", body: `{"name":"x"}`, status: 404},
		{method: "PATCH", path: "/v1/entities/key-1", body: `{"parent":"org-1"}`, status: 400},
		{method: "PATCH", path: "/v1/entities/key-1", body: `{"parent_id":"org-1","metadata":{}}`, status: 200},
		{method: "PUT", path: "/v1/limits/entities/org-1", body: `{"limits":["rpm:100","tpm:200000/hour"]}`, status: 200},
		{method: "PUT", path: "/v1/limits/system", body: `{"limits":[],"on_unavailable":"block"}`, status: 200},
		{method: "GET", path: "/v1/limits/system", status: 200},
		{method: "GET", path: "/v1/limits/entities/key-1?resource=openai/gpt-4o", status: 404},
		// A lease's life.
		{method: "POST", path: "/v1/acquire", body: `{"entity":"key-1","resource":"openai/gpt-4o","consume":{"rpm":1,"tpm":500}}`, status: 200, capture: []string{"lease_id"}},
		{method: "GET", path: "/v1/leases/{lease_id}", status: 200},
		{method: "GET", path: "/v1/leases?entity=key-1&resource=openai/gpt-4o", status: 200, contains: `"leases":[{"lease_id":`},
		{method: "GET", path: "/v1/leases?limit=1", status: 200},
		{method: "GET", path: "/v1/leases?resource=openai/gpt-4o", status: 400, contains: `"field":"resource"`},
		{method: "POST", path: "/v1/leases/{lease_id}/adjust", body: `{"consume":{"tpm":700}}`, status: 200},
		{method: "POST", path: "/v1/leases/{lease_id}/extend", body: `{"ttl_ms":600000}`, status: 200},
		{method: "POST", path: "/v1/leases/{lease_id}/penalize", body: `{"retry_after_ms":1000,"limits":["tpm"],"reason":"vendor 429"}`, status: 204},
		{method: "POST", path: "/v1/leases/{lease_id}/commit", status: 200},
		{method: "POST", path: "/v1/leases/{lease_id}/commit", status: 200, contains: `"state":"committed"`},
		{method: "POST", path: "/v1/leases/{lease_id}/rollback", status: 409, contains: `"ended":"committed"`},
		{method: "POST", path: "/v1/leases/" + strings.Repeat("0", 32) + "/commit", status: 404},
		{method: "POST", path: "/v1/acquire", body: `{"entity":"key-1","resource":"openai/gpt-4o","consume":{"rpm":1},"commit":true}`, status: 200},
		{method: "POST", path: "/v1/acquire", body: `{"entity":"key-1","resource":"openai/gpt-4o","consume":{"rpm":1}}`, status: 200, capture: []string{"lease_id"}},
		{method: "POST", path: "/v1/leases/{lease_id}/rollback", status: 200},
		{method: "POST", path: "/v1/acquire", body: `{"entity":"key-1","resource":"openai/gpt-4o","consume":{"rpm":1},"commit":true}`, status: 200},
		{method: "POST", path: "/v1/acquire", body: `{"entity":"key-1","resource":"openai/gpt-4o","consume":{"rpm":1}}`, status: 429},
		{method: "POST", path: "/v1/acquire", body: `{"entity":"key-1","resource":"openai/gpt-4o","consume":{"rpm":1000}}`, status: 400},
		{method: "POST", path: "/v1/acquire", body: `{"entiti":"key-1"}`, status: 400},
		{method: "GET", path: "/v1/available?entity=key-1&resource=openai/gpt-4o", status: 200},
		{method: "GET", path: "/v1/available?entity=key-1&resource=openai/gpt-4o&consume=rpm:1", status: 200, contains: `"retry_after_ms":`},
		{method: "GET", path: "/v1/available?entity=key-1&resource=openai/gpt-4o&consume=rpm", status: 400},
		{method: "POST", path: "/v1/penalize", body: `{"entity":"key-1","resource":"openai/gpt-4o","until_ms":` + inAMinute + `,"limits":["rpm"]}`, status: 204},
		// Reservations.
		{method: "PUT", path: "/v1/limits/resources/emr", body: `{"limits":["clusters:1/reserved","launches:10"]}`, status: 200},
		{method: "POST", path: "/v1/reservations", body: `{"entity":"team-a","resource":"emr","id":"j-2AXXXXXXGAPLF","consume":{"clusters":1,"launches":1},"ttl_ms":3600000}`, status: 201},
		{method: "POST", path: "/v1/reservations", body: `{"entity":"team-a","resource":"emr","id":"j-2AXXXXXXGAPLF"}`, status: 200},
		{method: "POST", path: "/v1/reservations", body: `{"entity":"team-b","resource":"emr","id":"j-2AXXXXXXGAPLF"}`, status: 409},
		{method: "POST", path: "/v1/reservations", body: `{"entity":"team-a","resource":"emr","id":"arn/j-2"}`, status: 429},
		{method: "GET", path: "/v1/reservations/j-2AXXXXXXGAPLF", status: 200},
		{method: "GET", path: "/v1/reservations?entity=team-a&limit=1", status: 200},
		{method: "DELETE", path: "/v1/reservations/j-2AXXXXXXGAPLF", status: 204},
		{method: "DELETE", path: "/v1/reservations/j-2AXXXXXXGAPLF", status: 404},
		// Reading.
		{method: "GET", path: "/v1/audit?entity=org-1&limit=1", status: 200},
		{method: "GET", path: "/v1/usage?entity=key-1&to=" + inAnHour, status: 200, before: flush, contains: `"events":`},
		{method: "GET", path: "/v1/usage/summary?resource=openai/gpt-4o&to=" + inAnHour, status: 200, contains: `"rpm":{"total":`},
		{method: "GET", path: "/v1/capacity?resource=openai/gpt-4o", status: 200, contains: `"utilisation":`},
		{method: "DELETE", path: "/v1/limits/entities/org-1", status: 204},
		{method: "DELETE", path: "/v1/entities/key-1", status: 204},
		// Namespaces.
		{method: "POST", path: "/v1/namespaces", body: `{"name":"team-a"}`, status: 201},
		{method: "POST", path: "/v1/namespaces", body: `{"name":"team-a"}`, status: 409},
		{method: "GET", path: "/v1/namespaces", status: 200},
		{method: "DELETE", path: "/v1/namespaces/team-a", status: 204},
		{method: "GET", path: "/v1/namespaces/team-a", status: 200},
		{method: "POST", path: "/v1/namespaces/team-a/recover", status: 204},
		{method: "DELETE", path: "/v1/namespaces/default", status: 400},
		{method: "DELETE", path: "/v1/namespaces/team-a", status: 204},
		{method: "POST", path: "/v1/namespaces/team-a/purge", status: 200},
		{method: "GET", path: "/v1/namespaces/team-a", status: 404},
		// Outside /v1.
		{method: "GET", path: "/healthz", status: 200},
		{method: "GET", path: "/readyz", status: 200},
		{method: "GET", path: "/v1/openapi.json", status: 200},
		{method: "GET", path: "/metrics", status: 200},
	}
	m, keyOf := s.mux(t)
	vars := map[string]string{}
	for _, st := range steps {
		st.path, st.body = expand(st.path, vars), expand(st.body, vars)
		t.Run(st.method+" "+st.path, func(t *testing.T) {
			if st.before != nil {
				if err := st.before(); err != nil {
					t.Fatal(err)
				}
			}
			body, hdr := e.call(st)
			if body == nil {
				return
			}
			if !strings.Contains(string(body), st.contains) {
				t.Errorf("body %s, want it to contain %s", body, st.contains)
			}
			req, _ := http.NewRequest(st.method, st.path, nil)
			if _, pattern := m.Handler(req); pattern != "" {
				s.checkAnswer(t, keyOf[pattern], st.status, hdr, body)
			} else {
				s.checkBody(t, "/components/schemas/Error", body) // no route
			}
			for _, field := range st.capture {
				var obj map[string]any
				_ = json.Unmarshal(body, &obj)
				vars[field], _ = obj[field].(string)
			}
		})
	}
}

// newUsageEnv is newEnv over a memory store that records usage, and the
// recorder, whose Flush writes the usage snapshots.
func newUsageEnv(t *testing.T) (*env, *aggregator.Recorder) {
	t.Helper()
	clk := clock.NewFake(epoch)
	mem := memory.New()
	rec := aggregator.NewRecorder(mem, mem, aggregator.WithClock(clk))
	srv := mustServer(New(rec, WithClock(clk), WithLogger(slog.New(slog.DiscardHandler))))
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return &env{t: t, srv: srv, ts: ts, clk: clk, hdr: http.Header{}}, rec
}

func expand(s string, vars map[string]string) string {
	for k, v := range vars {
		s = strings.ReplaceAll(s, "{"+k+"}", v)
	}
	return s
}

// call sends st and returns the answer's body and headers, or nil after
// failing t when the status is not st.status.
func (e *env) call(st liveStep) ([]byte, http.Header) {
	req, err := http.NewRequest(st.method, e.ts.URL+st.path, strings.NewReader(st.body))
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode != st.status {
		e.t.Errorf("%s %s: status %d, want %d; body %s", st.method, st.path, resp.StatusCode, st.status, buf.Bytes())
		return nil, nil
	}
	return buf.Bytes(), resp.Header
}

// mux routes requests to the documented operations: its patterns are
// their keys.
// mux routes requests as the server does, to the documented operations:
// it registers the server's own patterns (a rest wildcard, "{resource...}",
// takes a path with '/', which the OpenAPI path "{resource}" cannot say),
// and names each by its documented key.
func (s *spec) mux(t *testing.T) (*http.ServeMux, map[string]string) {
	m := http.NewServeMux()
	keys := map[string]string{}
	for key, r := range servedRoutes(t) {
		m.HandleFunc(r.pattern, func(http.ResponseWriter, *http.Request) {})
		keys[r.pattern] = key
	}
	return m, keys
}

// checkAnswer checks a live answer of operation key against the response
// the description gives for its status.
func (s *spec) checkAnswer(t *testing.T, key string, status int, hdr http.Header, body []byte) {
	t.Helper()
	var o operation
	for _, op := range s.operations() {
		if op.key == key {
			o = op
		}
	}
	code := fmt.Sprint(status)
	rs, _ := o.op["responses"].(map[string]any)
	r, ok := rs[code]
	if !ok {
		t.Errorf("%s answered %d, which the description does not document", key, status)
		return
	}
	rm, ptr := s.resolve(t, r, o.ptr+"/responses/"+code)
	s.checkHeaders(t, rm, ptr, hdr)
	content, _ := rm["content"].(map[string]any)
	if len(content) == 0 {
		if len(body) != 0 {
			t.Errorf("%s %d: documented without a body, answered %q", key, status, body)
		}
		return
	}
	if _, ok := content["application/json"]; !ok {
		return // /metrics: text
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	s.checkBody(t, ptr+"/content/application~1json/schema", body)
}

// checkHeaders checks that the answer has every required header of the
// response, valid against its schema.
func (s *spec) checkHeaders(t *testing.T, rm map[string]any, ptr string, hdr http.Header) {
	t.Helper()
	hs, _ := rm["headers"].(map[string]any)
	names := make([]string, 0, len(hs))
	for name := range hs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		h, hptr := s.resolve(t, hs[name], ptr+"/headers/"+escapeToken(name))
		v := hdr.Get(name)
		if v == "" {
			if req, _ := h["required"].(bool); req {
				t.Errorf("header %s missing", name)
			}
			continue
		}
		var value any = v
		if _, err := strconv.ParseInt(v, 10, 64); err == nil {
			value = json.Number(v) // as the validator reads JSON numbers
		}
		if err := s.schema(t, hptr+"/schema").Validate(value); err != nil {
			t.Errorf("header %s: %q: %v", name, v, err)
		}
	}
}

// checkBody validates a JSON body against the schema at ptr.
func (s *spec) checkBody(t *testing.T, ptr string, body []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Errorf("body %q: %v", body, err)
		return
	}
	if err := s.schema(t, ptr).Validate(v); err != nil {
		t.Errorf("body %s does not match schema %s: %v", body, ptr, err)
	}
}
