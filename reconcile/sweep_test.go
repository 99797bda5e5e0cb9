package reconcile_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/reconcile"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// The audit sweep: events past a namespace's retention go at the first
// pass, then at most once per sweep interval; a namespace without a
// retention, and a reconciler with the sweep off, delete nothing.
func TestAuditSweep(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name      string
		retention time.Duration
		opts      []reconcile.Option
		// left after a pass at t0+2h (events at t0 and t0+30m5s; a
		// retention of 90 min cuts at t0+30m), then after one 10 s later
		// (the cut passes the second event), then after one at t0+3h.
		left [3]int
	}{
		{"every minute (default)", 90 * time.Minute, nil, [3]int{1, 1, 0}},
		{"every pass", 90 * time.Minute, []reconcile.Option{reconcile.WithAuditSweep(0)}, [3]int{1, 0, 0}},
		{"no retention", 0, nil, [3]int{2, 2, 2}},
		{"sweep off", 90 * time.Minute, []reconcile.Option{reconcile.WithAuditSweep(-1)}, [3]int{2, 2, 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := memory.New()
			clk := clock.NewFake(t0)
			if err := st.CreateNamespace(ctx, model.Namespace{Name: "ns", ID: "ns", CreatedAt: t0, AuditRetention: c.retention}); err != nil {
				t.Fatal(err)
			}
			for i, at := range []time.Time{t0, t0.Add(30*time.Minute + 5*time.Second)} {
				ev := model.AuditEvent{ID: ulid.MustNew(ulid.Timestamp(at), rand.Reader).String(), Time: at, Action: model.ActionConfigSet, Resource: "r"}
				if err := st.PutConfig(ctx, "ns", model.ResourceScope("r"+string(rune('a'+i))), model.Config{Limits: []model.Limit{model.PerMinute("rpm", 1)}}, ev); err != nil {
					t.Fatal(err)
				}
			}
			r, err := reconcile.New(st, append([]reconcile.Option{reconcile.WithClock(clk)}, c.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			left := func() int {
				evs, err := st.ListAuditRange(ctx, "ns", store.AuditRange{Limit: 10})
				if err != nil {
					t.Fatal(err)
				}
				return len(evs)
			}
			for i, step := range []time.Duration{2 * time.Hour, 10 * time.Second, time.Hour - 10*time.Second} {
				clk.Advance(step)
				if _, err := r.Once(ctx); err != nil {
					t.Fatal(err)
				}
				if got := left(); got != c.left[i] {
					t.Errorf("after pass %d (at %v): %d events left, want %d", i+1, clk.Now().Sub(t0), got, c.left[i])
				}
			}
			if got, want := r.Stats().Swept, uint64(2-c.left[2]); got != want {
				t.Errorf("Stats().Swept = %d, want %d", got, want)
			}
		})
	}
}
