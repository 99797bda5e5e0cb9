package server

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// Deleting a namespace first commits its open leases, as a graceful stop
// does: pending adjustments are written, concurrency slots come back, and
// the ids are unknown afterwards (also after a purge).
func TestDeleteNamespaceCommitsItsLeases(t *testing.T) {
	e := newEnv(t)
	e.want(http.StatusCreated, "POST", "/v1/namespaces", api.Namespace{Name: "team-b"}, nil)
	e.hdr.Set(api.NamespaceHeader, "team-b")
	slot := map[string]any{"entity": "k", "resource": "jobs", "consume": map[string]int64{"slots": 1, "rph": 1},
		"limits": []string{"slots:1/concurrent", "rph:10/hour"}}
	var a api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", slot, &a)
	e.want(http.StatusOK, "POST", "/v1/leases/"+a.LeaseID+"/adjust", api.AdjustRequest{Consume: map[string]int64{"rph": 2}}, nil)
	e.want(http.StatusTooManyRequests, "POST", "/v1/acquire", slot, nil)
	// A lease of another namespace is left alone.
	e.hdr.Del(api.NamespaceHeader)
	var other api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", slot, &other)

	e.want(http.StatusNoContent, "DELETE", "/v1/namespaces/team-b", nil, nil)
	e.hdr.Set(api.NamespaceHeader, "team-b")
	var er api.Error
	e.want(http.StatusNotFound, "POST", "/v1/leases/"+a.LeaseID+"/commit", nil, &er)
	if er.Reason != "lease_not_found" {
		t.Errorf("commit after the delete: %+v", er)
	}
	if n := e.srv.leases.open(); n != 1 {
		t.Errorf("%d open leases after the delete, want 1 (the default namespace's)", n)
	}
	// The commit happened: recovered, the slot is free and the adjustment
	// was written (1 + 2 of 10 per hour).
	e.hdr.Del(api.NamespaceHeader)
	e.want(http.StatusNoContent, "POST", "/v1/namespaces/team-b/recover", nil, nil)
	e.hdr.Set(api.NamespaceHeader, "team-b")
	var av api.AvailableResponse
	e.want(http.StatusOK, "GET", "/v1/available?entity=k&resource=jobs&limits=slots:1/concurrent&limits=rph:10/hour", nil, &av)
	for _, l := range av.Limits {
		if want := map[string]int64{"slots": 1, "rph": 7}[l.Limit]; l.Available != want {
			t.Errorf("%s available %d after the delete, want %d", l.Limit, l.Available, want)
		}
	}
	e.hdr.Del(api.NamespaceHeader)
	e.want(http.StatusOK, "POST", "/v1/leases/"+other.LeaseID+"/commit", nil, nil)
}

// A lease that outlives the delete (acquired while it ran) is dropped by
// the purge without writing: neither its client nor the reaper can write
// under the purged namespace's id.
func TestPurgeDropsLeasesWithoutWriting(t *testing.T) {
	st := memory.New()
	e := newEnvOver(t, st)
	e.want(http.StatusCreated, "POST", "/v1/namespaces", api.Namespace{Name: "team-b"}, nil)
	var ns api.Namespace
	e.want(http.StatusOK, "GET", "/v1/namespaces/team-b", nil, &ns)
	lim, err := e.srv.Limiter("team-b")
	if err != nil {
		t.Fatal(err)
	}
	le, err := lim.Acquire(context.Background(), "k", "jobs", tollgate.Consume{"slots": 1},
		tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", 1)))
	if err != nil {
		t.Fatal(err)
	}
	e.want(http.StatusNoContent, "DELETE", "/v1/namespaces/team-b", nil, nil)
	// The acquire's answer comes after the delete swept the leases.
	if !e.srv.leases.reserve("team-b") {
		t.Fatal("no lease slot")
	}
	l := e.srv.leases.add("team-b", le, e.clk.Now().Add(time.Second))
	e.want(http.StatusOK, "POST", "/v1/namespaces/team-b/purge", nil, nil)

	e.hdr.Set(api.NamespaceHeader, "team-b")
	e.want(http.StatusNotFound, "POST", "/v1/leases/"+l.id+"/commit", nil, nil)
	e.want(http.StatusNotFound, "POST", "/v1/leases/"+l.id+"/rollback", nil, nil)
	e.clk.Advance(2 * time.Second) // past the lease's TTL
	e.reapRound()
	if err := e.srv.commitLease(context.Background(), l); err != nil {
		t.Errorf("commitLease of a dropped lease: %v", err)
	}
	recs, err := st.ReadBuckets(context.Background(), ns.ID, []store.BucketKey{{Entity: "k", Resource: "jobs"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 1 && recs[0] != nil {
		t.Errorf("a bucket was written under the purged namespace's id: %+v", recs[0])
	}
	if n := e.srv.leases.open(); n != 0 {
		t.Errorf("%d open leases after the purge, want 0", n)
	}
}

// A limiter the server handed out before a namespace change, as to a
// request in flight, sees the change at once despite its long cache TTL.
func TestNamespaceChangesReachLimitersInUse(t *testing.T) {
	e := newEnv(t, WithLimiterOptions(tollgate.WithCacheTTL(time.Hour)))
	e.want(http.StatusCreated, "POST", "/v1/namespaces", api.Namespace{Name: "team-b"}, nil)
	steps := []struct {
		method, path string
		status       int
		want         error // of an acquire through the limiter taken before
	}{
		{"DELETE", "/v1/namespaces/team-b", http.StatusNoContent, tollgate.ErrNamespaceDeleted},
		{"POST", "/v1/namespaces/team-b/recover", http.StatusNoContent, nil},
		{"DELETE", "/v1/namespaces/team-b", http.StatusNoContent, tollgate.ErrNamespaceDeleted},
		{"POST", "/v1/namespaces/team-b/purge", http.StatusOK, tollgate.ErrNamespaceNotFound},
		{"POST", "/v1/namespaces", http.StatusCreated, nil},
	}
	ctx := context.Background()
	acquire := func(lim *tollgate.Limiter) error {
		le, err := lim.Acquire(ctx, "k", "jobs", tollgate.Consume{"rph": 1}, tollgate.WithLimits(tollgate.PerHour("rph", 100)))
		if err != nil {
			return err
		}
		return le.Commit(ctx)
	}
	for _, st := range steps {
		lim, err := e.srv.Limiter("team-b")
		if err != nil {
			t.Fatal(err)
		}
		_ = acquire(lim) // caches the namespace, or that it is gone
		var body any
		if st.method == "POST" && st.path == "/v1/namespaces" {
			body = api.Namespace{Name: "team-b"}
		}
		e.want(st.status, st.method, st.path, body, nil)
		if err := acquire(lim); (st.want == nil && err != nil) || !errors.Is(err, st.want) {
			t.Errorf("after %s %s: acquire err = %v, want %v", st.method, st.path, err, st.want)
		}
	}
}
