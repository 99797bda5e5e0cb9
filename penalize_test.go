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

// storedSlots stores rpm 100/min and a 4-slot concurrency limit for
// resource api.
func storedSlots(t *testing.T, adm *tollgate.Admin) {
	t.Helper()
	setLimits(t, adm, tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 100), tollgate.ConcurrencyLimit("inflight", 4))
}

func TestPenalizeValidation(t *testing.T) {
	ctx := context.Background()
	lim, adm, clk := newPair(t, memory.New())
	storedSlots(t, adm)
	now := clk.Now()
	cases := []struct {
		name             string
		entity, resource string
		until            time.Time
		reason           string
		limits           []string
		field            string
	}{
		{"until now", "key-1", "api", now, "", []string{"rpm"}, "until"},
		{"until past", "key-1", "api", now.Add(-time.Second), "", []string{"rpm"}, "until"},
		{"until beyond a day", "key-1", "api", now.Add(tollgate.MaxPenalty + time.Millisecond), "", []string{"rpm"}, "until"},
		{"no limits", "key-1", "api", now.Add(time.Second), "", nil, "limits"},
		{"unknown limit", "key-1", "api", now.Add(time.Second), "", []string{"tpm"}, "limits"},
		{"concurrency limit", "key-1", "api", now.Add(time.Second), "", []string{"rpm", "inflight"}, "limits"},
		{"reason too long", "key-1", "api", now.Add(time.Second), strings.Repeat("r", model.MaxReasonLen+1), []string{"rpm"}, "reason"},
		{"bad entity", "", "api", now.Add(time.Second), "", []string{"rpm"}, "entity"},
		{"nothing stored", "key-1", "other", now.Add(time.Second), "", []string{"rpm"}, "limits"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantValidation(t, lim.Penalize(ctx, c.entity, c.resource, c.until, c.reason, c.limits), c.field)
		})
	}
	if got := availableOf(t, lim, "key-1", "api", "rpm"); got != 100 {
		t.Errorf("rpm = %d, want 100: refused penalties change nothing", got)
	}
	if evs, err := adm.AuditEvents(ctx, "key-1", "", 100); err != nil || len(evs) != 0 {
		t.Errorf("audit events = %v, %v; want none", evs, err)
	}
}

// A penalty denies every acquire until its end with a RetryAfter reaching
// it, then the limit refills from zero, exactly; the audit log says who,
// why and until when.
func TestPenalize(t *testing.T) {
	ctx := context.Background()
	lim, adm, clk := newPair(t, memory.New())
	storedSlots(t, adm)
	le := mustAcquire(t, lim, "key-1", "api", tollgate.Consume{"rpm": 1})
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	until := clk.Now().Add(10 * time.Second)
	if err := lim.Penalize(ctx, "key-1", "api", until, "vendor 429", []string{"rpm"}, tollgate.WithPrincipal("alice")); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Duration{0, 5 * time.Second, 10*time.Second - time.Millisecond} {
		clk.Set(until.Add(-10 * time.Second).Add(at))
		_, err := lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1})
		var ex *tollgate.RateLimitExceeded
		if !errors.As(err, &ex) {
			t.Fatalf("acquire at +%v = %v, want denied", at, err)
		}
		if want := until.Sub(clk.Now()); ex.RetryAfter < want {
			t.Errorf("RetryAfter at +%v = %v, want >= %v", at, ex.RetryAfter, want)
		}
	}
	// The concurrency limit, not named, is untouched.
	mustAcquire(t, lim, "key-1", "api", tollgate.Consume{"inflight": 1}).Rollback(ctx)
	clk.Set(until)
	if got := availableOf(t, lim, "key-1", "api", "rpm"); got != 0 {
		t.Errorf("rpm at until = %d, want 0", got)
	}
	clk.Advance(599 * time.Millisecond) // a token takes 600 ms
	if _, err := lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1}); !errors.Is(err, tollgate.ErrRateLimited) {
		t.Errorf("acquire 1 ms before the first token = %v, want denied", err)
	}
	clk.Advance(time.Millisecond)
	mustAcquire(t, lim, "key-1", "api", tollgate.Consume{"rpm": 1}).Commit(ctx)

	evs, err := adm.AuditEvents(ctx, "key-1", "", 100)
	if err != nil || len(evs) != 1 {
		t.Fatalf("audit events = %+v, %v; want one", evs, err)
	}
	ev := evs[0]
	want := map[string]string{"reason": "vendor 429", "until": until.UTC().Format(time.RFC3339Nano), "limits": "rpm"}
	if ev.Action != model.ActionLimitPenalize || ev.Entity != "key-1" || ev.Resource != "api" || ev.Principal != "alice" ||
		len(ev.Details) != len(want) || ev.Details["reason"] != want["reason"] || ev.Details["until"] != want["until"] || ev.Details["limits"] != want["limits"] {
		t.Errorf("event = %+v, want %s of key-1/api by alice with %v", ev, model.ActionLimitPenalize, want)
	}
}

// A lease penalizes with the limits it was acquired with, explicit ones
// included, and every limiter over the store sees the penalty.
func TestLeasePenalize(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	lim, clk := newLim(t, st)
	other, err := tollgate.New(st, tollgate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 100), tollgate.PerMinute("tpm", 1000))
	le := mustAcquire(t, lim, "key-1", "api", tollgate.Consume{"rpm": 1, "tpm": 10}, limits)
	until := clk.Now().Add(time.Minute)
	wantValidation(t, le.Penalize(ctx, until, "", []string{"inflight"}), "limits")
	if err := le.Penalize(ctx, until, "vendor 429", []string{"tpm"}); err != nil {
		t.Fatal(err)
	}
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = other.Acquire(ctx, "key-1", "api", tollgate.Consume{"tpm": 1}, limits)
	var ex *tollgate.RateLimitExceeded
	if !errors.As(err, &ex) || ex.RetryAfter < time.Minute {
		t.Fatalf("acquire of tpm by another limiter = %v, want denied for a minute", err)
	}
	if got := availableOf(t, other, "key-1", "api", "rpm", limits); got != 99 {
		t.Errorf("rpm = %d, want 99: not penalized", got)
	}
	if err := le.Penalize(ctx, until, "", []string{"tpm"}); !errors.Is(err, tollgate.ErrLeaseClosed) {
		t.Errorf("Penalize of an ended lease = %v, want ErrLeaseClosed", err)
	}
}
