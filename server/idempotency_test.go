package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// An acquire retried with its Idempotency-Key, on any replica, answers the
// first grant again and debits once; with commit too; the key with another
// request is a 409.
func TestIdempotencyKeyAcrossReplicas(t *testing.T) {
	rs := replicas(t, memory.New(), 2)
	a, b := rs[0], rs[1]
	a.want(http.StatusOK, "PUT", "/v1/limits/resources/api", api.Limits{Limits: []string{"rpm:10/min"}}, nil)
	body := map[string]any{"entity": "key-1", "resource": "api", "consume": map[string]int64{"rpm": 3}}
	a.hdr.Set(api.IdempotencyKeyHeader, "order-1")
	b.hdr.Set(api.IdempotencyKeyHeader, "order-1")
	var first, again api.AcquireResponse
	if h := a.want(http.StatusOK, "POST", "/v1/acquire", body, &first); h.Get(api.ReplayedHeader) != "" {
		t.Errorf("first answer marked replayed")
	}
	h := b.want(http.StatusOK, "POST", "/v1/acquire", body, &again)
	if h.Get(api.ReplayedHeader) != "true" || again.LeaseID != first.LeaseID || again.Consumed["rpm"] != 3 || again.ExpiresMS != first.ExpiresMS {
		t.Errorf("retry on B: %+v (header %q), want the first grant %+v replayed", again, h.Get(api.ReplayedHeader), first)
	}
	var av api.AvailableResponse
	a.want(http.StatusOK, "GET", "/v1/available?entity=key-1&resource=api", nil, &av)
	if av.Limits[0].Available != 7 {
		t.Errorf("available %d, want 7: debited once", av.Limits[0].Available)
	}
	other := map[string]any{"entity": "key-1", "resource": "api", "consume": map[string]int64{"rpm": 4}}
	var er api.Error
	b.want(http.StatusConflict, "POST", "/v1/acquire", other, &er)
	if er.Reason != "idempotency_key_reused" {
		t.Errorf("the key with another request: %+v", er)
	}

	// With commit: granted, committed and remembered in one step.
	commit := map[string]any{"entity": "key-1", "resource": "api", "consume": map[string]int64{"rpm": 2}, "commit": true}
	a.hdr.Set(api.IdempotencyKeyHeader, "order-2")
	b.hdr.Set(api.IdempotencyKeyHeader, "order-2")
	var c1, c2 api.AcquireResponse
	a.want(http.StatusOK, "POST", "/v1/acquire", commit, &c1)
	h = b.want(http.StatusOK, "POST", "/v1/acquire", commit, &c2)
	if h.Get(api.ReplayedHeader) != "true" || c1.LeaseID != "" || c2.LeaseID != "" || c2.Consumed["rpm"] != 2 {
		t.Errorf("commit: first %+v, retry %+v (header %q)", c1, c2, h.Get(api.ReplayedHeader))
	}
	a.hdr.Del(api.IdempotencyKeyHeader)
	a.want(http.StatusOK, "GET", "/v1/available?entity=key-1&resource=api", nil, &av)
	if av.Limits[0].Available != 5 {
		t.Errorf("available %d, want 5", av.Limits[0].Available)
	}

	// The first lease's commit, lost and sent again: the same answer.
	var end1, end2 api.LeaseResponse
	a.want(http.StatusOK, "POST", "/v1/leases/"+first.LeaseID+"/commit", nil, &end1)
	b.want(http.StatusOK, "POST", "/v1/leases/"+first.LeaseID+"/commit", nil, &end2)
	if end1.Consumed["rpm"] != 3 || end2.Consumed["rpm"] != 3 || end2.State != "committed" {
		t.Errorf("commit %+v, again %+v", end1, end2)
	}
	b.hdr.Set(api.IdempotencyKeyHeader, "order-1")
	b.want(http.StatusConflict, "POST", "/v1/acquire", body, &er)
	if er.Reason != "lease_closed" || er.Ended != "committed" {
		t.Errorf("the key of a lease committed since: %+v", er)
	}
	b.hdr.Set(api.IdempotencyKeyHeader, strings.Repeat("k", 300))
	b.want(http.StatusBadRequest, "POST", "/v1/acquire", body, &er)
	if er.Field != "idempotency_key" {
		t.Errorf("a key too long: %+v", er)
	}
}
