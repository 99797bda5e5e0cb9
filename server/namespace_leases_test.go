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

// Deleting a namespace leaves its leases in the store: while it is
// deleted they are unknown, and once it is recovered they are back as they
// were, pending adjustments included, to be committed by any server.
func TestDeleteNamespaceKeepsItsLeases(t *testing.T) {
	e := newEnv(t)
	e.want(http.StatusCreated, "POST", "/v1/namespaces", api.Namespace{Name: "team-b"}, nil)
	e.hdr.Set(api.NamespaceHeader, "team-b")
	slot := map[string]any{"entity": "k", "resource": "jobs", "consume": map[string]int64{"slots": 1, "rph": 1},
		"limits": []string{"slots:1/concurrent", "rph:10/hour"}}
	var a api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", slot, &a)
	e.want(http.StatusOK, "POST", "/v1/leases/"+a.LeaseID+"/adjust", api.AdjustRequest{Consume: map[string]int64{"rph": 2}}, nil)

	e.hdr.Del(api.NamespaceHeader)
	e.want(http.StatusNoContent, "DELETE", "/v1/namespaces/team-b", nil, nil)
	e.hdr.Set(api.NamespaceHeader, "team-b")
	var er api.Error
	e.want(http.StatusNotFound, "POST", "/v1/leases/"+a.LeaseID+"/commit", nil, &er)
	if er.Reason != "lease_not_found" {
		t.Errorf("commit while deleted: %+v, want lease_not_found", er)
	}

	e.hdr.Del(api.NamespaceHeader)
	e.want(http.StatusNoContent, "POST", "/v1/namespaces/team-b/recover", nil, nil)
	e.hdr.Set(api.NamespaceHeader, "team-b")
	e.want(http.StatusTooManyRequests, "POST", "/v1/acquire", slot, nil) // the slot is still held
	var lr api.LeaseResponse
	e.want(http.StatusOK, "POST", "/v1/leases/"+a.LeaseID+"/commit", nil, &lr)
	if lr.Consumed["rph"] != 3 {
		t.Errorf("committed %v, want rph 3 (1 and the adjustment of 2)", lr.Consumed)
	}
	var av api.AvailableResponse
	e.want(http.StatusOK, "GET", "/v1/available?entity=k&resource=jobs&limits=slots:1/concurrent&limits=rph:10/hour", nil, &av)
	for _, l := range av.Limits {
		if want := map[string]int64{"slots": 1, "rph": 7}[l.Limit]; l.Available != want {
			t.Errorf("%s available %d after the commit, want %d", l.Limit, l.Available, want)
		}
	}
}

// A purge deletes the namespace's lease records with its other data: the
// ids are unknown afterwards, also in a namespace registered again under
// the name, and nothing is left under the purged namespace's id.
func TestPurgeDeletesLeaseRecords(t *testing.T) {
	st := memory.New()
	e := newEnvOver(t, st)
	e.want(http.StatusCreated, "POST", "/v1/namespaces", api.Namespace{Name: "team-b"}, nil)
	var ns api.Namespace
	e.want(http.StatusOK, "GET", "/v1/namespaces/team-b", nil, &ns)
	e.hdr.Set(api.NamespaceHeader, "team-b")
	var a api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", map[string]any{"entity": "k", "resource": "jobs",
		"consume": map[string]int64{"slots": 1}, "limits": []string{"slots:1/concurrent"}}, &a)
	e.hdr.Del(api.NamespaceHeader)
	e.want(http.StatusNoContent, "DELETE", "/v1/namespaces/team-b", nil, nil)
	e.want(http.StatusOK, "POST", "/v1/namespaces/team-b/purge", nil, nil)
	e.want(http.StatusCreated, "POST", "/v1/namespaces", api.Namespace{Name: "team-b"}, nil)

	e.hdr.Set(api.NamespaceHeader, "team-b")
	e.want(http.StatusNotFound, "POST", "/v1/leases/"+a.LeaseID+"/commit", nil, nil)
	e.want(http.StatusNotFound, "POST", "/v1/leases/"+a.LeaseID+"/rollback", nil, nil)
	recs, _, err := st.ListLeases(context.Background(), ns.ID, store.LeaseQuery{Limit: store.MaxLeasePage})
	if err != nil || len(recs) != 0 {
		t.Errorf("lease records under the purged namespace's id: %+v, %v", recs, err)
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
	lim, err := e.srv.Limiter(ctx, "team-b") // held throughout, as by a request in flight
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
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

// GET /v1/leases lists the leases of the caller's namespace only, with
// what each holds.
func TestListLeasesOfTheNamespace(t *testing.T) {
	e := newEnv(t)
	e.want(http.StatusCreated, "POST", "/v1/namespaces", api.Namespace{Name: "team-b"}, nil)
	slot := map[string]any{"entity": "k", "resource": "jobs", "consume": map[string]int64{"slots": 1},
		"limits": []string{"slots:2/concurrent"}}
	var a api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", slot, &a)
	var page api.LeasesResponse
	e.want(http.StatusOK, "GET", "/v1/leases?entity=k", nil, &page)
	if len(page.Leases) != 1 || page.Leases[0].LeaseID != a.LeaseID || page.Leases[0].Consumed["slots"] != 1 ||
		page.Leases[0].ExpiresAtMS == 0 || page.Next != "" {
		t.Fatalf("default namespace: %+v, want the one lease", page)
	}
	e.hdr.Set(api.NamespaceHeader, "team-b")
	page = api.LeasesResponse{}
	e.want(http.StatusOK, "GET", "/v1/leases", nil, &page)
	if page.Leases == nil || len(page.Leases) != 0 {
		t.Fatalf("team-b: %+v, want an empty list (not null)", page)
	}
}
