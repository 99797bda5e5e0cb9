package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/reconcile"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// replicas returns n servers over st sharing one fake clock, as replicas
// of tollgate serve behind a load balancer share a table.
func replicas(t *testing.T, st store.Store, n int, opts ...Option) []*env {
	t.Helper()
	clk := clock.NewFake(epoch)
	out := make([]*env, n)
	for i := range out {
		srv := mustServer(New(st, append([]Option{WithClock(clk), WithLogger(slog.New(slog.DiscardHandler))}, opts...)...))
		ts := httptest.NewServer(srv)
		t.Cleanup(func() { ts.Close(); _ = srv.Close(context.Background()) })
		out[i] = &env{t: t, srv: srv, ts: ts, clk: clk, hdr: http.Header{}}
	}
	return out
}

// slotBody acquires the one slot of a concurrency limit, and a rate token.
func slotBody() map[string]any {
	return map[string]any{"entity": "k", "resource": "jobs", "consume": map[string]int64{"slots": 1, "rph": 1},
		"limits": []string{"slots:1/concurrent", "rph:100/hour"}}
}

// wantSlotBackOnce checks that the one slot is free, exactly once: an
// acquire takes it, the next is denied; it then gives it back.
func wantSlotBackOnce(t *testing.T, e *env) {
	t.Helper()
	var a api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", slotBody(), &a)
	e.want(http.StatusTooManyRequests, "POST", "/v1/acquire", slotBody(), nil)
	e.want(http.StatusOK, "POST", "/v1/leases/"+a.LeaseID+"/rollback", nil, nil)
}

// Any replica serves any lease: acquired on A, adjusted on B, extended on
// A and committed on B, the lease ends once and its slot is back once.
func TestLeaseAcrossReplicas(t *testing.T) {
	rs := replicas(t, memory.New(), 2)
	a, b := rs[0], rs[1]
	var acq api.AcquireResponse
	a.want(http.StatusOK, "POST", "/v1/acquire", slotBody(), &acq)
	if len(acq.LeaseID) != 32 || acq.ExpiresMS != epoch.Add(DefaultLeaseTTL).UnixMilli() {
		t.Fatalf("acquire = %+v, want a 32-digit id expiring after the default TTL", acq)
	}
	b.want(http.StatusTooManyRequests, "POST", "/v1/acquire", slotBody(), nil)

	var lr api.LeaseResponse
	b.want(http.StatusOK, "POST", "/v1/leases/"+acq.LeaseID+"/adjust", api.AdjustRequest{Consume: map[string]int64{"rph": 4}}, &lr)
	if lr.Consumed["rph"] != 5 || lr.State != "open" || lr.Entity != "k" || lr.Resource != "jobs" {
		t.Errorf("adjust on B: %+v", lr)
	}
	a.want(http.StatusOK, "POST", "/v1/leases/"+acq.LeaseID+"/extend", api.ExtendRequest{TTLMS: 600_000}, &lr)
	if want := epoch.Add(10 * time.Minute).UnixMilli(); lr.ExpiresMS != want || lr.Consumed["rph"] != 5 {
		t.Errorf("extend on A: %+v, want expires_at_ms %d and B's adjustment", lr, want)
	}
	b.want(http.StatusOK, "GET", "/v1/leases/"+acq.LeaseID, nil, &lr)
	if lr.ExpiresMS != epoch.Add(10*time.Minute).UnixMilli() || lr.Consumed["rph"] != 5 || lr.Consumed["slots"] != 1 {
		t.Errorf("GET on B: %+v", lr)
	}
	lr = api.LeaseResponse{}
	b.want(http.StatusOK, "POST", "/v1/leases/"+acq.LeaseID+"/commit", nil, &lr)
	if lr.State != "committed" || lr.Consumed["rph"] != 5 || lr.ExpiresMS != 0 {
		t.Errorf("commit on B: %+v", lr)
	}
	a.want(http.StatusOK, "POST", "/v1/leases/"+acq.LeaseID+"/commit", nil, nil) // the first commit's answer
	b.want(http.StatusConflict, "POST", "/v1/leases/"+acq.LeaseID+"/rollback", nil, nil)

	wantSlotBackOnce(t, a)
	var av api.AvailableResponse
	b.want(http.StatusOK, "GET", "/v1/available?entity=k&resource=jobs&limits=slots:1/concurrent&limits=rph:100/hour", nil, &av)
	for _, l := range av.Limits {
		if l.Limit == "rph" && l.Available != 95 {
			t.Errorf("rph available %d, want 95 (5 committed, 1 rolled back)", l.Available)
		}
	}
}

// A server that restarts loses no lease: a new Server over the store
// commits a lease the old one granted, and its slot comes back.
func TestRestartKeepsLeases(t *testing.T) {
	st := memory.New()
	old := replicas(t, st, 1)[0]
	var acq api.AcquireResponse
	old.want(http.StatusOK, "POST", "/v1/acquire", slotBody(), &acq)
	old.ts.Close()
	if err := old.srv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	fresh := replicas(t, st, 1)[0]
	fresh.want(http.StatusTooManyRequests, "POST", "/v1/acquire", slotBody(), nil) // Close committed nothing
	fresh.want(http.StatusOK, "POST", "/v1/leases/"+acq.LeaseID+"/commit", nil, nil)
	wantSlotBackOnce(t, fresh)
}

// A lease id resolves in the request's namespace only: a key of another
// namespace, or a request naming another one, gets 404 lease_not_found,
// whether that namespace exists or not, and the lease is untouched.
func TestLeaseOfAnotherNamespaceIsNotFound(t *testing.T) {
	def, defHash := GenerateKey()
	teamA, teamAHash := GenerateKey()
	root, rootHash := GenerateKey()
	keys, err := LoadKeys(strings.NewReader(defHash + " default acquire svc allow_limits\n" + teamAHash + " team-a admin a\n" + rootHash + " * admin root\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := replicas(t, memory.New(), 1, WithKeys(keys))[0]
	as := func(key, ns string) {
		e.hdr = http.Header{"Authorization": {"Bearer " + key}}
		if ns != "" {
			e.hdr.Set(api.NamespaceHeader, ns)
		}
	}
	as(root, "")
	e.want(http.StatusCreated, "POST", "/v1/namespaces", api.Namespace{Name: "team-a"}, nil)
	as(def, "")
	var acq api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", slotBody(), &acq)

	for _, c := range []struct{ name, key, ns string }{
		{"a key of team-a", teamA, ""},
		{"a * key in team-a", root, "team-a"},
		{"a * key in an unknown namespace", root, "team-z"},
		{"a * key in an invalid namespace", root, "no/such"},
	} {
		as(c.key, c.ns)
		for _, op := range []string{"/commit", "/rollback", "/adjust", "/extend"} {
			var er api.Error
			e.want(http.StatusNotFound, "POST", "/v1/leases/"+acq.LeaseID+op, `{}`, &er)
			if er.Reason != "lease_not_found" {
				t.Errorf("%s, %s: %+v, want lease_not_found", c.name, op, er)
			}
		}
		e.want(http.StatusNotFound, "GET", "/v1/leases/"+acq.LeaseID, nil, nil)
	}
	as(def, "")
	e.want(http.StatusOK, "POST", "/v1/leases/"+acq.LeaseID+"/commit", nil, nil)
}

// An expired lease is unknown from its expiry on (by the server's clock);
// the reconciler commits it, once, and its slot comes back once, counted
// in tollgate_leases_expired_total.
func TestExpiredLeaseIsReclaimedOnce(t *testing.T) {
	st := memory.New()
	rs := replicas(t, st, 2)
	a, b := rs[0], rs[1]
	body := slotBody()
	body["lease_ttl_ms"] = 2000
	var acq api.AcquireResponse
	a.want(http.StatusOK, "POST", "/v1/acquire", body, &acq)
	if acq.ExpiresMS != epoch.Add(2*time.Second).UnixMilli() {
		t.Errorf("expires_at_ms %d, want the acquire's time + 2 s", acq.ExpiresMS)
	}
	a.clk.Advance(2 * time.Second)
	b.want(http.StatusNotFound, "POST", "/v1/leases/"+acq.LeaseID+"/commit", nil, nil)
	b.want(http.StatusNotFound, "POST", "/v1/leases/"+acq.LeaseID+"/extend", `{}`, nil)
	a.want(http.StatusTooManyRequests, "POST", "/v1/acquire", slotBody(), nil) // not reclaimed yet

	// One reconciler per replica, as tollgate serve runs them.
	ctx := context.Background()
	total := 0
	for _, e := range rs {
		r, err := reconcile.New(st, reconcile.WithClock(e.clk), reconcile.WithOnReclaim(e.srv.OnReclaim))
		if err != nil {
			t.Fatal(err)
		}
		n, err := r.Once(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total != 1 {
		t.Errorf("reconcilers reclaimed %d leases, want 1", total)
	}
	if got, want := a.metric("tollgate_leases_expired_total")+b.metric("tollgate_leases_expired_total"),
		"tollgate_leases_expired_total 1"+"tollgate_leases_expired_total 0"; got != want {
		t.Errorf("metrics %q, want %q", got, want)
	}
	var er api.Error
	a.want(http.StatusConflict, "POST", "/v1/leases/"+acq.LeaseID+"/commit", nil, &er)
	if er.Reason != "lease_closed" || er.Ended != "expired" {
		t.Errorf("commit after the reconciler: %+v, want lease_closed, expired", er)
	}
	wantSlotBackOnce(t, b)
}

// extend takes ttl_ms bounded as lease_ttl_ms is; 0 or absent is the
// server's default.
func TestExtendTTL(t *testing.T) {
	e := replicas(t, memory.New(), 1, WithLeaseTTL(time.Minute))[0]
	var acq api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", slotBody(), &acq)
	for _, c := range []struct {
		body   string
		status int
		want   time.Duration // expiry after epoch
	}{
		{`{}`, http.StatusOK, time.Minute},
		{`{"ttl_ms":86400000}`, http.StatusOK, 24 * time.Hour},
		{`{"ttl_ms":1000}`, http.StatusOK, time.Second},
		{`{"ttl_ms":999}`, http.StatusBadRequest, 0},
		{`{"ttl_ms":86400001}`, http.StatusBadRequest, 0},
		{`{"ttl":1000}`, http.StatusBadRequest, 0},
		{``, http.StatusBadRequest, 0},
	} {
		var raw struct {
			api.LeaseResponse
			api.Error
		}
		e.want(c.status, "POST", "/v1/leases/"+acq.LeaseID+"/extend", c.body, &raw)
		if c.status == http.StatusOK && raw.ExpiresMS != epoch.Add(c.want).UnixMilli() {
			t.Errorf("extend %s: expires_at_ms %d, want now + %v", c.body, raw.ExpiresMS, c.want)
		}
		if c.status == http.StatusBadRequest && raw.Code != api.CodeInvalidArgument {
			t.Errorf("extend %s: %+v, want invalid_argument", c.body, raw.Error)
		}
	}
}

// An acquire with commit writes no lease record that outlives it, with
// or without a concurrency limit.
func TestCommitLeavesNoRecord(t *testing.T) {
	st := memory.New()
	e := replicas(t, st, 1)[0]
	for _, limits := range [][]string{{"rph:100/hour"}, {"slots:1/concurrent", "rph:100/hour"}} {
		body := map[string]any{"entity": "k", "resource": "jobs", "consume": map[string]int64{"rph": 1}, "limits": limits, "commit": true}
		if len(limits) == 2 {
			body["consume"] = map[string]int64{"rph": 1, "slots": 1}
		}
		var acq api.AcquireResponse
		e.want(http.StatusOK, "POST", "/v1/acquire", body, &acq)
		if acq.LeaseID != "" || acq.ExpiresMS != 0 {
			t.Errorf("%v: %+v, want no lease", limits, acq)
		}
	}
	var ns api.Namespace
	e.want(http.StatusOK, "GET", "/v1/namespaces/default", nil, &ns)
	recs, _, err := st.ListLeases(context.Background(), ns.ID, store.LeaseQuery{Limit: store.MaxLeasePage})
	if err != nil || len(recs) != 0 {
		t.Errorf("lease records left: %+v, %v", recs, err)
	}
	wantSlotBackOnce(t, e)
}

// A degraded lease has no record: its id says so, and its routes answer
// from the id alone on any server, writing nothing.
func TestDegradedLeaseRoutes(t *testing.T) {
	ds := &downStore{Store: memory.New()}
	e := newEnvOver(t, ds)
	e.want(http.StatusOK, "POST", "/v1/acquire", acquireBody("rpm:5/min"), nil) // caches the namespace
	ds.down.Store(true)
	body := acquireBody("rpm:5/min")
	body["on_unavailable"] = "allow"
	var acq api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", body, &acq)
	if !acq.Degraded || !strings.HasPrefix(acq.LeaseID, degradedPrefix) || acq.ExpiresMS != 0 {
		t.Fatalf("degraded acquire: %+v", acq)
	}
	other := newEnv(t) // another server, over another store even
	var lr api.LeaseResponse
	other.want(http.StatusOK, "GET", "/v1/leases/"+acq.LeaseID, nil, &lr)
	other.want(http.StatusOK, "POST", "/v1/leases/"+acq.LeaseID+"/adjust", api.AdjustRequest{Consume: map[string]int64{"rpm": -3}}, &lr)
	other.want(http.StatusBadRequest, "POST", "/v1/leases/"+acq.LeaseID+"/adjust", `{"consume":{"rpm":9223372036854775807}}`, nil)
	other.want(http.StatusOK, "POST", "/v1/leases/"+acq.LeaseID+"/extend", `{"ttl_ms":5000}`, &lr)
	other.want(http.StatusOK, "POST", "/v1/leases/"+acq.LeaseID+"/commit", nil, &lr)
	if lr.State != "committed" || len(lr.Consumed) != 0 || lr.LeaseID != acq.LeaseID {
		t.Errorf("commit of a degraded lease: %+v", lr)
	}
	other.want(http.StatusNotFound, "POST", "/v1/leases/"+degradedPrefix+"xyz/commit", nil, nil)
}
