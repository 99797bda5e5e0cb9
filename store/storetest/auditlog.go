package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// The namespace-wide audit log (store.AuditLog): every backend of the
// module implements it; a store that does not skips these cases.

func auditLogCases() []testCase {
	return []testCase{
		{"RangeOrderAndBounds", testAuditRangeBounds},
		{"RangePaging", testAuditRangePaging},
		{"RangeNamespacesApart", testAuditRangeNamespaces},
		{"RangeValidation", testAuditRangeValidation},
		{"Sweep", testAuditSweep},
		{"Retention", testAuditRetention},
	}
}

// auditLog returns e's store as a store.AuditLog, or skips the case.
func auditLog(t *testing.T, e *Env) store.AuditLog {
	t.Helper()
	l, ok := e.s.(store.AuditLog)
	if !ok {
		t.Skip("the store does not implement store.AuditLog")
	}
	return l
}

// writeEvents writes n events in e's namespace, each a millisecond after
// the previous (Env.event), spread over two entities and the system log,
// and returns them in the order written (which is id order).
func writeEvents(e *Env, n int) []model.AuditEvent {
	e.t.Helper()
	out := []model.AuditEvent{e.createEntity(model.Entity{ID: "e1"}), e.createEntity(model.Entity{ID: "e2"})}
	cfg := model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}}
	for i := 2; i < n; i++ {
		r := "r" + itoa(int64(i))
		switch i % 3 {
		case 0:
			out = append(out, e.putConfig(model.EntityScope("e1", r), cfg))
		case 1:
			out = append(out, e.putConfig(model.EntityScope("e2", r), cfg))
		default:
			out = append(out, e.putConfig(model.ResourceScope(r), cfg))
		}
	}
	return out
}

func (e *Env) auditRange(l store.AuditLog, q store.AuditRange) []model.AuditEvent {
	e.t.Helper()
	evs, err := l.ListAuditRange(e.ctx, e.ns, q)
	if err != nil {
		e.t.Fatalf("ListAuditRange(%+v): %v", q, err)
	}
	return evs
}

func testAuditRangeBounds(t *testing.T, e *Env) {
	l := auditLog(t, e)
	if evs := e.auditRange(l, store.AuditRange{Limit: 10}); len(evs) != 0 {
		t.Fatalf("empty namespace lists %v", eventIDs(evs))
	}
	all := writeEvents(e, 30)
	got := e.auditRange(l, store.AuditRange{Limit: 1000})
	if !slices.Equal(eventIDs(got), eventIDs(all)) {
		t.Fatalf("whole log = %v\nwant %v", eventIDs(got), eventIDs(all))
	}
	for i := range got {
		if !sameEvent(got[i], all[i]) {
			t.Errorf("event %d = %+v, want %+v", i, got[i], all[i])
		}
	}
	for _, c := range []struct {
		name   string
		q      store.AuditRange
		lo, hi int // want all[lo:hi]
	}{
		{"since inclusive, until exclusive", store.AuditRange{Since: all[5].Time, Until: all[20].Time}, 5, 20},
		{"since only", store.AuditRange{Since: all[25].Time}, 25, 30},
		{"until only", store.AuditRange{Until: all[3].Time}, 0, 3},
		{"bounds truncated to the millisecond", store.AuditRange{Since: all[7].Time.Add(999 * time.Microsecond), Until: all[8].Time.Add(500 * time.Microsecond)}, 7, 8},
		{"cursor beyond since", store.AuditRange{Since: all[2].Time, After: all[9].ID}, 10, 30},
		{"cursor before since", store.AuditRange{Since: all[12].Time, After: all[3].ID}, 12, 30},
		{"limit", store.AuditRange{Since: all[4].Time, Limit: 3}, 4, 7},
		{"before everything", store.AuditRange{Until: all[0].Time}, 0, 0},
		{"after everything", store.AuditRange{Since: all[29].Time.Add(time.Millisecond)}, 0, 0},
		{"far bounds", store.AuditRange{Since: time.Unix(1, 0), Until: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}, 0, 30},
	} {
		if c.q.Limit == 0 {
			c.q.Limit = 1000
		}
		got := e.auditRange(l, c.q)
		if want := eventIDs(all[c.lo:c.hi]); !slices.Equal(eventIDs(got), want) {
			t.Errorf("%s: ListAuditRange = %v\nwant %v", c.name, eventIDs(got), want)
		}
	}
}

func testAuditRangePaging(t *testing.T, e *Env) {
	l := auditLog(t, e)
	all := writeEvents(e, 40)
	want := eventIDs(all[3:37])
	q := store.AuditRange{Since: all[3].Time, Until: all[37].Time, Limit: 7}
	var got []string
	for pages := 1; ; pages++ {
		if pages > 20 {
			t.Fatalf("paging does not end: %v", got)
		}
		evs := e.auditRange(l, q)
		if len(evs) > q.Limit {
			t.Fatalf("page of %d, limit %d", len(evs), q.Limit)
		}
		if len(evs) == 0 {
			break
		}
		got = append(got, eventIDs(evs)...)
		q.After = evs[len(evs)-1].ID
	}
	if !slices.Equal(got, want) {
		t.Errorf("paged = %v\nwant %v", got, want)
	}
	// Events written after a page was read, later than its last event,
	// are found by the next page.
	q = store.AuditRange{Limit: 1000, After: all[len(all)-1].ID}
	late := e.putConfig(model.SystemScope(), model.Config{OnUnavailable: model.Allow})
	if got := e.auditRange(l, q); !slices.Equal(eventIDs(got), []string{late.ID}) {
		t.Errorf("after the last page = %v, want [%s]", eventIDs(got), late.ID)
	}
}

func testAuditRangeNamespaces(t *testing.T, e *Env) {
	l := auditLog(t, e)
	other := e.OtherNamespace()
	mine := writeEvents(e, 6)
	theirs := writeEvents(other, 6)
	if got := e.auditRange(l, store.AuditRange{Limit: 100}); !slices.Equal(eventIDs(got), eventIDs(mine)) {
		t.Errorf("namespace lists %v, want its own %v", eventIDs(got), eventIDs(mine))
	}
	if got := other.auditRange(l, store.AuditRange{Limit: 100}); !slices.Equal(eventIDs(got), eventIDs(theirs)) {
		t.Errorf("other namespace lists %v, want its own %v", eventIDs(got), eventIDs(theirs))
	}
}

func testAuditRangeValidation(t *testing.T, e *Env) {
	l := auditLog(t, e)
	for _, q := range []store.AuditRange{
		{Limit: 0},
		{Limit: store.MaxAuditRangePage + 1},
		{Limit: 1, Since: time.UnixMilli(T0), Until: time.UnixMilli(T0)},
	} {
		if _, err := l.ListAuditRange(e.ctx, e.ns, q); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("ListAuditRange(%+v) = %v, want ErrInvalid", q, err)
		}
	}
}

func testAuditSweep(t *testing.T, e *Env) {
	l := auditLog(t, e)
	other := e.OtherNamespace()
	all := writeEvents(e, 20)
	theirs := writeEvents(other, 20)
	sweep := func(before time.Time, limit, want int) {
		t.Helper()
		n, err := l.SweepAudit(e.ctx, e.ns, before, limit)
		if err != nil || n != want {
			t.Fatalf("SweepAudit(before %v, %d) = %d, %v; want %d", before, limit, n, err, want)
		}
	}
	// The oldest first, limit at a time, until none before is left.
	sweep(all[10].Time, 4, 4)
	if got := e.auditRange(l, store.AuditRange{Limit: 100}); !slices.Equal(eventIDs(got), eventIDs(all[4:])) {
		t.Errorf("after sweeping 4: %v\nwant %v", eventIDs(got), eventIDs(all[4:]))
	}
	sweep(all[10].Time, 100, 6)
	sweep(all[10].Time, 100, 0)
	if got := e.auditRange(l, store.AuditRange{Limit: 100}); !slices.Equal(eventIDs(got), eventIDs(all[10:])) {
		t.Errorf("after sweeping before event 10: %v\nwant %v", eventIDs(got), eventIDs(all[10:]))
	}
	// Each entity's log lost its swept events too.
	for _, entity := range []string{"", "e1", "e2"} {
		var want []string
		for _, ev := range all[10:] {
			if ev.Entity == entity {
				want = append(want, ev.ID)
			}
		}
		if got := eventIDs(e.audit(entity)); !slices.Equal(got, want) {
			t.Errorf("ListAudit(%q) after the sweep = %v, want %v", entity, got, want)
		}
	}
	if got := other.auditRange(l, store.AuditRange{Limit: 100}); !slices.Equal(eventIDs(got), eventIDs(theirs)) {
		t.Errorf("the sweep touched another namespace: %v", eventIDs(got))
	}
	// A sweep of an empty namespace, or with limit 0, does nothing.
	if n, err := l.SweepAudit(e.ctx, e.ns, all[19].Time.Add(time.Hour), 0); err != nil || n != 0 {
		t.Errorf("SweepAudit(limit 0) = %d, %v", n, err)
	}
	if n, err := l.SweepAudit(e.ctx, newNamespace(t), all[19].Time.Add(time.Hour), 10); err != nil || n != 0 {
		t.Errorf("SweepAudit(empty namespace) = %d, %v", n, err)
	}
}

func testAuditRetention(t *testing.T, e *Env) {
	l := auditLog(t, e)
	if err := l.SetAuditRetention(e.ctx, newNamespace(t), time.Hour); !errors.Is(err, model.ErrNamespaceNotFound) {
		t.Errorf("SetAuditRetention(unknown) = %v, want ErrNamespaceNotFound", err)
	}
	e.RegisterNamespace()
	get := func() model.Namespace {
		t.Helper()
		n, err := e.s.GetNamespace(e.ctx, e.ns)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := get(); n.AuditRetention != 0 {
		t.Errorf("a new namespace keeps events for %v, want forever (0)", n.AuditRetention)
	}
	gen := e.generation()
	if err := l.SetAuditRetention(e.ctx, e.ns, 30*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := get(); n.AuditRetention != 30*24*time.Hour || n.ID != e.ns || n.Deleted() {
		t.Errorf("after SetAuditRetention: %+v", n)
	}
	if e.generation() == gen {
		t.Error("SetAuditRetention did not raise the change generation")
	}
	ns, err := e.s.ListNamespaces(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ns, func(n model.Namespace) bool { return n.Name == e.ns })
	if i < 0 || ns[i].AuditRetention != 30*24*time.Hour {
		t.Errorf("ListNamespaces does not show the retention: %+v", ns)
	}
	// Deleting and recovering keeps it; setting 0 keeps events forever.
	if err := e.s.SetNamespaceDeleted(e.ctx, e.ns, time.UnixMilli(T0)); err != nil {
		t.Fatal(err)
	}
	if n := get(); n.AuditRetention != 30*24*time.Hour || !n.Deleted() {
		t.Errorf("deleted: %+v", n)
	}
	if err := l.SetAuditRetention(e.ctx, e.ns, 0); err != nil {
		t.Fatal(err)
	}
	if n := get(); n.AuditRetention != 0 || !n.Deleted() {
		t.Errorf("retention 0: %+v", n)
	}
	// A namespace created with a retention keeps it.
	name := newNamespace(t)
	if err := e.s.CreateNamespace(e.ctx, model.Namespace{Name: name, ID: name, CreatedAt: time.UnixMilli(T0), AuditRetention: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.s.GetNamespace(e.ctx, name); err != nil || n.AuditRetention != 2*time.Hour {
		t.Errorf("created with 2h: %+v, %v", n, err)
	}
}
