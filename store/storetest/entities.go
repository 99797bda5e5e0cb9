package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
)

func entityCases() []testCase {
	return append([]testCase{
		{"CreateGet", testEntityCreateGet},
		{"Exists", testEntityExists},
		{"ParentMissing", testEntityParentMissing},
		{"ListChildren", testEntityListChildren},
		{"Delete", testEntityDelete},
		{"MetadataCopied", testEntityMetadataCopied},
	}, entityVersionCases()...)
}

func (e *Env) getEntity(id string) model.Entity {
	e.t.Helper()
	got, err := e.s.GetEntity(e.ctx, e.ns, id)
	if err != nil {
		e.t.Fatalf("GetEntity(%s): %v", id, err)
	}
	return got
}

func (e *Env) children(id string) []model.Entity {
	e.t.Helper()
	kids, err := e.s.ListChildren(e.ctx, e.ns, id)
	if err != nil {
		e.t.Fatalf("ListChildren(%s): %v", id, err)
	}
	return kids
}

func (e *Env) deleteEntity(id string) model.AuditEvent {
	e.t.Helper()
	ev := e.event(model.ActionEntityDelete, id, "")
	if err := e.s.DeleteEntity(e.ctx, e.ns, id, ev); err != nil {
		e.t.Fatalf("DeleteEntity(%s): %v", id, err)
	}
	return ev
}

func testEntityCreateGet(t *testing.T, e *Env) {
	if _, err := e.s.GetEntity(e.ctx, e.ns, "org-1"); !errors.Is(err, model.ErrEntityNotFound) {
		t.Errorf("GetEntity of a missing entity = %v, want ErrEntityNotFound", err)
	}
	created := time.UnixMilli(T0 + 1234).UTC()
	org := model.Entity{ID: "org-1", Name: "Org One", Metadata: map[string]string{"plan": "pro", "region": "eu-west-1"}, CreatedAt: created}
	proj := model.Entity{ID: "proj:a@b.c-1_2", ParentID: "org-1", Cascade: true, CreatedAt: created.Add(time.Millisecond)}
	e.createEntity(org)
	e.createEntity(proj)
	for _, want := range []model.Entity{org, proj} {
		if got := e.getEntity(want.ID); !sameEntity(got, want) {
			t.Errorf("GetEntity(%s) = %+v, want %+v", want.ID, got, want)
		}
	}
	// Ids are case-sensitive.
	if _, err := e.s.GetEntity(e.ctx, e.ns, "ORG-1"); !errors.Is(err, model.ErrEntityNotFound) {
		t.Errorf("GetEntity(ORG-1) = %v, want ErrEntityNotFound", err)
	}
}

func testEntityExists(t *testing.T, e *Env) {
	orig := model.Entity{ID: "org-1", Name: "original", Metadata: map[string]string{"k": "v"}, CreatedAt: time.UnixMilli(T0).UTC()}
	e.createEntity(orig)
	e.createEntity(model.Entity{ID: "other"})
	before := len(e.audit("org-1"))
	for _, dup := range []model.Entity{
		{ID: "org-1", Name: "impostor"},
		{ID: "org-1", Name: "impostor", ParentID: "other", Cascade: true},
	} {
		err := e.s.CreateEntity(e.ctx, e.ns, dup, e.event(model.ActionEntityCreate, dup.ID, ""))
		if !errors.Is(err, model.ErrEntityExists) {
			t.Errorf("CreateEntity of an existing id = %v, want ErrEntityExists", err)
		}
	}
	if got := e.getEntity("org-1"); !sameEntity(got, orig) {
		t.Errorf("a failed create changed the entity to %+v", got)
	}
	if kids := e.children("other"); len(kids) != 0 {
		t.Errorf("a failed create added children %v", entityIDs(kids))
	}
	if n := len(e.audit("org-1")); n != before {
		t.Errorf("a failed create appended audit events: %d, want %d", n, before)
	}
}

func testEntityParentMissing(t *testing.T, e *Env) {
	err := e.s.CreateEntity(e.ctx, e.ns, model.Entity{ID: "key-1", ParentID: "ghost", Cascade: true},
		e.event(model.ActionEntityCreate, "key-1", ""))
	if !errors.Is(err, model.ErrEntityNotFound) {
		t.Errorf("CreateEntity with a missing parent = %v, want ErrEntityNotFound", err)
	}
	if _, err := e.s.GetEntity(e.ctx, e.ns, "key-1"); !errors.Is(err, model.ErrEntityNotFound) {
		t.Errorf("the failed create stored the entity: %v", err)
	}
	if kids := e.children("ghost"); len(kids) != 0 {
		t.Errorf("the failed create added children %v", entityIDs(kids))
	}
	if evs := e.audit("key-1"); len(evs) != 0 {
		t.Errorf("the failed create appended audit events: %+v", evs)
	}
	// Once the parent exists, the same create works.
	e.createEntity(model.Entity{ID: "ghost"})
	e.createEntity(model.Entity{ID: "key-1", ParentID: "ghost", Cascade: true})
}

func testEntityListChildren(t *testing.T, e *Env) {
	e.createEntity(model.Entity{ID: "p"})
	e.createEntity(model.Entity{ID: "q"})
	ids := []string{"c3", "c1", "c10", "C0", "c2", "0c"}
	for _, id := range ids {
		e.createEntity(model.Entity{ID: id, ParentID: "p", Cascade: id != "c2", Name: "name-" + id})
	}
	e.createEntity(model.Entity{ID: "g1", ParentID: "c1"}) // a grandchild
	e.createEntity(model.Entity{ID: "q1", ParentID: "q"})

	kids := e.children("p")
	want := slices.Sorted(slices.Values(ids)) // byte order: 0c C0 c1 c10 c2 c3
	if got := entityIDs(kids); !slices.Equal(got, want) {
		t.Fatalf("ListChildren(p) = %v, want %v", got, want)
	}
	for _, k := range kids {
		if k.ParentID != "p" || k.Name != "name-"+k.ID || k.Cascade != (k.ID != "c2") {
			t.Errorf("child %+v lost its fields", k)
		}
	}
	if got := entityIDs(e.children("c1")); !slices.Equal(got, []string{"g1"}) {
		t.Errorf("ListChildren(c1) = %v, want [g1]", got)
	}
	for _, id := range []string{"c3", "ghost", "g1"} {
		if got := e.children(id); len(got) != 0 {
			t.Errorf("ListChildren(%s) = %v, want none", id, entityIDs(got))
		}
	}

	// Deleting a child removes it from its parent's list.
	e.deleteEntity("c10")
	want = slices.DeleteFunc(want, func(s string) bool { return s == "c10" })
	if got := entityIDs(e.children("p")); !slices.Equal(got, want) {
		t.Errorf("ListChildren(p) after deleting c10 = %v, want %v", got, want)
	}
}

func testEntityDelete(t *testing.T, e *Env) {
	p := rate(10_000, 1_000, 1_000)
	e.createEntity(model.Entity{ID: "org"})
	e.createEntity(model.Entity{ID: "proj", ParentID: "org", Cascade: true})
	e.createEntity(model.Entity{ID: "key", ParentID: "proj", Cascade: true})
	e.createEntity(model.Entity{ID: "other"})
	for _, id := range []string{"proj", "other"} {
		e.putConfig(model.EntityScope(id, ""), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}})
		e.putConfig(model.EntityScope(id, "api"), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 2)}})
	}
	e.putConfig(model.ResourceScope("api"), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 3)}})
	for _, id := range []string{"key", "proj", "other"} {
		e.grant(T0, breq(Key(id, "api"), checked("a", p, 1_000)))
		e.grant(T0, breq(Key(id, "batch"), checked("a", p, 2_000)))
	}

	del := e.deleteEntity("proj")
	if _, err := e.s.GetEntity(e.ctx, e.ns, "proj"); !errors.Is(err, model.ErrEntityNotFound) {
		t.Errorf("GetEntity after delete = %v, want ErrEntityNotFound", err)
	}
	// Its configs are gone, others' stay.
	cfgs := e.getConfigs(model.EntityScope("proj", ""), model.EntityScope("proj", "api"),
		model.EntityScope("other", ""), model.EntityScope("other", "api"), model.ResourceScope("api"))
	if cfgs[0] != nil || cfgs[1] != nil {
		t.Errorf("configs of the deleted entity remain: %+v %+v", cfgs[0], cfgs[1])
	}
	for i := 2; i < 5; i++ {
		if cfgs[i] == nil {
			t.Errorf("config %d of another scope was deleted", i)
		}
	}
	// Its buckets are gone, others' stay untouched.
	recs := e.Read(Key("proj", "api"), Key("proj", "batch"))
	if recs[0] != nil || recs[1] != nil {
		t.Errorf("buckets of the deleted entity remain: %+v %+v", recs[0], recs[1])
	}
	for _, id := range []string{"key", "other"} {
		e.WantStored(Key(id, "api"), "a", bucket.State{Tokens: 9_000})
		e.WantStored(Key(id, "batch"), "a", bucket.State{Tokens: 8_000})
	}
	// Children stay, with their parent id.
	if got := e.getEntity("key"); got.ParentID != "proj" || !got.Cascade {
		t.Errorf("child after deleting its parent = %+v", got)
	}
	if got := e.getEntity("org"); got.ID != "org" {
		t.Errorf("grandparent = %+v", got)
	}
	// The delete is audited under the entity; earlier events stay.
	evs := e.audit("proj")
	if len(evs) != 4 || !sameEvent(evs[3], del) {
		t.Errorf("audit of proj = %+v, want 4 events ending with the delete", evs)
	}

	// Deleting again fails and appends nothing.
	err := e.s.DeleteEntity(e.ctx, e.ns, "proj", e.event(model.ActionEntityDelete, "proj", ""))
	if !errors.Is(err, model.ErrEntityNotFound) {
		t.Errorf("DeleteEntity of a deleted entity = %v, want ErrEntityNotFound", err)
	}
	if n := len(e.audit("proj")); n != 4 {
		t.Errorf("a failed delete appended audit events: %d", n)
	}

	// The id can be created again, fresh: no configs, no buckets.
	e.createEntity(model.Entity{ID: "proj", ParentID: "org"})
	if c := e.getConfigs(model.EntityScope("proj", ""))[0]; c != nil {
		t.Errorf("a recreated entity has its old config %+v", c)
	}
	req := e.grant(T0, breq(Key("proj", "api"), checked("a", p, 0)))
	e.wantObserved(req, Key("proj", "api"), "a", bucket.State{Tokens: 10_000})
}

func testEntityMetadataCopied(t *testing.T, e *Env) {
	md := map[string]string{"tier": "gold", "owner": "alice@example.com"}
	want := map[string]string{"tier": "gold", "owner": "alice@example.com"}
	e.createEntity(model.Entity{ID: "p"})
	e.createEntity(model.Entity{ID: "e1", ParentID: "p", Metadata: md})
	md["tier"] = "changed"
	md["extra"] = "x"

	got := e.getEntity("e1")
	if !sameMap(got.Metadata, want) {
		t.Fatalf("Metadata = %v, want %v", got.Metadata, want)
	}
	got.Metadata["tier"] = "mutated"
	delete(got.Metadata, "owner")
	if again := e.getEntity("e1"); !sameMap(again.Metadata, want) {
		t.Errorf("mutating GetEntity's map changed the stored metadata to %v", again.Metadata)
	}
	kids := e.children("p")
	if len(kids) != 1 || !sameMap(kids[0].Metadata, want) {
		t.Fatalf("ListChildren = %+v", kids)
	}
	kids[0].Metadata["tier"] = "mutated"
	if again := e.getEntity("e1"); !sameMap(again.Metadata, want) {
		t.Errorf("mutating ListChildren's map changed the stored metadata to %v", again.Metadata)
	}
}
