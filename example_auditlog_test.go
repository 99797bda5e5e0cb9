package tollgate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// An export reads the namespace's whole audit log by time, a page at a
// time: each page's last id is the cursor of the next, so an export
// stopped anywhere resumes without loss or duplicates. A retention hides
// older events at once (a reconciler's pass deletes them).
func ExampleAdmin_AuditLog() {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC))
	st := memory.New()
	adm, _ := tollgate.NewAdmin(st, tollgate.WithClock(clk))
	for _, id := range []string{"org-1", "org-2", "org-3"} {
		adm.CreateEntity(ctx, tollgate.Entity{ID: id}, tollgate.WithPrincipal("ops"))
		clk.Advance(time.Hour)
	}

	q := tollgate.AuditQuery{Since: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Until: clk.Now(), Limit: 2}
	for page := 1; ; page++ {
		evs, err := adm.AuditLog(ctx, q)
		if err != nil || len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			fmt.Println(page, ev.Time.Format(time.Kitchen), ev.Action, ev.Entity)
		}
		q.After = evs[len(evs)-1].ID
	}

	// Now 12:00: keep two hours, and the 9:00 event is gone.
	_ = adm.SetAuditRetention(ctx, "default", 2*time.Hour)
	evs, _ := adm.AuditLog(ctx, tollgate.AuditQuery{})
	fmt.Println("kept:", len(evs))
	// Output:
	// 1 9:00AM entity.create org-1
	// 1 10:00AM entity.create org-2
	// 2 11:00AM entity.create org-3
	// kept: 2
}
