package limitertest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/reconcile"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/storetest"
)

// A namespace's audit retention, on the fake clock: events past it are
// hidden from both listings at once, swept by a reconciler's pass, and a
// longer retention shows again what was hidden but not swept.
func testNamespaceAuditRetention(t *testing.T, e *env) {
	log, ok := e.s.(store.AuditLog)
	if !ok {
		t.Skip("the store does not implement store.AuditLog")
	}
	adm := e.admin()
	ids := func(evs []tollgate.AuditEvent) []string {
		out := make([]string, len(evs))
		for i, ev := range evs {
			out[i] = ev.ID
		}
		return out
	}
	auditLog := func(q model.AuditQuery) []string {
		t.Helper()
		evs, err := adm.AuditLog(e.ctx, q)
		if err != nil {
			t.Fatalf("AuditLog(%+v): %v", q, err)
		}
		return ids(evs)
	}
	stored := func() []string {
		t.Helper()
		evs, err := log.ListAuditRange(e.ctx, e.ns, store.AuditRange{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return ids(evs)
	}
	var all []string
	for i, id := range []string{"a", "b", "c"} {
		if i > 0 {
			e.Advance((2 * time.Hour).Milliseconds())
		}
		if _, err := adm.CreateEntity(e.ctx, tollgate.Entity{ID: id}); err != nil {
			t.Fatal(err)
		}
		evs, err := adm.AuditEvents(e.ctx, id, "", 0)
		if err != nil || len(evs) != 1 {
			t.Fatalf("AuditEvents(%s) = %v, %v", id, evs, err)
		}
		all = append(all, evs[0].ID)
	}
	// Now T0+4h: events at T0, T0+2h, T0+4h.
	if got := auditLog(model.AuditQuery{}); !slices.Equal(got, all) {
		t.Fatalf("AuditLog without a retention = %v, want %v", got, all)
	}

	if err := adm.SetAuditRetention(e.ctx, e.ns, 30*time.Minute); !errors.Is(err, tollgate.ErrInvalid) {
		t.Errorf("a retention under an hour: %v, want ErrInvalid", err)
	}
	if err := adm.SetAuditRetention(e.ctx, "t"+e.ns, time.Hour); !errors.Is(err, tollgate.ErrNamespaceNotFound) {
		t.Errorf("the retention of an unknown namespace: %v, want ErrNamespaceNotFound", err)
	}
	if err := adm.SetAuditRetention(e.ctx, e.ns, 3*time.Hour); err != nil {
		t.Fatal(err)
	}
	if n, err := adm.GetNamespace(e.ctx, e.ns); err != nil || n.AuditRetention != 3*time.Hour {
		t.Errorf("GetNamespace = %+v, %v; want a retention of 3h", n, err)
	}
	// The cutoff is T0+1h: a's event is hidden from both listings, not
	// yet deleted.
	if got := auditLog(model.AuditQuery{}); !slices.Equal(got, all[1:]) {
		t.Errorf("AuditLog with 3h = %v, want %v", got, all[1:])
	}
	if got := auditLog(model.AuditQuery{Until: time.UnixMilli(storetest.T0).Add(time.Hour)}); len(got) != 0 {
		t.Errorf("AuditLog of a range past the retention = %v, want none", got)
	}
	if evs, err := adm.AuditEvents(e.ctx, "a", "", 0); err != nil || len(evs) != 0 {
		t.Errorf("AuditEvents(a) with 3h = %v, %v; want none", ids(evs), err)
	}
	if got := stored(); !slices.Equal(got, all) {
		t.Errorf("stored before the sweep = %v, want %v", got, all)
	}

	r, err := reconcile.New(e.s, reconcile.WithClock(e.clk), reconcile.WithNamespaces(e.ns))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Once(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := stored(); !slices.Equal(got, all[1:]) {
		t.Errorf("stored after the sweep = %v, want %v", got, all[1:])
	}
	if s := r.Stats(); s.Swept != 1 {
		t.Errorf("Stats().Swept = %d, want 1", s.Swept)
	}
	// Two hours on (T0+6h, cutoff T0+3h), b's event goes too.
	e.Advance((2 * time.Hour).Milliseconds())
	if got := auditLog(model.AuditQuery{}); !slices.Equal(got, all[2:]) {
		t.Errorf("AuditLog two hours on = %v, want %v", got, all[2:])
	}
	if _, err := r.Once(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := stored(); !slices.Equal(got, all[2:]) {
		t.Errorf("stored after the second sweep = %v, want %v", got, all[2:])
	}
	// Forever again: what was swept is gone, nothing else is hidden.
	if err := adm.SetAuditRetention(e.ctx, e.ns, 0); err != nil {
		t.Fatal(err)
	}
	e.Advance((1000 * time.Hour).Milliseconds())
	if got := auditLog(model.AuditQuery{}); !slices.Equal(got, all[2:]) {
		t.Errorf("AuditLog with no retention = %v, want %v", got, all[2:])
	}
	if _, err := r.Once(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := stored(); !slices.Equal(got, all[2:]) {
		t.Errorf("a namespace without a retention was swept: %v", got)
	}
}
