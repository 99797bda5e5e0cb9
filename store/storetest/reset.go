package storetest

import (
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Resets (store.Buckets.Reset): the checked refilling limits of a bucket
// are full at once, whatever emptied them, and nothing else changes.
func resetCases() []testCase {
	return []testCase{
		{"PenaltyLifted", testResetPenaltyLifted},
		{"DebtCleared", testResetDebtCleared},
		{"OnlyCheckedRefillingLimits", testResetOnlyChecked},
		{"AuditEventOnce", testResetAudit},
		{"MissingBucket", testResetMissingBucket},
	}
}

// reset resets bucket b at now with ev (nil: no event).
func (e *Env) reset(now int64, b store.BucketRequest, ev *model.AuditEvent) {
	e.t.Helper()
	req := &store.ResetRequest{Now: now, Bucket: store.BucketRequest{Key: b.Key, Limits: append([]store.LimitRequest(nil), b.Limits...)},
		Event: ev}
	for cur := e.latest.Load(); now > cur && !e.latest.CompareAndSwap(cur, now); cur = e.latest.Load() {
	}
	if err := e.s.Reset(e.ctx, e.ns, req); err != nil {
		e.t.Fatalf("Reset at %+d ms: %v", now-T0, err)
	}
}

func (e *Env) resetEvent(k store.BucketKey) *model.AuditEvent {
	ev := e.event(model.ActionLimitReset, k.Entity, k.Resource)
	ev.Details = map[string]string{"reason": "storetest", "limits": "rpm"}
	return &ev
}

// A penalized limit is full again at once, and its whole capacity can be
// consumed at the moment of the reset.
func testResetPenaltyLifted(t *testing.T, e *Env) {
	k := Key("key-1", "openai")
	e.grant(T0, breq(k, checked("rpm", rpm100, 1000)))
	e.penalize(T0+1000, T0+60_000, breq(k, checked("rpm", rpm100, 0)))
	e.deny(T0+2000, breq(k, checked("rpm", rpm100, 1000)))
	e.reset(T0+2000, breq(k, checked("rpm", rpm100, 0)), e.resetEvent(k))
	e.WantTokensAt(k, "rpm", T0+2000, 100_000)
	e.grant(T0+2000, breq(k, checked("rpm", rpm100, 100_000)))
	e.deny(T0+2000, breq(k, checked("rpm", rpm100, 1000)))
	// Refill goes on from the reset, not from the penalty's end.
	e.grant(T0+2600, breq(k, checked("rpm", rpm100, 1000)))
}

// A limit in debt (ApplyDeltas past zero) is full after a reset.
func testResetDebtCleared(t *testing.T, e *Env) {
	k := Key("key-1", "openai")
	e.grant(T0, breq(k, checked("rpm", rpm100, 100_000)))
	e.deltas(delta(k, "rpm", 250_000))
	e.deny(T0+1000, breq(k, checked("rpm", rpm100, 1000)))
	e.reset(T0+1000, breq(k, checked("rpm", rpm100, 0)), nil)
	e.WantTokensAt(k, "rpm", T0+1000, 100_000)
	e.grant(T0+1000, breq(k, checked("rpm", rpm100, 100_000)))
}

// An unchecked limit and a concurrency limit of the same bucket keep
// their balances.
func testResetOnlyChecked(t *testing.T, e *Env) {
	k := Key("key-1", "openai")
	tpm := rate(10_000_000, 10_000_000, 60_000)
	e.grant(T0, breq(k, checked("rpm", rpm100, 60_000), checked("tpm", tpm, 500_000), checked("inflight", conc(5000), 1000)))
	e.reset(T0, breq(k, checked("rpm", rpm100, 0), unchecked("tpm", tpm), checked("inflight", conc(5000), 0)), nil)
	e.WantTokensAt(k, "rpm", T0, 100_000)
	e.WantTokensAt(k, "tpm", T0, 9_500_000)
	e.WantStored(k, "inflight", bucket.State{Tokens: 4000})
	e.deny(T0, breq(k, checked("tpm", tpm, 9_500_001)))
}

// A reset's event is listed once under its entity; one without an event
// adds none.
func testResetAudit(t *testing.T, e *Env) {
	k := Key("key-1", "openai")
	e.grant(T0, breq(k, checked("rpm", rpm100, 50_000)))
	e.reset(T0, breq(k, checked("rpm", rpm100, 0)), nil)
	if evs := e.audit("key-1"); len(evs) != 0 {
		t.Fatalf("a reset without an event listed %v", eventIDs(evs))
	}
	e.grant(T0+1, breq(k, checked("rpm", rpm100, 50_000)))
	ev := e.resetEvent(k)
	e.reset(T0+2, breq(k, checked("rpm", rpm100, 0)), ev)
	evs := e.audit("key-1")
	if len(evs) != 1 || !sameEvent(evs[0], *ev) {
		t.Fatalf("ListAudit(key-1) = %+v, want the reset's event %+v once", evs, *ev)
	}
	e.WantTokensAt(k, "rpm", T0+2, 100_000)
}

// A missing bucket is full already: the reset writes its event, and the
// bucket is absent or full.
func testResetMissingBucket(t *testing.T, e *Env) {
	k := Key("new-key", "openai")
	ev := e.resetEvent(k)
	e.reset(T0, breq(k, checked("rpm", rpm100, 0)), ev)
	if evs := e.audit("new-key"); len(evs) != 1 || !sameEvent(evs[0], *ev) {
		t.Errorf("ListAudit(new-key) = %+v, want the reset's event", evs)
	}
	if rec := e.Read(k)[0]; rec != nil {
		e.WantTokensAt(k, "rpm", T0, 100_000)
	}
	e.grant(T0, breq(k, checked("rpm", rpm100, 100_000)))
	e.deny(T0, breq(k, checked("rpm", rpm100, 1000)))
}
