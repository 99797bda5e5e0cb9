package storetest

import (
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Penalties (store.Buckets.Penalize): a limit emptied until a time holds
// nothing before it and refills from zero after it, exactly.
func penaltyCases() []testCase {
	return []testCase{
		{"EmptyUntilThenRefills", testPenaltyEmptyUntil},
		{"LongerPenaltyKept", testPenaltyLongerKept},
		{"OnlyCheckedRefillingLimits", testPenaltyOnlyChecked},
		{"MissingBucketCreated", testPenaltyMissingBucket},
		{"AuditEventListed", testPenaltyAudit},
	}
}

// rpm100 is 100 tokens a minute, burst 100: 1 token per 600 ms.
var rpm100 = rate(100_000, 100_000, 60_000)

func (e *Env) penalize(now, until int64, b store.BucketRequest) {
	e.t.Helper()
	e.penalizeWith(now, until, b, nil)
}

// penalizeWith penalizes with an audit event (nil: none).
func (e *Env) penalizeWith(now, until int64, b store.BucketRequest, ev *model.AuditEvent) {
	e.t.Helper()
	req := &store.PenaltyRequest{Now: now, Until: until, Bucket: store.BucketRequest{Key: b.Key, Limits: append([]store.LimitRequest(nil), b.Limits...)},
		Event: ev}
	for cur := e.latest.Load(); now > cur && !e.latest.CompareAndSwap(cur, now); cur = e.latest.Load() {
	}
	if err := e.s.Penalize(e.ctx, e.ns, req); err != nil {
		e.t.Fatalf("Penalize at %+d ms until %+d: %v", now-T0, until-T0, err)
	}
}

func testPenaltyEmptyUntil(t *testing.T, e *Env) {
	k := Key("key-1", "openai")
	e.grant(T0, breq(k, checked("rpm", rpm100, 1000)))
	e.penalize(T0+1000, T0+10_000, breq(k, checked("rpm", rpm100, 0)))
	for _, at := range []int64{T0 + 1000, T0 + 9_999} {
		e.deny(at, breq(k, checked("rpm", rpm100, 1)))
	}
	e.WantTokensAt(k, "rpm", T0+10_000, 0)
	e.deny(T0+10_599, breq(k, checked("rpm", rpm100, 1000))) // one token takes 600 ms of refill
	e.grant(T0+10_600, breq(k, checked("rpm", rpm100, 1000)))
}

func testPenaltyLongerKept(t *testing.T, e *Env) {
	k := Key("key-1", "openai")
	e.penalize(T0, T0+20_000, breq(k, checked("rpm", rpm100, 0)))
	e.penalize(T0+1000, T0+5_000, breq(k, checked("rpm", rpm100, 0))) // shorter: no change
	e.WantTokensAt(k, "rpm", T0+20_000, 0)
	e.deny(T0+19_000, breq(k, checked("rpm", rpm100, 1)))
	e.penalize(T0+2000, T0+30_000, breq(k, checked("rpm", rpm100, 0))) // longer: extends
	e.WantTokensAt(k, "rpm", T0+30_000, 0)
}

func testPenaltyOnlyChecked(t *testing.T, e *Env) {
	k := Key("key-1", "openai")
	tpm := rate(10_000_000, 10_000_000, 60_000)
	e.grant(T0, breq(k, checked("rpm", rpm100, 1000), checked("tpm", tpm, 500_000), checked("inflight", conc(5000), 1000)))
	e.penalize(T0, T0+10_000, breq(k, checked("rpm", rpm100, 0), unchecked("tpm", tpm), checked("inflight", conc(5000), 0)))
	e.WantTokensAt(k, "rpm", T0+10_000, 0)
	e.WantTokensAt(k, "tpm", T0, 9_500_000)
	e.WantStored(k, "inflight", bucket.State{Tokens: 4000})
}

func testPenaltyMissingBucket(t *testing.T, e *Env) {
	k := Key("new-key", "openai")
	e.penalize(T0, T0+6_000, breq(k, checked("rpm", rpm100, 0)))
	e.deny(T0+5_999, breq(k, checked("rpm", rpm100, 1)))
	e.WantTokensAt(k, "rpm", T0+6_000, 0)
	e.WantTokensAt(k, "rpm", T0+66_000, 100_000)
}

// A penalty's audit event is listed under its entity, with the penalty in
// effect; one without an event adds none.
func testPenaltyAudit(t *testing.T, e *Env) {
	k := Key("key-1", "openai")
	e.penalize(T0, T0+5_000, breq(k, checked("rpm", rpm100, 0)))
	if evs := e.audit("key-1"); len(evs) != 0 {
		t.Fatalf("a penalty without an event listed %v", eventIDs(evs))
	}
	ev := e.event(model.ActionLimitPenalize, "key-1", "openai")
	ev.Details = map[string]string{"reason": "vendor 429", "until": "2030-01-01T00:00:10Z", "limits": "rpm"}
	e.penalizeWith(T0+1000, T0+10_000, breq(k, checked("rpm", rpm100, 0)), &ev)
	e.deny(T0+9_999, breq(k, checked("rpm", rpm100, 1)))
	evs := e.audit("key-1")
	if len(evs) != 1 || !sameEvent(evs[0], ev) {
		t.Fatalf("ListAudit(key-1) = %+v, want the penalty's event %+v", evs, ev)
	}
}
