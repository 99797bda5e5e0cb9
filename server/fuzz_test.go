package server

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// countingStore counts the calls that changed the store (the mutating calls
// that succeeded).
type countingStore struct {
	store.Store
	writes atomic.Int64
}

func (c *countingStore) count(err error) error {
	if err == nil {
		c.writes.Add(1)
	}
	return err
}

func (c *countingStore) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	ok, err := c.Store.Consume(ctx, ns, req)
	if ok {
		c.writes.Add(1)
	}
	return ok, err
}

func (c *countingStore) ApplyDeltas(ctx context.Context, ns string, deltas []store.Delta) error {
	return c.count(c.Store.ApplyDeltas(ctx, ns, deltas))
}

func (c *countingStore) UpdateLease(ctx context.Context, ns string, rec store.LeaseRecord) error {
	return c.count(c.Store.UpdateLease(ctx, ns, rec))
}

func (c *countingStore) EndLease(ctx context.Context, ns string, e store.LeaseEnding) error {
	return c.count(c.Store.EndLease(ctx, ns, e))
}

func (c *countingStore) PutConfig(ctx context.Context, ns string, scope model.Scope, cfg model.Config, ev model.AuditEvent, pre ...store.Precondition) error {
	return c.count(c.Store.PutConfig(ctx, ns, scope, cfg, ev, pre...))
}

func (c *countingStore) DeleteConfig(ctx context.Context, ns string, scope model.Scope, ev model.AuditEvent, pre ...store.Precondition) error {
	return c.count(c.Store.DeleteConfig(ctx, ns, scope, ev, pre...))
}

func (c *countingStore) CreateEntity(ctx context.Context, ns string, e model.Entity, ev model.AuditEvent) error {
	return c.count(c.Store.CreateEntity(ctx, ns, e, ev))
}

func (c *countingStore) DeleteEntity(ctx context.Context, ns, id string, ev model.AuditEvent, pre ...store.Precondition) error {
	return c.count(c.Store.DeleteEntity(ctx, ns, id, ev, pre...))
}

func (c *countingStore) CreateNamespace(ctx context.Context, n model.Namespace) error {
	return c.count(c.Store.CreateNamespace(ctx, n))
}

func (c *countingStore) SetNamespaceDeleted(ctx context.Context, name string, at time.Time) error {
	return c.count(c.Store.SetNamespaceDeleted(ctx, name, at))
}

// The store.AuditLog of the wrapped store (memory), its one write
// counted.
func (c *countingStore) SetAuditRetention(ctx context.Context, name string, d time.Duration) error {
	return c.count(c.Store.(store.AuditLog).SetAuditRetention(ctx, name, d))
}

func (c *countingStore) ListAuditRange(ctx context.Context, ns string, q store.AuditRange) ([]model.AuditEvent, error) {
	return c.Store.(store.AuditLog).ListAuditRange(ctx, ns, q)
}

func (c *countingStore) SweepAudit(ctx context.Context, ns string, before time.Time, limit int) (int, error) {
	n, err := c.Store.(store.AuditLog).SweepAudit(ctx, ns, before, limit)
	return n, c.count(err)
}

// fuzzBodies sends each fuzzed body to method path and checks that the
// answer is below 500, that a failure is a JSON error body, and that
// nothing but a success wrote to the store.
func fuzzBodies(f *testing.F, method, path string, seeds []string) {
	fuzzBodiesAround(f, method, path, seeds, nil, nil, nil)
}

// fuzzBodiesAround is fuzzBodies with hooks: setUp returns the rest of the
// path; before runs before each request, after checks what it did.
func fuzzBodiesAround(f *testing.F, method, path string, seeds []string, setUp func(e *env) string,
	before func(), after func(t *testing.T, status int)) {
	for _, s := range append(seeds, ``, `{`, `[]`, `null`, `{"x":1}`, "\x00", `{} {}`) {
		f.Add(s)
	}
	cs := &countingStore{Store: memory.New()}
	e := newEnvOver(f, cs)
	// The default namespace is registered on first use, a write that a
	// refused body must not be blamed for, whichever input comes first
	// (each fuzzing worker has an env of its own).
	e.want(http.StatusOK, "GET", "/v1/entities", nil, nil)
	if setUp != nil {
		path += setUp(e)
	}
	f.Fuzz(func(t *testing.T, body string) {
		e.t = t
		writes := cs.writes.Load()
		if before != nil {
			before()
		}
		var raw json.RawMessage
		status, _ := e.do(method, path, body, &raw)
		if after != nil {
			after(t, status)
		}
		if status >= 500 {
			t.Fatalf("status %d for %q: %s", status, body, raw)
		}
		if status >= 300 {
			var er api.Error
			if err := json.Unmarshal(raw, &er); err != nil || er.Code == "" {
				t.Fatalf("status %d without an error body: %s", status, raw)
			}
			if n := cs.writes.Load() - writes; n != 0 {
				t.Fatalf("a %d (%s) wrote to the store %d times; body %q", status, raw, n, body)
			}
		}
	})
}

func FuzzEntityBody(f *testing.F) {
	fuzzBodies(f, "POST", "/v1/entities", []string{
		`{"id":"org-1","name":"Acme"}`,
		`{"id":"key-1","parent_id":"org-1","cascade":true,"metadata":{"team":"a"}}`,
		`{"id":"k","cascade":true}`, `{"id":"k k"}`, `{"id":"k","parent_id":"k"}`, `{"id":"k","metadata":{"":"x"}}`,
		`{"id":"k","created_at_ms":-1}`,
		`{"id":"k","metadata":{"team":null}}`, `{"id":"k","metadata":{"team":"a","team":"b"}}`, `{"id":"k","id":"j"}`,
		`{"ID":"k"}`, `{"id":"k","parentId":"org-1"}`, `{"id":"k","name":null}`,
	})
}

func FuzzLimitsBody(f *testing.F) {
	fuzzBodies(f, "PUT", "/v1/limits/resources/api", []string{
		`{"limits":["rpm:100/min","tpm:10000/min:15000"]}`, `{"limits":[]}`, `{}`,
		`{"limits":["rpm:1","rpm:2"]}`, `{"limits":["rpm:lots"]}`, `{"limits":["x:1/concurrent"],"on_unavailable":"allow"}`,
		`{"limits":["rpm:99999999999999999999"]}`, `{"limits":[1]}`,
		`{"limits":null}`, `{"limits":["rpm:1",null]}`, `{"limits":["rpm:1"],"limits":["rpm:2"]}`, `{"Limits":["rpm:1"]}`,
	})
}

func FuzzSystemLimitsBody(f *testing.F) {
	fuzzBodies(f, "PUT", "/v1/limits/system", []string{
		`{"limits":["rpm:100/min"],"on_unavailable":"allow"}`, `{"limits":[],"on_unavailable":"block"}`,
		`{"on_unavailable":"maybe"}`, `{"limits":["rpm:1/0min"]}`,
		`{"limits":[],"on_unavailable":null}`, `{"limits":[],"on_unavailable":"block","on_unavailable":"allow"}`,
		`{"limits":[],"ON_UNAVAILABLE":"allow"}`,
	})
}

func FuzzAuditRetentionBody(f *testing.F) {
	fuzzBodies(f, "PUT", "/v1/namespaces/default/audit-retention", []string{
		`{"audit_retention_s":7776000}`, `{"audit_retention_s":0}`, `{"audit_retention_s":59}`,
		`{"audit_retention_s":-1}`, `{"audit_retention_s":9223372036854775807}`, `{"audit_retention_s":1e9}`,
		`{"audit_retention_s":null}`, `{}`, `{"audit_retention_s":1,"audit_retention_s":2}`,
	})
}

func FuzzNamespaceBody(f *testing.F) {
	fuzzBodies(f, "POST", "/v1/namespaces", []string{
		`{"name":"team-a"}`, `{"name":"default"}`, `{"name":"a/b"}`, `{"name":""}`, `{"name":"t","id":"x"}`,
		`{"name":null}`, `{"name":"a","name":"b"}`, `{"Name":"team-a"}`,
	})
}

// An adjustment is written to the lease's record, whose consumption is
// the state here: a failure leaves it as it was (and writes nothing), and
// no success takes it below zero or above model.MaxTokens.
func FuzzAdjustBody(f *testing.F) {
	var consumed func() map[string]int64 // the lease's, as its record has it
	setUp := func(e *env) string {
		var a api.AcquireResponse
		body := map[string]any{"entity": "k", "resource": "api", "consume": map[string]int64{"rpm": 1, "tpm": 100},
			"limits": []string{"rpm:5/min", "tpm:1000/min", "slots:2/concurrent"}, "lease_ttl_ms": 86_400_000}
		e.want(http.StatusOK, "POST", "/v1/acquire", body, &a)
		consumed = func() map[string]int64 {
			var lr api.LeaseResponse
			e.want(http.StatusOK, "GET", "/v1/leases/"+a.LeaseID, nil, &lr)
			return lr.Consumed
		}
		return a.LeaseID + "/adjust"
	}
	seeds := []string{
		`{"consume":{"tpm":500}}`, `{"consume":{"tpm":-100}}`, `{"consume":{"tpm":-101}}`, `{"consume":{"rpm":-1,"tpm":5}}`,
		`{"consume":{"slots":1}}`, `{"consume":{"nope":1}}`, `{"consume":{"tpm":9223372036854775807}}`, `{"consume":{}}`,
		`{"consume":{"tpm":4600000000000000}}`, `{"consume":{"tpm":4611686018427387}}`, `{"consume":{"tpm":null}}`,
		`{"consume":{"tpm":1,"tpm":-1}}`, `{"CONSUME":{"tpm":1}}`, `{"consume":{"tpm":1},"consume":{"tpm":2}}`,
	}
	var before map[string]int64
	fuzzBodiesAround(f, "POST", "/v1/leases/", seeds, setUp,
		func() { before = consumed() },
		func(t *testing.T, status int) {
			after := consumed()
			for name, n := range after {
				if n < 0 || n > model.MaxTokens {
					t.Fatalf("consumption of %s went out of [0, MaxTokens]: %v", name, after)
				}
			}
			if status != http.StatusOK && !maps.Equal(before, after) {
				t.Fatalf("a %d changed the lease: %v -> %v", status, before, after)
			}
		})
}
