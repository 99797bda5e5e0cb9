package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/api"
)

// emrLimits stores two reserved clusters and a rate limit for resource emr.
func emrLimits(e *env) {
	e.t.Helper()
	e.want(http.StatusOK, "PUT", "/v1/limits/resources/emr", api.Limits{Limits: []string{"clusters:2/reserved", "rpm:100/min"}}, nil)
}

func reserveBody(entity, id string, consume map[string]int64) map[string]any {
	b := map[string]any{"entity": entity, "resource": "emr", "id": id}
	if consume != nil {
		b["consume"] = consume
	}
	return b
}

// step is one request of a scripted test and the answer it expects.
type step struct {
	name         string
	method, path string
	body         any
	status       int
	check        func(t *testing.T, raw []byte)
}

func runSteps(t *testing.T, e *env, steps []step) {
	t.Helper()
	for _, st := range steps {
		var raw json.RawMessage
		got, _ := e.do(st.method, st.path, st.body, &raw)
		if got != st.status {
			t.Fatalf("%s: %s %s: status %d, want %d; body %s", st.name, st.method, st.path, got, st.status, raw)
		}
		if st.check != nil {
			st.check(t, raw)
		}
	}
}

func decodeAs[T any](t *testing.T, raw []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return v
}

func wantReason(reason string) func(t *testing.T, raw []byte) {
	return func(t *testing.T, raw []byte) {
		t.Helper()
		if er := decodeAs[api.Error](t, raw); er.Reason != reason {
			t.Errorf("error %+v, want reason %s", er, reason)
		}
	}
}

func TestReservationLifecycle(t *testing.T) {
	e := newEnv(t)
	emrLimits(e)
	steps := []step{
		{"reserve with the reserved limits in effect", "POST", "/v1/reservations", reserveBody("team-a", "j-1", nil), http.StatusCreated,
			func(t *testing.T, raw []byte) {
				r := decodeAs[api.ReserveResponse](t, raw)
				if r.ID != "j-1" || r.Entity != "team-a" || r.Resource != "emr" || r.Holder == "" || r.CreatedAtMS != epoch.UnixMilli() ||
					r.ExpiresAtMS != 0 || r.Consumed["clusters"] != 1 || len(r.Consumed) != 1 || len(r.Limits) != 2 || r.Limits[0].Available != 1 {
					t.Errorf("reserve = %+v", r)
				}
			}},
		{"the same id again is the same reservation", "POST", "/v1/reservations", reserveBody("team-a", "j-1", nil), http.StatusOK,
			func(t *testing.T, raw []byte) {
				r := decodeAs[api.ReserveResponse](t, raw)
				if r.ID != "j-1" || r.CreatedAtMS != epoch.UnixMilli() || len(r.Limits) != 0 {
					t.Errorf("reserve again = %+v", r)
				}
			}},
		{"reserve with another limit", "POST", "/v1/reservations", reserveBody("team-a", "j-2", map[string]int64{"clusters": 1, "rpm": 1}), http.StatusCreated,
			func(t *testing.T, raw []byte) {
				if r := decodeAs[api.ReserveResponse](t, raw); r.Consumed["rpm"] != 1 || r.Consumed["clusters"] != 1 {
					t.Errorf("consumed %v", r.Consumed)
				}
			}},
		// No reservation has an expiry: no retry-after, it waits for a release.
		{"full", "POST", "/v1/reservations", reserveBody("team-a", "j-3", nil), http.StatusTooManyRequests,
			func(t *testing.T, raw []byte) {
				er := decodeAs[api.Error](t, raw)
				if er.Code != api.CodeRateLimited || len(er.Limits) != 2 || !er.Limits[0].Exceeded || er.Limits[0].Kind != "reserved" ||
					er.Limits[1].Exceeded || er.RetryAfterMS != 0 || er.Waits != "release" || er.Limits[0].Waits != "release" {
					t.Errorf("full: %+v", er)
				}
			}},
		{"held by another entity, even when full", "POST", "/v1/reservations", reserveBody("team-b", "j-1", nil), http.StatusConflict,
			wantReason("reservation_conflict")},
		{"found by id alone", "GET", "/v1/reservations/j-2", nil, http.StatusOK,
			func(t *testing.T, raw []byte) {
				if r := decodeAs[api.Reservation](t, raw); r.ID != "j-2" || r.Entity != "team-a" || r.Resource != "emr" {
					t.Errorf("get = %+v", r)
				}
			}},
		{"not a lease for the lease routes", "POST", "/v1/leases/r:j-1/commit", nil, http.StatusNotFound, wantReason("lease_not_found")},
		{"release", "DELETE", "/v1/reservations/j-1", nil, http.StatusNoContent, nil},
		{"release twice", "DELETE", "/v1/reservations/j-1", nil, http.StatusNotFound, wantReason("lease_not_found")},
		{"gone", "GET", "/v1/reservations/j-1", nil, http.StatusNotFound, wantReason("lease_not_found")},
		{"its cluster is back", "POST", "/v1/reservations", reserveBody("team-a", "j-3", nil), http.StatusCreated, nil},
		{"its id is free for anyone", "POST", "/v1/reservations", reserveBody("team-b", "j-1", nil), http.StatusCreated, nil},
	}
	runSteps(t, e, steps)
	// rpm: 1 of j-2 stays consumed after all (a release is a commit).
	var av api.AvailableResponse
	e.want(http.StatusOK, "GET", "/v1/available?entity=team-a&resource=emr", nil, &av)
	for _, l := range av.Limits {
		if want := map[string]int64{"clusters": 0, "rpm": 99}[l.Limit]; l.Available != want {
			t.Errorf("%s available %d, want %d", l.Limit, l.Available, want)
		}
	}
}

// An id may hold '/' and ':' (the resource part of an ARN): the path takes
// it escaped or not.
func TestReservationIDWithSlashes(t *testing.T) {
	e := newEnv(t)
	emrLimits(e)
	id := "cluster/j-9:x"
	e.want(http.StatusCreated, "POST", "/v1/reservations", reserveBody("team-a", id, nil), nil)
	for _, path := range []string{"/v1/reservations/cluster/j-9:x", "/v1/reservations/cluster%2Fj-9:x"} {
		var r api.Reservation
		e.want(http.StatusOK, "GET", path, nil, &r)
		if r.ID != id {
			t.Errorf("GET %s = %+v", path, r)
		}
	}
	e.want(http.StatusNoContent, "DELETE", "/v1/reservations/cluster%2Fj-9:x", nil, nil)
}

func TestReservationExpiry(t *testing.T) {
	e := newEnv(t)
	emrLimits(e)
	body := reserveBody("team-a", "sbx-1", nil)
	body["ttl_ms"] = 60_000
	var r api.ReserveResponse
	e.want(http.StatusCreated, "POST", "/v1/reservations", body, &r)
	if want := epoch.Add(time.Minute).UnixMilli(); r.ExpiresAtMS != want {
		t.Errorf("expires %d, want %d", r.ExpiresAtMS, want)
	}
	var got api.Reservation
	e.want(http.StatusOK, "GET", "/v1/reservations/sbx-1", nil, &got)
	if got.ExpiresAtMS != r.ExpiresAtMS {
		t.Errorf("GET expires %d, want %d", got.ExpiresAtMS, r.ExpiresAtMS)
	}
}

func TestReserveInvalid(t *testing.T) {
	e := newEnv(t)
	emrLimits(e)
	e.want(http.StatusOK, "PUT", "/v1/limits/resources/api", api.Limits{Limits: []string{"rpm:100/min"}}, nil)
	with := func(k string, v any) map[string]any {
		b := reserveBody("team-a", "j-1", nil)
		b[k] = v
		return b
	}
	cases := []struct {
		name  string
		body  any
		field string
	}{
		{"no id", map[string]any{"entity": "team-a", "resource": "emr"}, "id"},
		{"bad id", with("id", "j 1"), "id"},
		{"long id", with("id", strings.Repeat("j", 300)), "id"},
		{"no entity", with("entity", ""), "entity"},
		{"ttl too short", with("ttl_ms", 5), "ttl_ms"},
		{"ttl too long", with("ttl_ms", int64(48*time.Hour/time.Millisecond)), "ttl_ms"},
		{"two clusters", with("consume", map[string]int64{"clusters": 2}), "consume.clusters"},
		{"no reserved limit named", with("consume", map[string]int64{"rpm": 1}), "consume"},
		{"no reserved limit in effect", map[string]any{"entity": "team-a", "resource": "api", "id": "j-1"}, "consume"},
		{"none in explicit limits", with("limits", []string{"rpm:10/min"}), "consume"},
		{"bad limits", with("limits", []string{"clusters:lots"}), "limit"},
		{"bad mode", with("on_unavailable", "maybe"), "on_unavailable"},
		{"unknown field", with("lease_ttl_ms", 1000), "lease_ttl_ms"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var er api.Error
			e.want(http.StatusBadRequest, "POST", "/v1/reservations", c.body, &er)
			if er.Code != api.CodeInvalidArgument || er.Field != c.field {
				t.Errorf("%+v, want field %s", er, c.field)
			}
		})
	}
	for _, path := range []string{"GET /v1/reservations/j%201", "DELETE /v1/reservations/-j"} {
		method, p, _ := strings.Cut(path, " ")
		var er api.Error
		e.want(http.StatusBadRequest, method, p, nil, &er)
		if er.Field != "id" {
			t.Errorf("%s: %+v, want field id", path, er)
		}
	}
}

func TestListReservations(t *testing.T) {
	e := newEnv(t)
	limits := []string{"clusters:10/reserved", "sandboxes:10/reserved"}
	for i := range 5 {
		e.want(http.StatusCreated, "POST", "/v1/reservations", map[string]any{"entity": "team-a", "resource": "emr",
			"id": fmt.Sprintf("j-%d", i), "limits": limits, "consume": map[string]int64{"clusters": 1}}, nil)
	}
	e.want(http.StatusCreated, "POST", "/v1/reservations", map[string]any{"entity": "team-a", "resource": "sandbox",
		"id": "s-1", "limits": limits, "consume": map[string]int64{"sandboxes": 1}}, nil)
	e.want(http.StatusCreated, "POST", "/v1/reservations", map[string]any{"entity": "team-b", "resource": "emr",
		"id": "j-9", "limits": limits}, nil) // both reserved limits, by default

	pages := func(query string) [][]string {
		var out [][]string
		for after := ""; ; {
			var resp api.ReservationsResponse
			e.want(http.StatusOK, "GET", "/v1/reservations?"+query+"&after="+after, nil, &resp)
			var ids []string
			for _, r := range resp.Reservations {
				ids = append(ids, r.ID)
			}
			out = append(out, ids)
			if resp.Next == "" {
				return out
			}
			after = resp.Next
		}
	}
	cases := []struct {
		query string
		want  string
	}{
		{"entity=team-a&resource=emr&limit=2", "[[j-0 j-1] [j-2 j-3] [j-4]]"},
		{"entity=team-a&limit=3", "[[j-0 j-1 j-2] [j-3 j-4 s-1]]"},
		{"entity=team-a", "[[j-0 j-1 j-2 j-3 j-4 s-1]]"},
		{"entity=team-b&resource=emr", "[[j-9]]"},
		{"entity=team-c", "[[]]"},
	}
	for _, c := range cases {
		if got := fmt.Sprint(pages(c.query)); got != c.want {
			t.Errorf("%s: pages %s, want %s", c.query, got, c.want)
		}
	}
	for query, field := range map[string]string{"entity=team-a&limit=0": "limit", "entity=team-a&limit=1001": "limit",
		"entity=team-a&limit=x": "limit", "resource=emr": "entity", "entity=team-a&after=-x": "after", "entity=team-a&resource=9": "resource"} {
		var er api.Error
		e.want(http.StatusBadRequest, "GET", "/v1/reservations?"+query, nil, &er)
		if er.Field != field {
			t.Errorf("%s: %+v, want field %s", query, er, field)
		}
	}
}

// A reservation is its namespace's: a key of another namespace finds,
// releases and lists nothing of it, and may reserve the same id there.
// Reading takes the read role; reserving and releasing the acquire role.
func TestReservationsNamespacesApart(t *testing.T) {
	keys, err := LoadKeys(strings.NewReader(
		HashKey("admin") + " * admin ops\n" +
			HashKey("a-acq") + " default acquire svc-a allow_limits\n" +
			HashKey("a-read") + " default read dash-a\n" +
			HashKey("b-acq") + " team-b acquire svc-b allow_limits\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, WithKeys(keys))
	as := func(key string) { e.hdr.Set("Authorization", "Bearer "+key) }
	as("admin")
	e.want(http.StatusCreated, "POST", "/v1/namespaces", api.Namespace{Name: "team-b"}, nil)
	body := map[string]any{"entity": "team-a", "resource": "emr", "id": "j-1", "limits": []string{"clusters:1/reserved"}}

	as("a-acq")
	e.want(http.StatusCreated, "POST", "/v1/reservations", body, nil)
	as("a-read")
	e.want(http.StatusOK, "GET", "/v1/reservations/j-1", nil, nil)
	e.want(http.StatusOK, "GET", "/v1/reservations?entity=team-a", nil, nil)
	e.want(http.StatusForbidden, "POST", "/v1/reservations", body, nil)
	e.want(http.StatusForbidden, "DELETE", "/v1/reservations/j-1", nil, nil)
	e.want(http.StatusForbidden, "POST", "/v1/penalize", map[string]any{}, nil)

	as("b-acq")
	e.want(http.StatusNotFound, "GET", "/v1/reservations/j-1", nil, nil)
	e.want(http.StatusNotFound, "DELETE", "/v1/reservations/j-1", nil, nil)
	var list api.ReservationsResponse
	e.want(http.StatusOK, "GET", "/v1/reservations?entity=team-a", nil, &list)
	if len(list.Reservations) != 0 {
		t.Errorf("team-b lists %+v", list.Reservations)
	}
	e.want(http.StatusCreated, "POST", "/v1/reservations", body, nil) // its own j-1

	as("a-acq")
	var r api.Reservation
	e.want(http.StatusOK, "GET", "/v1/reservations/j-1", nil, &r)
	if r.Entity != "team-a" {
		t.Errorf("default's j-1 = %+v", r)
	}
	e.want(http.StatusNoContent, "DELETE", "/v1/reservations/j-1", nil, nil)
}

func TestPenalize(t *testing.T) {
	e := newEnv(t)
	e.hdr.Set(api.PrincipalHeader, "oncall")
	e.want(http.StatusOK, "PUT", "/v1/limits/resources/api", api.Limits{Limits: []string{"rpm:100/min", "tpm:1000/min", "slots:2/concurrent"}}, nil)
	acquire := map[string]any{"entity": "k", "resource": "api", "consume": map[string]int64{"rpm": 1}, "commit": true}
	cases := []struct {
		name    string
		penalty map[string]any
		wait    time.Duration // from the start of the case, when the penalty ends
	}{
		{"retry_after_ms", map[string]any{"retry_after_ms": 30_000}, 30 * time.Second},
		{"until_ms", map[string]any{"until_ms": 0}, 45 * time.Second}, // until_ms set below
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := e.clk.Now()
			body := map[string]any{"entity": "k", "resource": "api", "limits": []string{"rpm"}, "reason": "vendor said 429"}
			for k, v := range c.penalty {
				body[k] = v
			}
			if _, ok := c.penalty["until_ms"]; ok {
				body["until_ms"] = start.Add(c.wait).UnixMilli()
			}
			e.want(http.StatusNoContent, "POST", "/v1/penalize", body, nil)
			var er api.Error
			h := e.want(http.StatusTooManyRequests, "POST", "/v1/acquire", acquire, &er)
			if ra, _ := strconv.Atoi(h.Get("Retry-After")); er.RetryAfterMS < c.wait.Milliseconds() || ra < int(c.wait.Seconds()) {
				t.Errorf("denied with retry_after_ms %d (Retry-After %s), want >= %d", er.RetryAfterMS, h.Get("Retry-After"), c.wait.Milliseconds())
			}
			e.clk.Advance(c.wait - time.Millisecond)
			e.want(http.StatusTooManyRequests, "POST", "/v1/acquire", acquire, nil)
			e.clk.Advance(time.Second) // rpm refills 1 token in 600ms
			e.want(http.StatusOK, "POST", "/v1/acquire", acquire, nil)
		})
	}
	var audit api.AuditResponse
	e.want(http.StatusOK, "GET", "/v1/audit?entity=k", nil, &audit)
	n := 0
	for _, ev := range audit.Events {
		if ev.Action == "limit.penalize" {
			n++
			if ev.Principal != "oncall" || ev.Details["reason"] != "vendor said 429" || ev.Details["limits"] != "rpm" {
				t.Errorf("audit event %+v", ev)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d penalize events, want 2", n)
	}
}

func TestPenalizeInvalid(t *testing.T) {
	e := newEnv(t)
	e.want(http.StatusOK, "PUT", "/v1/limits/resources/api", api.Limits{Limits: []string{"rpm:100/min", "slots:2/concurrent"}}, nil)
	with := func(kv ...any) map[string]any {
		b := map[string]any{"entity": "k", "resource": "api", "retry_after_ms": 1000, "limits": []string{"rpm"}}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(b, kv[i].(string))
			} else {
				b[kv[i].(string)] = kv[i+1]
			}
		}
		return b
	}
	cases := []struct {
		name  string
		body  any
		field string
	}{
		{"no end", with("retry_after_ms", nil), "until_ms"},
		{"both ends", with("until_ms", epoch.Add(time.Minute).UnixMilli()), "retry_after_ms"},
		{"negative retry", with("retry_after_ms", -5), "retry_after_ms"},
		{"retry over a day", with("retry_after_ms", int64(25*time.Hour/time.Millisecond)), "retry_after_ms"},
		{"until past", with("retry_after_ms", nil, "until_ms", epoch.UnixMilli()), "until_ms"},
		{"until over a day", with("retry_after_ms", nil, "until_ms", epoch.Add(25*time.Hour).UnixMilli()), "until_ms"},
		{"no limits", with("limits", []string{}), "limits"},
		{"concurrency", with("limits", []string{"slots"}), "limits"},
		{"unknown limit", with("limits", []string{"tpm"}), "limits"},
		{"long reason", with("reason", strings.Repeat("x", 2000)), "reason"},
		{"no entity", with("entity", nil), "entity"},
		{"unknown field", with("lease_id", "x"), "lease_id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var er api.Error
			e.want(http.StatusBadRequest, "POST", "/v1/penalize", c.body, &er)
			if er.Field != c.field {
				t.Errorf("%+v, want field %s", er, c.field)
			}
		})
	}
}

// A lease penalizes its entity and resource, with the limits it was
// acquired with: explicit ones here, which no stored configuration has.
func TestPenalizeLease(t *testing.T) {
	e := newEnv(t)
	limits := []string{"rpm:10/min", "slots:1/concurrent"}
	var a api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", map[string]any{"entity": "k", "resource": "llm",
		"consume": map[string]int64{"slots": 1, "rpm": 1}, "limits": limits}, &a)
	e.want(http.StatusNoContent, "POST", "/v1/leases/"+a.LeaseID+"/penalize", map[string]any{"retry_after_ms": 10_000, "limits": []string{"rpm"}}, nil)
	e.want(http.StatusOK, "POST", "/v1/leases/"+a.LeaseID+"/commit", nil, nil)
	var er api.Error
	e.want(http.StatusTooManyRequests, "POST", "/v1/acquire", map[string]any{"entity": "k", "resource": "llm",
		"consume": map[string]int64{"rpm": 1}, "limits": limits, "commit": true}, &er)
	if er.RetryAfterMS < 10_000 {
		t.Errorf("retry_after_ms %d, want >= 10000", er.RetryAfterMS)
	}

	// A lease that consumed none of the limit penalizes it all the same.
	var b api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", map[string]any{"entity": "k2", "resource": "llm",
		"consume": map[string]int64{"slots": 1}, "limits": limits}, &b)
	e.want(http.StatusNoContent, "POST", "/v1/leases/"+b.LeaseID+"/penalize", map[string]any{"retry_after_ms": 10_000, "limits": []string{"rpm"}}, nil)
	e.want(http.StatusOK, "POST", "/v1/leases/"+b.LeaseID+"/rollback", nil, nil)
	e.want(http.StatusTooManyRequests, "POST", "/v1/acquire", map[string]any{"entity": "k2", "resource": "llm",
		"consume": map[string]int64{"rpm": 1}, "limits": limits, "commit": true}, nil)

	penalty := map[string]any{"retry_after_ms": 1000, "limits": []string{"rpm"}}
	e.want(http.StatusConflict, "POST", "/v1/leases/"+a.LeaseID+"/penalize", penalty, nil) // ended
	e.want(http.StatusNotFound, "POST", "/v1/leases/"+strings.Repeat("0", 32)+"/penalize", penalty, nil)
	e.want(http.StatusBadRequest, "POST", "/v1/leases/degraded-"+strings.Repeat("0", 32)+"/penalize", penalty, nil)
	e.want(http.StatusBadRequest, "POST", "/v1/leases/"+strings.Repeat("0", 32)+"/penalize", map[string]any{"entity": "k", "retry_after_ms": 1000}, nil)
}

func FuzzReserveBody(f *testing.F) {
	fuzzBodies(f, "POST", "/v1/reservations", []string{
		`{"entity":"k","resource":"emr","id":"j-1","limits":["clusters:2/reserved"]}`,
		`{"entity":"k","resource":"emr","id":"j-1","consume":{"clusters":1,"rpm":1},"limits":["clusters:2/reserved","rpm:5/min"],"ttl_ms":60000}`,
		`{"entity":"k","resource":"emr","id":"j 1","limits":["clusters:2/reserved"]}`,
		`{"entity":"k","resource":"emr","id":"j-1","consume":{"clusters":2},"limits":["clusters:2/reserved"]}`,
		`{"entity":"k","resource":"emr","id":"j-1"}`, `{"id":""}`,
		`{"entity":"k","resource":"emr","id":"j-1","limits":["clusters:2/reserved"],"on_unavailable":"allow","ttl_ms":-1}`,
	})
}

func FuzzPenalizeBody(f *testing.F) {
	fuzzBodiesAround(f, "POST", "/v1/penalize", []string{
		`{"entity":"k","resource":"api","retry_after_ms":1000,"limits":["rpm"]}`,
		`{"entity":"k","resource":"api","until_ms":1767225660000,"limits":["rpm"],"reason":"429"}`,
		`{"entity":"k","resource":"api","until_ms":9223372036854775807,"limits":["rpm"]}`,
		`{"entity":"k","resource":"api","retry_after_ms":-9223372036854775808,"limits":["rpm"]}`,
		`{"entity":"k","resource":"api","retry_after_ms":1000,"limits":["slots"]}`,
	}, func(e *env) string {
		e.want(http.StatusOK, "PUT", "/v1/limits/resources/api", api.Limits{Limits: []string{"rpm:100/min", "slots:2/concurrent"}}, nil)
		return ""
	}, nil, nil)
}
