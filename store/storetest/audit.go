package storetest

import (
	"slices"
	"testing"

	"github.com/tollgate-rl/tollgate/model"
)

func auditCases() []testCase {
	return []testCase{
		{"EveryMutation", testAuditEveryMutation},
		{"Pagination", testAuditPagination},
		{"SortedByID", testAuditSortedByID},
	}
}

func testAuditEveryMutation(t *testing.T, e *Env) {
	if evs := e.audit(""); len(evs) != 0 {
		t.Fatalf("empty namespace has audit events %+v", evs)
	}
	var wantE1, wantSys, wantE2 []model.AuditEvent
	wantE1 = append(wantE1, e.createEntity(model.Entity{ID: "e1"}))
	wantE2 = append(wantE2, e.createEntity(model.Entity{ID: "e2", ParentID: "e1"}))
	wantSys = append(wantSys, e.putConfig(model.SystemScope(), model.Config{OnUnavailable: model.Allow}))
	wantSys = append(wantSys, e.putConfig(model.ResourceScope("api"), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}}))
	wantE1 = append(wantE1, e.putConfig(model.EntityScope("e1", ""), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}}))
	wantE1 = append(wantE1, e.putConfig(model.EntityScope("e1", "api"), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}}))

	ev := e.event(model.ActionConfigDelete, "", "api")
	ev.Principal, ev.Details = "", nil
	if err := e.s.DeleteConfig(e.ctx, e.ns, model.ResourceScope("api"), ev); err != nil {
		t.Fatal(err)
	}
	wantSys = append(wantSys, ev)
	ev = e.event(model.ActionConfigDelete, "e1", "api")
	ev.Details = map[string]string{"level": "entity", "note": "with = and , and \"quotes\" and ünïcode"}
	if err := e.s.DeleteConfig(e.ctx, e.ns, model.EntityScope("e1", "api"), ev); err != nil {
		t.Fatal(err)
	}
	wantE1 = append(wantE1, ev)
	wantE2 = append(wantE2, e.deleteEntity("e2"))
	// Consumes and deltas are not audited.
	e.grant(T0, breq(Key("e1", "api"), checked("a", rate(1000, 1, 1), 1)))
	e.deltas(delta(Key("e1", "api"), "a", 1))
	wantE1 = append(wantE1, e.deleteEntity("e1"))

	for _, c := range []struct {
		entity string
		want   []model.AuditEvent
	}{{"", wantSys}, {"e1", wantE1}, {"e2", wantE2}, {"e3", nil}} {
		got := e.audit(c.entity)
		if len(got) != len(c.want) {
			t.Errorf("ListAudit(%q) = %d events %v, want %d %v", c.entity, len(got), eventIDs(got), len(c.want), eventIDs(c.want))
			continue
		}
		for i := range got {
			if !sameEvent(got[i], c.want[i]) {
				t.Errorf("ListAudit(%q)[%d] = %+v, want %+v", c.entity, i, got[i], c.want[i])
			}
		}
	}

	// Returned events are copies.
	got := e.audit("e1")
	if len(got) != len(wantE1) {
		return
	}
	got[3].Details["level"] = "mutated"
	got[3].Action = "mutated"
	if again := e.audit("e1"); len(again) != len(wantE1) || !sameEvent(again[3], wantE1[3]) {
		t.Errorf("mutating a returned event changed the log: %+v", again)
	}
}

func testAuditPagination(t *testing.T, e *Env) {
	ids := []string{e.createEntity(model.Entity{ID: "e1"}).ID}
	e.createEntity(model.Entity{ID: "other"})
	for i := range 24 {
		r := "r" + itoa(int64(i))
		ids = append(ids, e.putConfig(model.EntityScope("e1", r), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}}).ID)
		e.putConfig(model.EntityScope("other", r), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}})
	}
	if !slices.IsSorted(ids) {
		t.Fatalf("test bug: ids not sorted: %v", ids)
	}

	var got []string
	after := ""
	pages := 0
	for {
		evs, err := e.s.ListAudit(e.ctx, e.ns, "e1", after, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) > 10 {
			t.Fatalf("page of %d events, limit 10", len(evs))
		}
		if len(evs) == 0 {
			break
		}
		if pages++; pages > 10 {
			t.Fatalf("pagination does not end: %v", got)
		}
		if want := min(10, len(ids)-len(got)); len(evs) != want {
			t.Errorf("page %d has %d events, want %d", pages, len(evs), want)
		}
		got = append(got, eventIDs(evs)...)
		after = evs[len(evs)-1].ID
	}
	if !slices.Equal(got, ids) {
		t.Errorf("paged ids = %v\nwant %v", got, ids)
	}
	if pages != 3 {
		t.Errorf("%d pages, want 3", pages)
	}

	// after is exclusive and need not be an existing id.
	evs, err := e.s.ListAudit(e.ctx, e.ns, "e1", ids[4], 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := ids[5:8]; !slices.Equal(eventIDs(evs), want) {
		t.Errorf("ListAudit(after %s, 3) = %v, want %v", ids[4], eventIDs(evs), want)
	}
	evs, err = e.s.ListAudit(e.ctx, e.ns, "e1", ids[4]+"0", 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := ids[5:7]; !slices.Equal(eventIDs(evs), want) {
		t.Errorf("ListAudit(after %s0, 2) = %v, want %v", ids[4], eventIDs(evs), want)
	}
	evs, err = e.s.ListAudit(e.ctx, e.ns, "e1", ids[len(ids)-1], 10)
	if err != nil || len(evs) != 0 {
		t.Errorf("ListAudit after the last id = %v, %v; want none", eventIDs(evs), err)
	}
}

func testAuditSortedByID(t *testing.T, e *Env) {
	// Events written out of id order (by writers whose clocks disagree) are
	// listed in id order.
	a, b, c := e.event(model.ActionConfigSet, "", "r1"), e.event(model.ActionConfigSet, "", "r2"), e.event(model.ActionConfigSet, "", "r3")
	for _, w := range []struct {
		ev model.AuditEvent
		r  string
	}{{c, "r3"}, {a, "r1"}, {b, "r2"}} {
		if err := e.s.PutConfig(e.ctx, e.ns, model.ResourceScope(w.r), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}}, w.ev); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := eventIDs(e.audit("")), []string{a.ID, b.ID, c.ID}; !slices.Equal(got, want) {
		t.Errorf("ListAudit = %v, want %v", got, want)
	}
}
