package server

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/server/ui"
	"github.com/tollgate-rl/tollgate/store/memory"
)

func TestCheckQuery(t *testing.T) {
	ps := []param{one("entity"), one("limit"), list("consume")}
	for _, c := range []struct {
		raw, field string // field "" when accepted
	}{
		{raw: "entity=a&limit=5"},
		{raw: "consume=rpm:1&consume=tpm:2&entity=a"},
		{raw: "entity=&limit="},
		{raw: "entity=a&&limit=1&"},
		{raw: "entity=a%2Fb+c"},
		{raw: "%65ntity=a"}, // escaped, the name is entity
		{raw: "nope=1", field: "nope"},
		{raw: "Entity=a", field: "Entity"},
		{raw: "entity", field: ""}, // no value: an empty one, as net/url reads it
		{raw: "entity=a&entity=b", field: "entity"},
		{raw: "entity=a&entity=a", field: "entity"},
		{raw: "entity=a&%65ntity=b", field: "entity"},
		{raw: "entity=a;limit=1", field: "query"},
		{raw: "%zz=1", field: "query"},
		{raw: "entity=%zz", field: "entity"},
		{raw: "=1", field: "query"},
		{raw: "limit=1&nope=1&entity=a&entity=b", field: "nope"}, // the first fault
		{raw: strings.Repeat("n", 1000) + "=1", field: strings.Repeat("n", maxFieldName) + "..."},
	} {
		err := checkQuery(c.raw, ps)
		switch {
		case c.field == "" && err != nil:
			t.Errorf("checkQuery(%q) = %v, want nil", c.raw, err)
		case c.field != "" && fieldOf(err) != c.field:
			t.Errorf("checkQuery(%q) = %v, want a 400 on %q", c.raw, err, c.field)
		}
	}
}

// A path of pattern, its wildcards filled in.
func samplePath(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	for _, w := range []struct{ from, to string }{
		{"{id...}", "job-1"}, {"{resource...}", "api"}, {"{id}", "k"}, {"{name}", "team-x"},
	} {
		path = strings.ReplaceAll(path, w.from, w.to)
	}
	return method, path
}

// Every route refuses a query parameter it does not read, and one it
// reads once given twice, naming it, before it does anything; a list
// parameter may be repeated.
func TestStrictQueryEveryRoute(t *testing.T) {
	cs := &countingStore{Store: memory.New()}
	e := newEnvOver(t, cs)
	writes := cs.writes.Load()
	for _, r := range e.srv.registered {
		if r.pattern == "/" || r.pattern == "GET /metrics" || r.pattern == "GET "+ui.Prefix || r.pattern == rootPattern {
			continue // not handle's: the catch-all, and what is no API (the root's redirect too)
		}
		method, path := samplePath(r.pattern)
		cases := []struct{ query, field, reason string }{{"nope=1", "nope", "unknown query parameter"}}
		for _, p := range r.query {
			if p.list {
				continue
			}
			cases = append(cases, struct{ query, field, reason string }{
				p.name + "=a&" + p.name + "=a", p.name, "given more than once"})
		}
		for _, c := range cases {
			var er api.Error
			status, _ := e.do(method, path+"?"+c.query, nil, &er)
			if status != http.StatusBadRequest || er.Field != c.field || !strings.HasPrefix(er.Reason, c.reason) {
				t.Errorf("%s %s?%s: %d %+v, want 400 on %q: %s", method, path, c.query, status, er, c.field, c.reason)
			}
		}
		for _, p := range r.query {
			if !p.list {
				continue
			}
			var er api.Error
			e.do(method, path+"?"+p.name+"=a&"+p.name+"=b", nil, &er)
			if strings.HasPrefix(er.Reason, "given more than once") {
				t.Errorf("%s %s: list parameter %s refused when repeated: %+v", method, path, p.name, er)
			}
		}
	}
	if n := cs.writes.Load() - writes; n != 0 {
		t.Errorf("refused queries wrote to the store %d times", n)
	}
	// The catch-all answers 404 whatever the query.
	e.want(http.StatusNotFound, "GET", "/v1/nowhere?nope=1", nil, nil)
}

// The parameters a route reads work as before.
func TestStrictQueryAccepts(t *testing.T) {
	e := newEnv(t)
	e.want(http.StatusOK, "PUT", "/v1/limits/resources/api", api.Limits{Limits: []string{"rpm:5/min"}}, nil)
	for _, path := range []string{
		"/v1/available?entity=k&resource=api&limits=rpm:5/min&limits=tpm:9/min&consume=rpm:1&consume=tpm:2",
		"/v1/leases?entity=k&resource=api&after=&limit=10",
		"/v1/reservations?entity=k&resource=api&limit=10",
		"/v1/entities?limit=10&after=a",
		"/v1/limits?limit=10",
		"/v1/audit?entity=k&limit=5",
		"/v1/capacity?resource=api",
	} {
		e.want(http.StatusOK, "GET", path, nil, nil)
	}
	e.want(http.StatusNotFound, "GET", "/v1/limits/entities/k?resource=api", nil, nil)
}

// Authentication comes first: a bad query from a caller without a key is
// a 401, as any request of it.
func TestStrictQueryAfterAuth(t *testing.T) {
	_, hash := GenerateKey()
	keys, err := LoadKeys(strings.NewReader(hash + " default admin ops\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, WithKeys(keys))
	e.want(http.StatusUnauthorized, "GET", "/v1/entities?nope=1", nil, nil)
}

// consume= is LIMIT:AMOUNT, AMOUNT whole tokens from 0 to MaxTokens, each
// limit once.
func TestConsumeQuery(t *testing.T) {
	e := newEnv(t)
	base := "/v1/available?entity=k&resource=api&limits=rpm:5/min&"
	var ok api.AvailableResponse
	e.want(http.StatusOK, "GET", base+"consume=rpm:0", nil, &ok)
	if ok.RetryAfterMS == nil || *ok.RetryAfterMS != 0 {
		t.Errorf("consume=rpm:0: %+v", ok)
	}
	max := "rpm:" + strconv.FormatInt(model.MaxTokens, 10)
	for _, c := range []struct{ consume, field string }{
		{"rpm:-1", "consume"},
		{"rpm:+1", "consume"},
		{"rpm:1.5", "consume"},
		{"rpm:%201", "consume"},
		{"rpm:", "consume"},
		{"rpm", "consume"},
		{":1", "consume"},
		{"r%20m:1", "consume"},
		{"rpm:" + strconv.FormatInt(model.MaxTokens+1, 10), "consume.rpm"},
		{"rpm:99999999999999999999", "consume.rpm"},
		{max, "consume.rpm"}, // in range, above the capacity: never grantable
		{"rpm:1&consume=rpm:2", "consume.rpm"},
		{"tpm:1", "consume.tpm"}, // no such limit in effect
	} {
		var er api.Error
		e.want(http.StatusBadRequest, "GET", base+"consume="+c.consume, nil, &er)
		if er.Field != c.field {
			t.Errorf("consume=%s: field %q (%s), want %q", c.consume, er.Field, er.Message, c.field)
		}
	}
	var er api.Error
	e.want(http.StatusBadRequest, "GET", base+strings.Repeat("consume=rpm:1&", maxConsumeQuery+1), nil, &er)
	if er.Field != "consume" {
		t.Errorf("too many: %+v", er)
	}
}
