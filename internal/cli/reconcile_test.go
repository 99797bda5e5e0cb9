package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store/embedded"
)

// tollgate reconcile --once ends the leases that have expired, and only
// those, and gives back their slots.
func TestReconcileOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	ctx := context.Background()
	slots := tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", 5))
	st, err := embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// Leases taken an hour ago with a minute's expiry have expired by the
	// wall clock the command reads; one taken now has not.
	past, err := tollgate.New(st, tollgate.WithClock(clock.NewFake(time.Now().Add(-time.Hour))))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := past.Acquire(ctx, "job", "emr", tollgate.Consume{"slots": 1}, slots, tollgate.WithLeaseTTL(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	now, err := tollgate.New(st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := now.Acquire(ctx, "job", "emr", tollgate.Consume{"slots": 1}, slots); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	c := &cli{t: t, store: "embedded:" + path}
	var got reconciled
	if err := json.Unmarshal([]byte(c.want(0, "reconcile", "--once", "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	if got != (reconciled{Reclaimed: 2}) {
		t.Errorf("reconcile --once = %+v, want 2 reclaimed", got)
	}
	var avail struct {
		Limits []struct {
			Limit     string `json:"limit"`
			Available int64  `json:"available"`
		} `json:"limits"`
	}
	out := c.want(0, "available", "-e", "job", "-r", "emr", "-l", "slots:5/concurrent", "-o", "json")
	if err := json.Unmarshal([]byte(out), &avail); err != nil || len(avail.Limits) != 1 || avail.Limits[0].Available != 4 {
		t.Errorf("available after reconcile = %s, want 4 slots (the live lease holds one)", out)
	}
	if got := c.want(0, "reconcile", "--once", "-o", "json"); got == "" {
		t.Error("no output")
	}
}

func TestReconcileRefusesServer(t *testing.T) {
	if code, _, _ := run(t, "", "reconcile", "--server", "http://127.0.0.1:1"); code != 2 {
		t.Errorf("reconcile --server: exit %d, want 2 (usage)", code)
	}
}
