package securitytest

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store"
)

// The rows of docs/security.md's table of probes, in its order. Each was
// answered wrongly before the trust boundary was built (issue 20).

// Stored limits are authoritative: an acquire key that sends its own
// limits for a limit the store governs is refused, and nothing is debited
// or rewritten.
func TestProbeOwnLimitsOverStoredRate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(t *testing.T) (a, b store.Store)) {
		e := newEnv(t, open)
		svc := e.keys["svc"]
		e.setLimits("/v1/limits/resources/api", "x:5/min")
		e.want(http.StatusOK, svc, "POST", "/v1/acquire", acquire("k", "api", map[string]int64{"x": 5}), nil)
		e.denied("limits", svc, "POST", "/v1/acquire", acquire("k", "api", map[string]int64{"x": 1000}, withLimits("x:1000000/min")))
		e.want(http.StatusTooManyRequests, svc, "POST", "/v1/acquire", acquire("k", "api", map[string]int64{"x": 1}), nil)
		if got := e.available("k", "api", "x"); got != 0 {
			t.Errorf("x available = %d, want 0: the refused call rewrote the bucket", got)
		}
		e.denied("limits", svc, "GET", "/v1/available?entity=k&resource=api&limits=x:1000000/min", nil)
		e.denied("limits", svc, "GET", "/v1/available?entity=k&resource=api&limits=x:1000000/min&consume=x:1", nil) // time until available
		e.denied("limits", svc, "POST", "/v1/reservations", map[string]any{"id": "r1", "entity": "k", "resource": "api",
			"consume": map[string]int64{"slot": 1}, "limits": []string{"slot:1000/reserved"}})
		e.want(http.StatusNotFound, svc, "GET", "/v1/reservations/r1", nil, nil) // the refused call reserved nothing
	})
}

// The same for a concurrency limit: no slot beyond the stored bound.
func TestProbeOwnLimitsOverStoredConcurrency(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(t *testing.T) (a, b store.Store)) {
		e := newEnv(t, open)
		svc := e.keys["svc"]
		e.setLimits("/v1/limits/resources/jobs", "slots:2/concurrent")
		for range 2 {
			e.want(http.StatusOK, svc, "POST", "/v1/acquire", acquire("k", "jobs", map[string]int64{"slots": 1}, held), nil)
		}
		e.denied("limits", svc, "POST", "/v1/acquire", acquire("k", "jobs", map[string]int64{"slots": 1}, held, withLimits("slots:100/concurrent")))
		e.want(http.StatusTooManyRequests, svc, "POST", "/v1/acquire", acquire("k", "jobs", map[string]int64{"slots": 1}, held), nil)
		if got := e.available("k", "jobs", "slots"); got != 0 {
			t.Errorf("slots available = %d, want 0 (2 held of 2)", got)
		}
	})
}

// A cascading child cannot send limits past its organisation's stored
// ones.
func TestProbeOwnLimitsPastTheOrganisation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(t *testing.T) (a, b store.Store)) {
		e := newEnv(t, open)
		ops, svc := e.keys["ops"], e.keys["svc"]
		e.want(http.StatusCreated, ops, "POST", "/v1/entities", map[string]any{"id": "org"}, nil)
		e.want(http.StatusCreated, ops, "POST", "/v1/entities", map[string]any{"id": "child", "parent_id": "org", "cascade": true}, nil)
		e.setLimits("/v1/limits/resources/api", "rpm:1000/min") // the child's own
		e.setLimits("/v1/limits/entities/org", "rpm:5/min")
		e.denied("limits", svc, "POST", "/v1/acquire", acquire("child", "api", map[string]int64{"rpm": 1}, withLimits("rpm:1000/min")))
		granted := 0
		for range 20 {
			if e.call(e.a, svc, "POST", "/v1/acquire", acquire("child", "api", map[string]int64{"rpm": 1})).status == http.StatusOK {
				granted++
			}
		}
		if granted != 5 {
			t.Errorf("%d of 20 granted, want the organisation's 5", granted)
		}
	})
}

// A huge per-call limit with nothing consumed would refill the bucket for
// the stored limit's next acquire: refused.
func TestProbeBucketResetThroughOwnLimits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(t *testing.T) (a, b store.Store)) {
		e := newEnv(t, open)
		svc := e.keys["svc"]
		e.setLimits("/v1/limits/resources/api", "rpm:3/min")
		e.want(http.StatusOK, svc, "POST", "/v1/acquire", acquire("k", "api", map[string]int64{"rpm": 3}), nil)
		e.denied("limits", svc, "POST", "/v1/acquire", acquire("k", "api", map[string]int64{"rpm": 0}, withLimits("rpm:4000000000000/ms")))
		e.want(http.StatusTooManyRequests, svc, "POST", "/v1/acquire", acquire("k", "api", map[string]int64{"rpm": 1}), nil)
	})
}

// A looser unavailable mode than the stored one needs the permission; the
// stored mode itself, or block, needs none.
func TestProbeLooserUnavailableMode(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(t *testing.T) (a, b store.Store)) {
		e := newEnv(t, open)
		ops, svc := e.keys["ops"], e.keys["svc"]
		e.setLimits("/v1/limits/resources/api", "rpm:100/min", "jobs:5/reserved")
		allow := func(b map[string]any) { b["on_unavailable"] = "allow" }
		block := func(b map[string]any) { b["on_unavailable"] = "block" }
		e.denied("on_unavailable", svc, "POST", "/v1/acquire", acquire("k", "api", map[string]int64{"rpm": 1}, allow))
		e.denied("on_unavailable", svc, "POST", "/v1/reservations", map[string]any{"id": "r1", "entity": "k", "resource": "api",
			"consume": map[string]int64{"jobs": 1, "rpm": 1}, "on_unavailable": "allow"})
		e.want(http.StatusNotFound, svc, "GET", "/v1/reservations/r1", nil, nil) // nothing reserved
		if got := e.available("k", "api", "rpm"); got != 100 {
			t.Errorf("rpm available = %d, want 100: a refused call debited", got)
		}
		e.want(http.StatusOK, svc, "POST", "/v1/acquire", acquire("k", "api", map[string]int64{"rpm": 1}, block), nil)
		e.want(http.StatusOK, ops, "POST", "/v1/acquire", acquire("k", "api", map[string]int64{"rpm": 1}, allow), nil)
		e.want(http.StatusOK, ops, "PUT", "/v1/limits/system", map[string]any{"limits": []string{"rpm:100/min"}, "on_unavailable": "allow"}, nil)
		e.want(http.StatusOK, svc, "POST", "/v1/acquire", acquire("k", "api", map[string]int64{"rpm": 1}, allow), nil)
	})
}

// A key confined to an entity penalizes inside its scope only, and an
// admin's reset lifts a penalty.
func TestProbePenaltyConfinedAndUndone(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(t *testing.T) (a, b store.Store)) {
		e := newEnv(t, open)
		ops := e.keys["ops"]
		for _, ent := range []map[string]any{{"id": "org-1"}, {"id": "key-1", "parent_id": "org-1"}, {"id": "org-2"}} {
			e.want(http.StatusCreated, ops, "POST", "/v1/entities", ent, nil)
		}
		e.setLimits("/v1/limits/resources/api", "rpm:100/min")
		var k api.CreatedKey
		e.want(http.StatusCreated, ops, "POST", "/v1/keys", map[string]any{"name": "gw-1", "role": "acquire", "entity": "org-1"}, &k)
		day := map[string]any{"resource": "api", "retry_after_ms": 86_400_000, "limits": []string{"rpm"}}
		day["entity"] = "org-2"
		e.denied("entity", k.Secret, "POST", "/v1/penalize", day)
		day["entity"] = "key-1"
		e.want(http.StatusNoContent, k.Secret, "POST", "/v1/penalize", day, nil)
		e.want(http.StatusTooManyRequests, k.Secret, "POST", "/v1/acquire", acquire("key-1", "api", map[string]int64{"rpm": 1}), nil)
		e.want(http.StatusForbidden, k.Secret, "POST", "/v1/reset", map[string]any{"entity": "key-1", "resource": "api"}, nil)
		e.want(http.StatusNoContent, ops, "POST", "/v1/reset", map[string]any{"entity": "key-1", "resource": "api", "reason": "vendor back"}, nil)
		e.want(http.StatusOK, k.Secret, "POST", "/v1/acquire", acquire("key-1", "api", map[string]int64{"rpm": 1}), nil)
		if got := e.available("org-2", "api", "rpm"); got != 100 {
			t.Errorf("org-2 rpm = %d, want 100: the refused penalty emptied it", got)
		}
		var audit api.AuditResponse
		e.want(http.StatusOK, ops, "GET", "/v1/audit?entity=key-1", nil, &audit)
		if n := len(audit.Events); n != 3 || audit.Events[1].Action != "limit.penalize" || audit.Events[2].Action != "limit.reset" ||
			audit.Events[2].Principal != "ops" || audit.Events[1].Principal != "gw-1" {
			t.Errorf("audit of key-1: %+v, want its creation, the penalty by gw-1 and the reset by ops", audit.Events)
		}
	})
}

// A key confined to an entity reaches that entity and its descendants,
// and nothing else: entities beyond are 403, their leases and
// reservations 404, listings must name an entity in scope, and the routes
// beyond any entity are 403.
func TestProbeEntityScope(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(t *testing.T) (a, b store.Store)) {
		e := newEnv(t, open)
		ops := e.keys["ops"]
		for _, ent := range []map[string]any{{"id": "org-1"}, {"id": "key-1", "parent_id": "org-1"}, {"id": "org-2"}} {
			e.want(http.StatusCreated, ops, "POST", "/v1/entities", ent, nil)
		}
		e.setLimits("/v1/limits/resources/api", "rpm:100/min", "slots:5/concurrent", "jobs:5/reserved")
		var acq, rd api.CreatedKey
		e.want(http.StatusCreated, ops, "POST", "/v1/keys", map[string]any{"name": "gw-1", "role": "acquire", "entity": "org-1"}, &acq)
		e.want(http.StatusCreated, ops, "POST", "/v1/keys", map[string]any{"name": "rd-1", "role": "read", "entity": "org-1"}, &rd)

		var other api.AcquireResponse
		e.want(http.StatusOK, ops, "POST", "/v1/acquire", acquire("org-2", "api", map[string]int64{"slots": 1}, held), &other)
		e.want(http.StatusCreated, ops, "POST", "/v1/reservations", map[string]any{"id": "r-2", "entity": "org-2", "resource": "api"}, nil)

		e.want(http.StatusOK, acq.Secret, "POST", "/v1/acquire", acquire("key-1", "api", map[string]int64{"rpm": 1}), nil)
		e.denied("entity", acq.Secret, "POST", "/v1/acquire", acquire("org-2", "api", map[string]int64{"rpm": 1}))
		e.denied("entity", acq.Secret, "POST", "/v1/acquire", acquire("unknown", "api", map[string]int64{"rpm": 1}))
		if got := e.available("org-2", "api", "rpm"); got != 100 {
			t.Errorf("org-2 rpm = %d, want 100", got)
		}
		for _, path := range []string{"", "/adjust", "/extend", "/commit", "/rollback"} {
			method := "POST"
			if path == "" {
				method = "GET"
			}
			a := e.call(e.a, acq.Secret, method, "/v1/leases/"+other.LeaseID+path, map[string]any{})
			if a.status != http.StatusNotFound {
				t.Errorf("%s lease of org-2%s: status %d, want 404; %s", method, path, a.status, a.body)
			}
		}
		a := e.call(e.a, acq.Secret, "POST", "/v1/leases/"+other.LeaseID+"/penalize", map[string]any{"retry_after_ms": 86_400_000, "limits": []string{"rpm"}})
		if a.status != http.StatusNotFound {
			t.Errorf("penalize through a lease of org-2: status %d, want 404; %s", a.status, a.body)
		}
		if got := e.available("org-2", "api", "rpm"); got != 100 {
			t.Errorf("org-2 rpm = %d after a penalty through its lease, want 100", got)
		}
		for _, m := range []string{"GET", "DELETE"} {
			if a := e.call(e.a, acq.Secret, m, "/v1/reservations/r-2", nil); a.status != http.StatusNotFound {
				t.Errorf("%s reservation of org-2: status %d, want 404", m, a.status)
			}
		}
		e.want(http.StatusCreated, acq.Secret, "POST", "/v1/reservations", map[string]any{"id": "r-1", "entity": "key-1", "resource": "api"}, nil)
		e.denied("entity", acq.Secret, "POST", "/v1/reservations", map[string]any{"id": "r-3", "entity": "org-2", "resource": "api"})
		e.denied("entity", acq.Secret, "GET", "/v1/leases", nil)
		e.denied("entity", acq.Secret, "GET", "/v1/reservations", nil)
		e.want(http.StatusOK, acq.Secret, "GET", "/v1/reservations?entity=key-1", nil, nil)
		e.denied("entity", acq.Secret, "GET", "/v1/available?entity=org-2&resource=api", nil)

		e.want(http.StatusOK, rd.Secret, "GET", "/v1/entities/key-1", nil, nil)
		e.want(http.StatusOK, rd.Secret, "GET", "/v1/entities/org-1/children", nil, nil)
		e.want(http.StatusOK, rd.Secret, "GET", "/v1/audit?entity=key-1", nil, nil)
		e.setLimits("/v1/limits/entities/key-1", "rpm:50/min")
		e.want(http.StatusOK, rd.Secret, "GET", "/v1/limits/entities/key-1", nil, nil)
		e.want(http.StatusOK, rd.Secret, "GET", "/v1/usage?entity=key-1", nil, nil)
		e.want(http.StatusOK, rd.Secret, "GET", "/v1/available?entity=key-1&resource=api", nil, nil)
		e.denied("entity", rd.Secret, "GET", "/v1/usage?entity=org-2", nil)
		e.denied("entity", rd.Secret, "GET", "/v1/entities/org-2", nil)
		e.denied("entity", rd.Secret, "GET", "/v1/limits/entities/org-2", nil)
		e.denied("entity", rd.Secret, "GET", "/v1/audit", nil)
		e.denied("entity", rd.Secret, "GET", "/v1/usage?resource=api", nil)
		for _, path := range []string{"/v1/entities", "/v1/limits", "/v1/limits/system", "/v1/limits/resources/api", "/v1/capacity?resource=api"} {
			if a := e.call(e.a, rd.Secret, "GET", path, nil); a.status != http.StatusForbidden {
				t.Errorf("GET %s with a confined key: status %d, want 403", path, a.status)
			}
		}
	})
}

// Keys live in the store: created through one replica, they work on
// both; revoked through one, refused there at once and on the other within
// two seconds; expired, refused; every change audited, never with the
// secret.
func TestProbeStoredKeys(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(t *testing.T) (a, b store.Store)) {
		e := newEnv(t, open)
		ops := e.keys["ops"]
		var k api.CreatedKey
		e.want(http.StatusCreated, ops, "POST", "/v1/keys", map[string]any{"name": "reader-2", "role": "read", "expires_in_s": 3600}, &k)
		for _, url := range []string{e.a, e.b} {
			if a := e.call(url, k.Secret, "GET", "/v1/entities", nil); a.status != http.StatusOK {
				t.Fatalf("a new key on %s: status %d; %s", url, a.status, a.body)
			}
		}
		e.want(http.StatusForbidden, k.Secret, "POST", "/v1/keys", map[string]any{"name": "x", "role": "admin"}, nil)
		e.want(http.StatusNoContent, ops, "DELETE", "/v1/keys/reader-2", nil, nil)
		e.want(http.StatusUnauthorized, k.Secret, "GET", "/v1/entities", nil, nil)
		start := time.Now()
		for e.call(e.b, k.Secret, "GET", "/v1/entities", nil).status != http.StatusUnauthorized {
			if time.Since(start) > 2*time.Second {
				t.Fatalf("the other replica still takes the revoked key after %v", time.Since(start))
			}
			time.Sleep(10 * time.Millisecond) // polling the other replica, not waiting out a race
		}
		t.Logf("revocation in force on the other replica after %v", time.Since(start).Round(time.Millisecond))

		e.want(http.StatusCreated, ops, "POST", "/v1/keys", map[string]any{"name": "short", "role": "read", "expires_in_s": 60}, &k)
		e.want(http.StatusOK, k.Secret, "GET", "/v1/entities", nil, nil)
		e.clk.Advance(time.Minute)
		e.want(http.StatusUnauthorized, k.Secret, "GET", "/v1/entities", nil, nil)

		var audit api.AuditResponse
		e.want(http.StatusOK, ops, "GET", "/v1/audit", nil, &audit)
		var actions []string
		for _, ev := range audit.Events {
			if ev.Principal == "ops" {
				actions = append(actions, ev.Action+":"+ev.Details["name"])
			}
			for _, v := range ev.Details {
				if v == k.Secret {
					t.Errorf("an audit event holds a secret: %+v", ev)
				}
			}
		}
		if got := fmt.Sprint(actions); got != "[key.create:reader-2 key.revoke:reader-2 key.create:short]" {
			t.Errorf("audit of key changes: %s", got)
		}
	})
}

// Whatever namespaces callers name, the server keeps state only for those
// that exist: thousands of random names, with an operator key or none,
// leave its heap as it was.
func TestProbeRandomNamespacesKeepNoState(t *testing.T) {
	forEachBackendAlone(t, func(t *testing.T, open func(t *testing.T) (a, b store.Store)) {
		if testing.Short() {
			t.Skip("sends thousands of requests")
		}
		e := newEnv(t, open)
		root := e.keys["root"]
		send := func(n int) {
			for i := range n {
				req, _ := http.NewRequest("GET", e.a+"/v1/available?entity=k&resource=api&consume=bad", nil)
				req.Header.Set("Authorization", "Bearer "+root)
				req.Header.Set(api.NamespaceHeader, fmt.Sprintf("ns-%d-%s", i, randomHex(4)))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNotFound {
					t.Fatalf("a random namespace: status %d, want 404", resp.StatusCode)
				}
			}
		}
		send(200) // warm up connections and pools
		before := heapInUse()
		send(3000)
		grown := int64(heapInUse()) - int64(before)
		t.Logf("3000 random namespaces: heap %+d KiB", grown>>10)
		if grown > 8<<20 {
			t.Errorf("3000 random namespaces grew the heap by %d MiB, want under 8", grown>>20)
		}
	})
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Bodies the server cannot be sure of are refused, naming the field, and
// write nothing: null amounts, duplicate keys, a field in the wrong case,
// trailing data, an adjustment that would saturate the bucket.
func TestProbeStrictInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(t *testing.T) (a, b store.Store)) {
		e := newEnv(t, open)
		svc := e.keys["svc"]
		e.setLimits("/v1/limits/resources/api", "q:100/min")
		var lease api.AcquireResponse
		e.want(http.StatusOK, svc, "POST", "/v1/acquire", `{"entity":"k","resource":"api","consume":{"q":1}}`, &lease)
		for _, c := range []struct{ path, body, field string }{
			{"/v1/acquire", `{"entity":"k","resource":"api","consume":{"q":null}}`, "consume.q"},
			{"/v1/acquire", `{"entity":"k","resource":"api","consume":{"q":1,"q":50}}`, "consume.q"},
			{"/v1/acquire", `{"ENTITY":"k","resource":"api","consume":{"q":1}}`, "ENTITY"},
			{"/v1/acquire", `{"entity":"k","resource":"api","consume":{"q":1}} {"entity":"k"}`, "body"},
			{"/v1/leases/" + lease.LeaseID + "/adjust", `{"consume":{"q":4611686018427387}}`, "consume.q"}, // net past MaxTokens,
		} {
			a := e.call(e.a, svc, "POST", c.path, c.body)
			if got := a.err(); a.status != http.StatusBadRequest || got.Field != c.field {
				t.Errorf("%s %s: %d %+v, want 400 naming %s", c.path, c.body, a.status, got, c.field)
			}
		}
		if got := e.available("k", "api", "q"); got != 99 {
			t.Errorf("q available = %d, want 99: a refused body wrote", got)
		}
	})
}

// A server without a keys file trusts every request only while the store
// holds no key: once a key is created (here through replica A, trusted
// so far), A refuses a request without a key at once and B within 2 s,
// and the stored key works on both.
func TestProbeStoredKeysWithoutAKeysFile(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(t *testing.T) (a, b store.Store)) {
		sa, sb := open(t)
		var urls []string
		for _, st := range []store.Store{sa, sb} {
			srv, err := server.New(st, server.WithRefreshInterval(refresh), server.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			urls = append(urls, serve(t, srv))
		}
		e := &env{t: t, a: urls[0], b: urls[1]}
		for _, url := range urls {
			if a := e.call(url, "", "GET", "/v1/entities", nil); a.status != http.StatusOK {
				t.Fatalf("no key stored yet, on %s: status %d, want 200 (trusted); %s", url, a.status, a.body)
			}
		}
		var k api.CreatedKey
		e.want(http.StatusCreated, "", "POST", "/v1/keys", map[string]any{"name": "ops", "role": "admin"}, &k)
		e.want(http.StatusUnauthorized, "", "GET", "/v1/entities", nil, nil)
		e.want(http.StatusUnauthorized, "", "POST", "/v1/keys", map[string]any{"name": "x", "role": "admin"}, nil)
		start := time.Now()
		for e.call(e.b, "", "GET", "/v1/entities", nil).status != http.StatusUnauthorized {
			if time.Since(start) > 2*time.Second {
				t.Fatalf("the other replica still trusts a request without a key after %v", time.Since(start))
			}
			time.Sleep(10 * time.Millisecond) // polling the other replica, not waiting out a race
		}
		for _, url := range urls {
			if a := e.call(url, k.Secret, "GET", "/v1/entities", nil); a.status != http.StatusOK {
				t.Errorf("the stored key on %s: status %d; %s", url, a.status, a.body)
			}
		}
	})
}
