package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
)

func namespaceCases() []testCase {
	return []testCase{
		{"Isolation", testNamespaceIsolation},
		{"Registry", testNamespaceRegistry},
		{"Purge", testNamespacePurge},
	}
}

// populate writes the same entities, configs, buckets and audit events in
// the env's namespace.
func (e *Env) populate() {
	e.createEntity(model.Entity{ID: "org", Metadata: map[string]string{"ns": e.ns}})
	e.createEntity(model.Entity{ID: "key", ParentID: "org", Cascade: true})
	e.putConfig(model.SystemScope(), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}, OnUnavailable: model.Allow})
	e.putConfig(model.ResourceScope("api"), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 2)}})
	e.putConfig(model.EntityScope("org", ""), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 3)}})
	e.putConfig(model.EntityScope("key", "api"), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 4)}})
	e.grant(T0, breq(Key("key", "api"), checked("a", rate(10_000, 1, 1), 1_000)), breq(Key("org", "api"), checked("a", rate(10_000, 1, 1), 1_000)))
}

func testNamespaceIsolation(t *testing.T, e1 *Env) {
	e2 := &Env{t: t, ctx: e1.ctx, s: e1.s, ns: newNamespace(t), clk: e1.clk, eventSeq: 1000}
	e1.populate()

	// Nothing of e1 is visible in e2.
	for _, id := range []string{"org", "key"} {
		if _, err := e2.s.GetEntity(e2.ctx, e2.ns, id); !errors.Is(err, model.ErrEntityNotFound) {
			t.Errorf("ns2 GetEntity(%s) = %v, want ErrEntityNotFound", id, err)
		}
	}
	if kids := e2.children("org"); len(kids) != 0 {
		t.Errorf("ns2 ListChildren(org) = %v", entityIDs(kids))
	}
	for i, c := range e2.getConfigs(model.SystemScope(), model.ResourceScope("api"), model.EntityScope("org", ""), model.EntityScope("key", "api")) {
		if c != nil {
			t.Errorf("ns2 config %d = %+v, want nil", i, c)
		}
	}
	for i, r := range e2.Read(Key("key", "api"), Key("org", "api")) {
		if r != nil {
			t.Errorf("ns2 bucket %d = %+v, want nil", i, r)
		}
	}
	for _, id := range []string{"", "org", "key"} {
		if evs := e2.audit(id); len(evs) != 0 {
			t.Errorf("ns2 ListAudit(%q) = %v", id, eventIDs(evs))
		}
	}
	if err := e2.s.DeleteConfig(e2.ctx, e2.ns, model.ResourceScope("api"), e2.event(model.ActionConfigDelete, "", "api")); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("ns2 DeleteConfig of ns1's config = %v, want ErrNotFound", err)
	}
	if err := e2.s.DeleteEntity(e2.ctx, e2.ns, "org", e2.event(model.ActionEntityDelete, "org", "")); !errors.Is(err, model.ErrEntityNotFound) {
		t.Errorf("ns2 DeleteEntity of ns1's entity = %v, want ErrEntityNotFound", err)
	}
	if err := e2.s.PutConfig(e2.ctx, e2.ns, model.EntityScope("org", ""), model.Config{}, e2.event(model.ActionConfigSet, "org", "")); !errors.Is(err, model.ErrEntityNotFound) {
		t.Errorf("ns2 PutConfig for ns1's entity = %v, want ErrEntityNotFound", err)
	}
	// Deltas in ns2 do not reach ns1's buckets.
	e2.deltas(delta(Key("key", "api"), "a", 5_000))

	// The same ids can be used in e2 independently, and a delete there does
	// not touch e1.
	e2.populate()
	e2.grant(T0, breq(Key("key", "api"), checked("a", rate(10_000, 1, 1), 5_000)))
	e2.deleteEntity("key")
	e2.deleteEntity("org")

	e1.WantStored(Key("key", "api"), "a", bucket.State{Tokens: 9_000})
	e1.WantStored(Key("org", "api"), "a", bucket.State{Tokens: 9_000})
	if got := e1.getEntity("org"); got.Metadata["ns"] != e1.ns {
		t.Errorf("ns1 org = %+v", got)
	}
	if kids := e1.children("org"); len(kids) != 1 || kids[0].ID != "key" {
		t.Errorf("ns1 children = %v", entityIDs(kids))
	}
	for i, c := range e1.getConfigs(model.SystemScope(), model.ResourceScope("api"), model.EntityScope("org", ""), model.EntityScope("key", "api")) {
		if c == nil || c.Limits[0].Capacity != int64(i+1) {
			t.Errorf("ns1 config %d = %+v", i, c)
		}
	}
	if n := len(e1.audit("org")); n != 2 {
		t.Errorf("ns1 audit of org has %d events, want 2", n)
	}
	if n := len(e1.audit("")); n != 2 {
		t.Errorf("ns1 system audit has %d events, want 2", n)
	}
	if n := len(e2.audit("org")); n != 3 {
		t.Errorf("ns2 audit of org has %d events, want 3", n)
	}
}

// mine keeps the namespaces whose names start with prefix: other cases may
// share the store.
func mine(all []model.Namespace, prefix string) []model.Namespace {
	var out []model.Namespace
	for _, n := range all {
		if strings.HasPrefix(n.Name, prefix) {
			out = append(out, n)
		}
	}
	return out
}

func testNamespaceRegistry(t *testing.T, e *Env) {
	at := time.UnixMilli(T0).UTC()
	b := model.Namespace{Name: e.ns + "-b", ID: e.ns + "id-b", CreatedAt: at}
	a := model.Namespace{Name: e.ns + "-a", ID: e.ns + "id-a", CreatedAt: at}
	for _, n := range []model.Namespace{b, a} {
		if err := e.s.CreateNamespace(e.ctx, n); err != nil {
			t.Fatalf("CreateNamespace(%s): %v", n.Name, err)
		}
	}
	// A name or an id can be registered once.
	if err := e.s.CreateNamespace(e.ctx, model.Namespace{Name: a.Name, ID: e.ns + "id-other", CreatedAt: at}); !errors.Is(err, model.ErrNamespaceExists) {
		t.Errorf("registering a taken name: %v, want ErrNamespaceExists", err)
	}
	if err := e.s.CreateNamespace(e.ctx, model.Namespace{Name: e.ns + "-c", ID: a.ID, CreatedAt: at}); !errors.Is(err, model.ErrNamespaceExists) {
		t.Errorf("registering a taken id: %v, want ErrNamespaceExists", err)
	}
	if _, err := e.s.GetNamespace(e.ctx, e.ns+"-c"); !errors.Is(err, model.ErrNamespaceNotFound) {
		t.Errorf("the refused registration left %s behind: %v", e.ns+"-c", err)
	}
	got, err := e.s.GetNamespace(e.ctx, a.Name)
	if err != nil || got.ID != a.ID || !got.CreatedAt.Equal(at) || got.Deleted() {
		t.Errorf("GetNamespace = %+v, %v; want %+v", got, err, a)
	}
	all, err := e.s.ListNamespaces(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := mine(all, e.ns+"-"); len(l) != 2 || l[0].Name != a.Name || l[1].Name != b.Name {
		t.Errorf("ListNamespaces = %+v, want %s then %s", l, a.Name, b.Name)
	}
	// Soft delete and recover keep the registration and the id.
	del := at.Add(time.Hour)
	if err := e.s.SetNamespaceDeleted(e.ctx, a.Name, del); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.s.GetNamespace(e.ctx, a.Name); !got.Deleted() || !got.DeletedAt.Equal(del) || got.ID != a.ID {
		t.Errorf("after delete: %+v, want deleted at %v", got, del)
	}
	if err := e.s.SetNamespaceDeleted(e.ctx, a.Name, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.s.GetNamespace(e.ctx, a.Name); got.Deleted() {
		t.Errorf("after recover: %+v, want not deleted", got)
	}
	if err := e.s.SetNamespaceDeleted(e.ctx, e.ns+"-none", del); !errors.Is(err, model.ErrNamespaceNotFound) {
		t.Errorf("deleting an unknown namespace: %v, want ErrNamespaceNotFound", err)
	}
	if err := e.s.PurgeNamespace(e.ctx, e.ns+"-none", nil); !errors.Is(err, model.ErrNamespaceNotFound) {
		t.Errorf("purging an unknown namespace: %v, want ErrNamespaceNotFound", err)
	}
}

// Purge removes every item of a namespace and its registration, and
// nothing of any other namespace.
func testNamespacePurge(t *testing.T, e *Env) {
	victim := e.OtherNamespace()
	n := model.Namespace{Name: victim.ns, ID: victim.ns, CreatedAt: time.UnixMilli(T0)}
	if err := e.s.CreateNamespace(e.ctx, n); err != nil {
		t.Fatal(err)
	}
	victim.populate()
	e.populate()
	if err := e.s.SetNamespaceDeleted(e.ctx, n.Name, time.UnixMilli(T0+1)); err != nil {
		t.Fatal(err)
	}
	last := 0
	if err := e.s.PurgeNamespace(e.ctx, n.Name, func(d int) { last = d }); err != nil {
		t.Fatal(err)
	}
	if last == 0 {
		t.Errorf("progress reported %d items deleted, want more than 0", last)
	}
	if _, err := e.s.GetNamespace(e.ctx, n.Name); !errors.Is(err, model.ErrNamespaceNotFound) {
		t.Errorf("purged namespace still registered: %v", err)
	}
	if _, err := e.s.GetEntity(e.ctx, victim.ns, "org"); !errors.Is(err, model.ErrEntityNotFound) {
		t.Errorf("purged namespace's entity: %v, want ErrEntityNotFound", err)
	}
	if recs := victim.Read(Key("key", "api"), Key("org", "api")); recs[0] != nil || recs[1] != nil {
		t.Errorf("purged namespace's buckets remain: %+v", recs)
	}
	if cfgs, err := e.s.GetConfigs(e.ctx, victim.ns, []model.Scope{model.SystemScope(), model.ResourceScope("api")}); err != nil || cfgs[0] != nil || cfgs[1] != nil {
		t.Errorf("purged namespace's configs remain: %+v, %v", cfgs, err)
	}
	if evs, err := e.s.ListAudit(e.ctx, victim.ns, "org", "", 0); err != nil || len(evs) != 0 {
		t.Errorf("purged namespace's audit remains: %d events, %v", len(evs), err)
	}
	// The other namespace is whole.
	if _, err := e.s.GetEntity(e.ctx, e.ns, "org"); err != nil {
		t.Errorf("other namespace's entity: %v", err)
	}
	e.WantStored(Key("org", "api"), "a", bucket.State{Tokens: 9_000})
}
