package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/reconcile"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// expiredLeases takes n slots on a memory store with leases that expired
// an hour ago by the wall clock, and returns the store and a function
// reading the free slots.
func expiredLeases(t *testing.T, n int) (*memory.Store, func() int64) {
	t.Helper()
	ctx := context.Background()
	st := memory.New()
	slots := tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", 5))
	past, err := tollgate.New(st, tollgate.WithClock(clock.NewFake(time.Now().Add(-time.Hour))))
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, err := past.Acquire(ctx, "job", "emr", tollgate.Consume{"slots": 1}, slots, tollgate.WithLeaseTTL(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	return st, func() int64 {
		t.Helper()
		sts, err := past.Available(ctx, "job", "emr", slots)
		if err != nil {
			t.Fatal(err)
		}
		return sts[0].Available
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// In reconcile mode, an invocation (whatever its event) is one pass.
func TestReconcileHandler(t *testing.T) {
	st, free := expiredLeases(t, 3)
	r, err := reconcile.New(st)
	if err != nil {
		t.Fatal(err)
	}
	h := &reconcileHandler{r: r, log: quiet()}
	scheduled := json.RawMessage(`{"source":"aws.events","detail-type":"Scheduled Event","detail":{}}`)
	resp, err := h.handle(context.Background(), scheduled)
	if err != nil || resp != (reconcileResponse{Reclaimed: 3}) {
		t.Fatalf("handle = %+v, %v; want 3 reclaimed", resp, err)
	}
	if got := free(); got != 5 {
		t.Errorf("free slots = %d, want 5", got)
	}
	if resp, _ := h.handle(context.Background(), scheduled); resp.Reclaimed != 0 {
		t.Errorf("a second invocation reclaimed %d, want 0", resp.Reclaimed)
	}
}

// In aggregate mode, a batch reconciles when a pass is due, and not again
// before the interval has passed.
func TestAggregateHandlerReconcilesWhenDue(t *testing.T) {
	st, free := expiredLeases(t, 2)
	r, err := reconcile.New(st)
	if err != nil {
		t.Fatal(err)
	}
	h := &handler{usage: st, retention: time.Hour, log: quiet(), reconciler: r, reconcileEvery: time.Hour}
	ev := events.DynamoDBTimeWindowEvent{}
	if _, err := h.handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if got := free(); got != 5 {
		t.Fatalf("free slots after the first batch = %d, want 5", got)
	}
	last := h.lastReconcile
	if _, err := h.handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if h.lastReconcile != last {
		t.Error("a second batch within the interval reconciled again")
	}
}
