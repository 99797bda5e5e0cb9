package tollgate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/memory"
)

func TestResetValidation(t *testing.T) {
	ctx := context.Background()
	lim, adm, _ := newPair(t, memory.New())
	storedSlots(t, adm)
	mustAcquire(t, lim, "key-1", "api", tollgate.Consume{"rpm": 10, "inflight": 1})
	cases := []struct {
		name             string
		entity, resource string
		reason           string
		limits           []string
		field            string
	}{
		{"concurrency limit", "key-1", "api", "", []string{"rpm", "inflight"}, "limits"},
		{"unknown limit", "key-1", "api", "", []string{"tpm"}, "limits"},
		{"bad limit name", "key-1", "api", "", []string{"_wp"}, "limit.name"},
		{"reason too long", "key-1", "api", strings.Repeat("r", model.MaxReasonLen+1), nil, "reason"},
		{"bad entity", "", "api", "", nil, "entity"},
		{"bad resource", "key-1", "", "", nil, "resource"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantValidation(t, adm.Reset(ctx, c.entity, c.resource, c.reason, c.limits), c.field)
		})
	}
	if got := availableOf(t, lim, "key-1", "api", "rpm"); got != 90 {
		t.Errorf("rpm = %d, want 90: refused resets change nothing", got)
	}
	if evs, err := adm.AuditEvents(ctx, "key-1", "", 100); err != nil || len(evs) != 0 {
		t.Errorf("audit events = %v, %v; want none", evs, err)
	}
}

// A reset lifts a penalty at once, forgives debt, leaves concurrency
// tokens held by open leases alone, and is recorded with who and why.
func TestResetLiftsPenaltyAndDebt(t *testing.T) {
	ctx := context.Background()
	lim, adm, clk := newPair(t, memory.New())
	storedSlots(t, adm)
	held := mustAcquire(t, lim, "key-1", "api", tollgate.Consume{"rpm": 1, "inflight": 1})
	if err := lim.Penalize(ctx, "key-1", "api", clk.Now().Add(time.Hour), "vendor 429", []string{"rpm"}); err != nil {
		t.Fatal(err)
	}
	if _, err := lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1}); !errorsIsRateLimited(err) {
		t.Fatalf("penalized acquire: err %v, want rate limited", err)
	}
	if err := adm.Reset(ctx, "key-1", "api", "vendor recovered", nil, tollgate.WithPrincipal("ops")); err != nil {
		t.Fatal(err)
	}
	if got := availableOf(t, lim, "key-1", "api", "rpm"); got != 100 {
		t.Errorf("rpm after reset = %d, want 100", got)
	}
	if got := availableOf(t, lim, "key-1", "api", "inflight"); got != 3 {
		t.Errorf("inflight after reset = %d, want 3 (the open lease keeps its slot)", got)
	}
	// Debt, from an adjustment past the balance.
	if err := held.Adjust(ctx, tollgate.Consume{"rpm": 250}); err != nil {
		t.Fatal(err)
	}
	if err := held.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := availableOf(t, lim, "key-1", "api", "rpm"); got >= 0 {
		t.Fatalf("rpm = %d, want debt", got)
	}
	if err := adm.Reset(ctx, "key-1", "api", "", []string{"rpm"}); err != nil {
		t.Fatal(err)
	}
	if got := availableOf(t, lim, "key-1", "api", "rpm"); got != 100 {
		t.Errorf("rpm after the second reset = %d, want 100", got)
	}
	evs, err := adm.AuditEvents(ctx, "key-1", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var resets []tollgate.AuditEvent
	for _, ev := range evs {
		if ev.Action == model.ActionLimitReset {
			resets = append(resets, ev)
		}
	}
	if len(resets) != 2 {
		t.Fatalf("%d reset events, want 2: %+v", len(resets), evs)
	}
	if r := resets[0]; r.Principal != "ops" || r.Resource != "api" || r.Details["reason"] != "vendor recovered" || r.Details["limits"] != "*" {
		t.Errorf("first reset event = %+v", r)
	}
	if r := resets[1]; r.Details["limits"] != "rpm" {
		t.Errorf("second reset event = %+v, want limits rpm", r)
	}
}

// A bucket governed by per-call limits is reset under the parameters it
// holds; a bucket never used is full, and its reset writes the event only.
func TestResetBucketsWithoutStoredLimits(t *testing.T) {
	ctx := context.Background()
	lim, adm, _ := newPair(t, memory.New())
	tpm := tollgate.WithLimits(tollgate.PerMinute("tpm", 1000))
	mustAcquire(t, lim, "k", "llm", tollgate.Consume{"tpm": 900}, tpm)
	if err := adm.Reset(ctx, "k", "llm", "", []string{"tpm"}); err != nil {
		t.Fatal(err)
	}
	if got := availableOf(t, lim, "k", "llm", "tpm", tpm); got != 1000 {
		t.Errorf("tpm after reset = %d, want 1000", got)
	}
	if err := adm.Reset(ctx, "never-used", "llm", "", nil); err != nil {
		t.Fatalf("reset of a bucket that does not exist: %v", err)
	}
	if evs, _ := adm.AuditEvents(ctx, "never-used", "", 10); len(evs) != 1 || evs[0].Action != model.ActionLimitReset {
		t.Errorf("events of the unused bucket = %+v, want one reset", evs)
	}
}

func errorsIsRateLimited(err error) bool { return errors.Is(err, tollgate.ErrRateLimited) }
