package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

func bucketCases() []testCase {
	return []testCase{
		{"ConsumeCreatesFullAndDebits", testConsumeCreatesFullAndDebits},
		{"DeniedDebitsNothing", testDeniedDebitsNothing},
		{"UncheckedLimitsNotRequired", testUncheckedLimitsNotRequired},
		{"CheckedZeroAmountNeedsNonNegative", testCheckedZeroAmount},
		{"ExactRefill", testExactRefill},
		{"ExactSlowRefill", testExactSlowRefill},
		{"TimeNeverRunsBackwards", testTimeNeverRunsBackwards},
		{"ParamAdoption", testParamAdoption},
		{"ApplyDeltas", testApplyDeltas},
		{"ApplyDeltasMissingIgnored", testApplyDeltasMissing},
		{"ReadBuckets", testReadBuckets},
		{"CancelledContext", testCancelledContext},
	}
}

// 100 tokens per minute, capacity 100: 5/3 millitokens per millisecond.
var perMinute100 = rate(100_000, 100_000, 60_000)

func testConsumeCreatesFullAndDebits(t *testing.T, e *Env) {
	k := Key("e1", "api")
	p := rate(10_000, 10_000, 1_000) // 10 tokens/s, 10 ms per token

	if got := e.Read(k)[0]; got != nil {
		t.Fatalf("bucket exists before first Consume: %+v", got)
	}
	req := e.grant(T0, breq(k, checked("a", p, 3_000)))
	e.wantObserved(req, k, "a", bucket.State{Tokens: 10_000}) // created full, before the debit

	l, rec := e.Limit(k, "a")
	if rec.Refilled != T0 {
		t.Errorf("Refilled = %d, want %d", rec.Refilled, T0)
	}
	if l.Params != p {
		t.Errorf("stored Params = %+v, want %+v", l.Params, p)
	}
	e.WantStored(k, "a", bucket.State{Tokens: 7_000})

	// 100 ms later: +1000 refilled, Observed is after refill, before debit.
	req = e.grant(T0+100, breq(k, checked("a", p, 500)))
	e.wantObserved(req, k, "a", bucket.State{Tokens: 8_000})
	e.WantStored(k, "a", bucket.State{Tokens: 7_500})
	e.wantRefilledBy(k, T0+100)

	// 3 ms later: 30 millitokens accrue; requesting exactly the balance is
	// granted and leaves zero.
	req = e.grant(T0+103, breq(k, checked("a", p, 7_530)))
	e.wantObserved(req, k, "a", bucket.State{Tokens: 7_530})
	e.WantStored(k, "a", bucket.State{Tokens: 0})
	// One millitoken more than the balance is denied.
	req = e.deny(T0+104, breq(k, checked("a", p, 11)))
	e.wantObserved(req, k, "a", bucket.State{Tokens: 10})
	e.WantTokensAt(k, "a", T0+104, 10)
}

func testDeniedDebitsNothing(t *testing.T, e *Env) {
	k1, k2, k3 := Key("child", "api"), Key("parent", "api"), Key("fresh", "api")
	pa := rate(5_000, 1_000, 1_000)
	pc := conc(4_000)
	pb := rate(2_000, 1_000, 60_000)

	// Grant: k1 a 5000->4000, c 4000->3000; k2 b 2000->500.
	e.grant(T0, breq(k1, checked("a", pa, 1_000), checked("c", pc, 1_000)), breq(k2, checked("b", pb, 1_500)))
	e.WantStored(k1, "a", bucket.State{Tokens: 4_000})
	e.WantStored(k1, "c", bucket.State{Tokens: 3_000})
	e.WantStored(k2, "b", bucket.State{Tokens: 500})

	// Only the second bucket is short: nothing is debited anywhere.
	req := e.deny(T0, breq(k1, checked("a", pa, 1_000), checked("c", pc, 2_000)), breq(k2, checked("b", pb, 501)))
	e.wantObserved(req, k1, "a", bucket.State{Tokens: 4_000})
	e.wantObserved(req, k1, "c", bucket.State{Tokens: 3_000})
	e.wantObserved(req, k2, "b", bucket.State{Tokens: 500})
	e.WantTokensAt(k1, "a", T0, 4_000)
	e.WantTokensAt(k1, "c", T0, 3_000)
	e.WantTokensAt(k2, "b", T0, 500)

	// Only the second limit of one bucket is short: the first is untouched.
	e.deny(T0, breq(k1, checked("a", pa, 4_000), checked("c", pc, 3_001)))
	e.WantTokensAt(k1, "a", T0, 4_000)
	e.WantTokensAt(k1, "c", T0, 3_000)

	// A denied request that names a new bucket debits nothing there either:
	// the bucket is absent or full.
	req = e.deny(T0, breq(k3, checked("a", pa, 2_000)), breq(k2, checked("b", pb, 1_000)))
	e.wantObserved(req, k3, "a", bucket.State{Tokens: 5_000})
	if rec := e.Read(k3)[0]; rec != nil {
		e.WantTokensAt(k3, "a", T0, 5_000)
	}
	e.WantTokensAt(k2, "b", T0, 500)

	// Later, with refill, a denial still debits nothing: in 30 s a refills
	// to its capacity and b, at 1000 per minute, gains 500 millitokens.
	req = e.deny(T0+30_000, breq(k1, checked("a", pa, 5_000)), breq(k2, checked("b", pb, 1_001)))
	e.wantObserved(req, k1, "a", bucket.State{Tokens: 5_000})
	e.wantObserved(req, k2, "b", bucket.State{Tokens: 1_000})
	e.WantTokensAt(k1, "a", T0+30_000, 5_000)
	e.WantTokensAt(k2, "b", T0+30_000, 1_000)
	e.WantTokensAt(k1, "c", T0+30_000, 3_000) // a concurrency limit never refills

	// And the same request with b satisfiable debits both buckets.
	e.grant(T0+30_000, breq(k1, checked("a", pa, 5_000)), breq(k2, checked("b", pb, 1_000)))
	e.WantTokensAt(k1, "a", T0+30_000, 0)
	e.WantTokensAt(k2, "b", T0+30_000, 0)
}

func testUncheckedLimitsNotRequired(t *testing.T, e *Env) {
	k := Key("e1", "api")
	pa := rate(10_000, 1_000, 1_000) // 1 millitoken per ms
	pb := rate(2_000, 2_000, 1_000)  // 2 millitokens per ms

	e.grant(T0, breq(k, checked("a", pa, 1_000), checked("b", pb, 2_000)))
	e.WantStored(k, "b", bucket.State{Tokens: 0})

	// b holds 200 at +100ms: an unchecked b does not stop a request, and is
	// refilled (Observed shows the refill).
	req := e.grant(T0+100, breq(k, checked("a", pa, 1_000), unchecked("b", pb)))
	e.wantObserved(req, k, "a", bucket.State{Tokens: 9_100})
	e.wantObserved(req, k, "b", bucket.State{Tokens: 200})
	e.WantTokensAt(k, "b", T0+100, 200)
	e.WantTokensAt(k, "a", T0+100, 8_100)

	// Even in debt, an unchecked limit does not block.
	e.deltas(delta(k, "b", 5_000)) // 200 - 5000 = -4800
	req = e.grant(T0+100, breq(k, checked("a", pa, 100), unchecked("b", pb)))
	e.wantObserved(req, k, "b", bucket.State{Tokens: -4_800})
	e.WantTokensAt(k, "a", T0+100, 8_000)
	e.WantTokensAt(k, "b", T0+100, -4_800)

	// Checked, it does.
	req = e.deny(T0+100, breq(k, checked("a", pa, 100), checked("b", pb, 1)))
	e.wantObserved(req, k, "b", bucket.State{Tokens: -4_800})
	e.WantTokensAt(k, "a", T0+100, 8_000)
}

func testCheckedZeroAmount(t *testing.T, e *Env) {
	k := Key("e1", "api")
	p := rate(1_000, 1_000, 1_000) // 1 millitoken per ms
	c := conc(3_000)

	e.grant(T0, breq(k, checked("a", p, 1_000), checked("c", c, 3_000)))
	// Zero balance covers an amount of zero.
	e.grant(T0, breq(k, checked("a", p, 0), checked("c", c, 0)))

	e.deltas(delta(k, "a", 500), delta(k, "c", 1)) // a -500, c -1
	req := e.deny(T0, breq(k, checked("a", p, 0)))
	e.wantObserved(req, k, "a", bucket.State{Tokens: -500})
	req = e.deny(T0, breq(k, checked("c", c, 0)))
	e.wantObserved(req, k, "c", bucket.State{Tokens: -1})

	req = e.deny(T0+499, breq(k, checked("a", p, 0)))
	e.wantObserved(req, k, "a", bucket.State{Tokens: -1})
	req = e.grant(T0+500, breq(k, checked("a", p, 0)))
	e.wantObserved(req, k, "a", bucket.State{Tokens: 0})

	// Time does not repay a concurrency limit; a refund does.
	e.deny(T0+3_600_000, breq(k, checked("c", c, 0)))
	e.deltas(delta(k, "c", -1))
	req = e.grant(T0+3_600_000, breq(k, checked("c", c, 0)))
	e.wantObserved(req, k, "c", bucket.State{Tokens: 0})
}

// testExactRefill drains a 100-per-minute bucket and then refills it through
// Consume calls of amount 0 at irregular small steps: every call must observe
// exactly floor(elapsed * 100000 / 60000) millitokens, and after 60 s exactly
// the capacity, which is only possible if the store carries State.Rem.
func testExactRefill(t *testing.T, e *Env) {
	k := Key("e1", "api")
	p := perMinute100
	e.grant(T0, breq(k, checked("rpm", p, 100_000)))
	e.WantStored(k, "rpm", bucket.State{})

	steps := []int64{1, 7, 13, 3, 29, 1, 2, 11}
	bad := 0
	calls := 0
	var el int64
	for i := 0; el < 60_000; i++ {
		el = min(el+steps[i%len(steps)], 60_000)
		req := e.grant(T0+el, breq(k, checked("rpm", p, 0)))
		calls++
		n := el * p.Amount
		want := bucket.State{Tokens: n / p.Period, Rem: n % p.Period}
		if want.Tokens >= p.Capacity {
			want = bucket.State{Tokens: p.Capacity}
		}
		if got := req.Buckets[0].Limits[0].Observed; got != want {
			if bad++; bad <= 5 {
				t.Errorf("after %d ms (%d calls) Observed = %s, want %s", el, calls, stateString(got), stateString(want))
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d refill observations wrong", bad, calls)
	}
	e.WantStored(k, "rpm", bucket.State{Tokens: 100_000})
	// Full stays full (no excess credit, no remainder).
	req := e.grant(T0+60_001, breq(k, checked("rpm", p, 0)))
	e.wantObserved(req, k, "rpm", bucket.State{Tokens: 100_000})
	t.Logf("%d calls refilled exactly 100000 millitokens in 60 s", calls)
}

// testExactSlowRefill: 1 millitoken per second, polled every few ms, credits
// one millitoken per full second and never more.
func testExactSlowRefill(t *testing.T, e *Env) {
	k := Key("e1", "api")
	p := rate(1_000, 1, 1_000)
	e.grant(T0, breq(k, checked("a", p, 1_000)))
	var el int64
	for el < 5_000 {
		el += 9
		req := e.grant(T0+el, breq(k, checked("a", p, 0)))
		want := bucket.State{Tokens: el / 1_000, Rem: el % 1_000}
		if got := req.Buckets[0].Limits[0].Observed; got != want {
			t.Fatalf("after %d ms Observed = %s, want %s", el, stateString(got), stateString(want))
		}
	}
	// el is 5004: 5 millitokens and 4/1000 of one accrued. A debit of the
	// whole balance keeps the accrued fraction.
	e.grant(T0+el, breq(k, checked("a", p, el/1_000)))
	req := e.grant(T0+el+995, breq(k, checked("a", p, 0)))
	e.wantObserved(req, k, "a", bucket.State{Tokens: 0, Rem: el%1_000 + 995})
	req = e.grant(T0+el+1_000-el%1_000, breq(k, checked("a", p, 0)))
	e.wantObserved(req, k, "a", bucket.State{Tokens: 1, Rem: 0})
}

func testTimeNeverRunsBackwards(t *testing.T, e *Env) {
	k := Key("e1", "api")
	p := rate(10_000, 1_000, 1_000) // 1 millitoken per ms
	e.grant(T0+1_000, breq(k, checked("a", p, 10_000)))

	// An earlier time (another machine's clock) credits nothing and is not
	// an error.
	req := e.deny(T0, breq(k, checked("a", p, 1)))
	e.wantObserved(req, k, "a", bucket.State{})
	req = e.grant(T0+500, breq(k, checked("a", p, 0)))
	e.wantObserved(req, k, "a", bucket.State{})
	// Refill resumes from the latest time seen, T0+1000.
	req = e.grant(T0+1_250, breq(k, checked("a", p, 0)))
	e.wantObserved(req, k, "a", bucket.State{Tokens: 250})
	// An earlier request still debits what the balance covers.
	req = e.grant(T0+1_100, breq(k, checked("a", p, 200)))
	e.wantObserved(req, k, "a", bucket.State{Tokens: 250})
	req = e.grant(T0+1_300, breq(k, checked("a", p, 0)))
	e.wantObserved(req, k, "a", bucket.State{Tokens: 100})
	e.wantRefilledBy(k, T0+1_300)
}

func testParamAdoption(t *testing.T, e *Env) {
	k := Key("e1", "api")
	p100 := rate(100_000, 100_000, 60_000)
	p50 := rate(50_000, 100_000, 60_000)

	// Rate limit: capacity 100 -> 50 clamps, 50 -> 100 does not add tokens.
	e.grant(T0, breq(k, checked("rpm", p100, 10_000)))
	req := e.grant(T0, breq(k, checked("rpm", p50, 0)))
	e.wantObserved(req, k, "rpm", bucket.State{Tokens: 50_000})
	if l, _ := e.Limit(k, "rpm"); l.Params != p50 {
		t.Errorf("Params after change = %+v, want %+v", l.Params, p50)
	}
	e.WantStored(k, "rpm", bucket.State{Tokens: 50_000})
	req = e.grant(T0, breq(k, checked("rpm", p100, 0)))
	e.wantObserved(req, k, "rpm", bucket.State{Tokens: 50_000})
	if l, _ := e.Limit(k, "rpm"); l.Params != p100 {
		t.Errorf("Params after change back = %+v, want %+v", l.Params, p100)
	}

	// Rate change: time before the change refills at the old rate, after it
	// at the new one.
	e.grant(T0, breq(k, checked("rpm", p100, 50_000)))
	p200 := rate(100_000, 200_000, 60_000)
	req = e.grant(T0+30_000, breq(k, checked("rpm", p200, 0)))
	e.wantObserved(req, k, "rpm", bucket.State{Tokens: 50_000}) // 30 s at 100/min
	req = e.grant(T0+40_000, breq(k, checked("rpm", p200, 0)))
	e.wantObserved(req, k, "rpm", bucket.State{Tokens: 83_333, Rem: 20_000}) // + 10 s at 200/min

	// Concurrency limit: the tokens in use stay in use.
	c5, c3, c10 := conc(5_000), conc(3_000), conc(10_000)
	e.grant(T0+40_000, breq(k, checked("inflight", c5, 3_000)))
	req = e.grant(T0+40_000, breq(k, checked("inflight", c3, 0)))
	e.wantObserved(req, k, "inflight", bucket.State{Tokens: 0})
	e.deny(T0+40_000, breq(k, checked("inflight", c3, 1)))
	req = e.grant(T0+40_000, breq(k, checked("inflight", c10, 0)))
	e.wantObserved(req, k, "inflight", bucket.State{Tokens: 7_000})
	e.deltas(delta(k, "inflight", -3_000))
	req = e.grant(T0+40_000, breq(k, checked("inflight", c10, 10_000)))
	e.wantObserved(req, k, "inflight", bucket.State{Tokens: 10_000})

	// A limit added to an existing bucket starts full; the others keep
	// their state.
	pn := rate(7_000, 1, 1)
	req = e.grant(T0+40_000, breq(k, checked("rpm", p200, 0), checked("new", pn, 2_000)))
	e.wantObserved(req, k, "new", bucket.State{Tokens: 7_000})
	e.wantObserved(req, k, "rpm", bucket.State{Tokens: 83_333, Rem: 20_000})
	e.WantStored(k, "new", bucket.State{Tokens: 5_000})
	e.WantStored(k, "inflight", bucket.State{Tokens: 0})
}

func testApplyDeltas(t *testing.T, e *Env) {
	k := Key("e1", "api")
	p := rate(10_000, 1_000, 1_000) // 1 millitoken per ms
	c := conc(3_000)
	e.grant(T0, breq(k, unchecked("a", p), unchecked("c", c)))

	// A positive delta consumes unconditionally, into debt.
	e.deltas(delta(k, "a", 15_000))
	e.WantStored(k, "a", bucket.State{Tokens: -5_000})
	// A negative delta refunds.
	e.deltas(delta(k, "a", -2_000))
	e.WantStored(k, "a", bucket.State{Tokens: -3_000})
	// Several deltas in one call, to several limits.
	e.deltas(delta(k, "a", 500), delta(k, "c", 2_000), delta(k, "a", -1_500))
	e.WantStored(k, "a", bucket.State{Tokens: -2_000})
	e.WantStored(k, "c", bucket.State{Tokens: 1_000})

	// Debt blocks and is repaid by refill at the exact time.
	e.deny(T0+2_000, breq(k, checked("a", p, 1)))
	req := e.grant(T0+2_001, breq(k, checked("a", p, 1)))
	e.wantObserved(req, k, "a", bucket.State{Tokens: 1})

	// A refund beyond capacity is clamped by the next refill.
	e.deltas(delta(k, "a", -50_000))
	req = e.grant(T0+2_001, breq(k, checked("a", p, 0)))
	e.wantObserved(req, k, "a", bucket.State{Tokens: 10_000})
	e.WantTokensAt(k, "a", T0+2_001, 10_000)

	// Delta applied to a concurrency limit and returned: back to full.
	e.deltas(delta(k, "c", -2_000))
	req = e.grant(T0+2_001, breq(k, checked("c", c, 3_000)))
	e.wantObserved(req, k, "c", bucket.State{Tokens: 3_000})

	// No deltas at all is fine.
	e.deltas()
}

func testApplyDeltasMissing(t *testing.T, e *Env) {
	k := Key("e1", "api")
	p := rate(10_000, 1_000, 1_000)
	e.grant(T0, breq(k, checked("a", p, 1_000)))

	missing := Key("nobody", "api")
	otherRes := Key("e1", "other")
	// Missing buckets and limits are ignored; the valid deltas of the same
	// call still apply.
	e.deltas(
		delta(missing, "a", 100),
		delta(k, "a", 2_000),
		delta(k, "zzz", 100),
		delta(otherRes, "a", 100),
		delta(k, "a", -500),
	)
	e.WantStored(k, "a", bucket.State{Tokens: 7_500})
	recs := e.Read(missing, otherRes, k)
	if recs[0] != nil || recs[1] != nil {
		t.Errorf("ApplyDeltas created buckets: %+v %+v", recs[0], recs[1])
	}
	if recs[2].Find("zzz") >= 0 || len(recs[2].Limits) != 1 {
		t.Errorf("ApplyDeltas changed the limits of a bucket: %+v", recs[2].Limits)
	}
}

func testReadBuckets(t *testing.T, e *Env) {
	k1, k2 := Key("e1", "api"), Key("e2", "api")
	p := rate(10_000, 1_000, 1_000)
	e.grant(T0, breq(k1, checked("a", p, 10_000), checked("b", conc(2_000), 1_000)))
	e.grant(T0+7, breq(k2, checked("a", p, 4_000)))

	if recs := e.Read(); len(recs) != 0 {
		t.Errorf("ReadBuckets() = %v, want empty", recs)
	}
	recs := e.Read(Key("nobody", "api"), k1, Key("e1", "other"), k2, Key("e2", "api2"))
	for _, i := range []int{0, 2, 4} {
		if recs[i] != nil {
			t.Errorf("ReadBuckets[%d] = %+v, want nil", i, recs[i])
		}
	}
	r1, r2 := recs[1], recs[3]
	if r1 == nil || r2 == nil {
		t.Fatalf("ReadBuckets returned nil for an existing bucket")
	}
	// No refill on read: the stored state and time are returned as they
	// are, although the stored time is long past.
	if r1.Refilled != T0 || r2.Refilled != T0+7 {
		t.Errorf("Refilled = %+d, %+d, want +0, +7", r1.Refilled-T0, r2.Refilled-T0)
	}
	want1 := map[string]store.LimitState{
		"a": {Name: "a", Params: p, State: bucket.State{Tokens: 0}},
		"b": {Name: "b", Params: conc(2_000), State: bucket.State{Tokens: 1_000}},
	}
	if len(r1.Limits) != 2 {
		t.Fatalf("bucket e1 has %d limits, want 2: %+v", len(r1.Limits), r1.Limits)
	}
	for _, l := range r1.Limits {
		if l != want1[l.Name] {
			t.Errorf("limit %s = %+v, want %+v", l.Name, l, want1[l.Name])
		}
	}
	if len(r2.Limits) != 1 || r2.Limits[0] != (store.LimitState{Name: "a", Params: p, State: bucket.State{Tokens: 6_000}}) {
		t.Errorf("bucket e2 = %+v", r2.Limits)
	}

	// The records are copies.
	r1.Limits[0].State.Tokens = 123_456
	r1.Limits[0].Params.Capacity = 1
	r1.Refilled = 42
	again := e.Read(k1)[0]
	if again.Refilled != T0 {
		t.Errorf("mutating a returned record changed Refilled to %d", again.Refilled)
	}
	for _, l := range again.Limits {
		if l != want1[l.Name] {
			t.Errorf("mutating a returned record changed limit %s to %+v", l.Name, l)
		}
	}

	// The request's slices are not retained either.
	req := request(T0+7, breq(k2, checked("a", p, 0)))
	if ok, err := e.s.Consume(e.ctx, e.ns, req); err != nil || !ok {
		t.Fatalf("Consume = %v, %v", ok, err)
	}
	req.Buckets[0].Limits[0].Params.Capacity = 1
	req.Buckets[0].Limits[0].Name = "x"
	if l, _ := e.Limit(k2, "a"); l.Params != p || l.State.Tokens != 6_000 {
		t.Errorf("mutating a request after Consume changed the bucket to %+v", l)
	}
}

func testCancelledContext(t *testing.T, e *Env) {
	k := Key("e1", "api")
	p := rate(10_000, 1_000, 1_000)
	e.grant(T0, breq(k, checked("a", p, 1_000)))

	cancelled, cancel := context.WithCancel(e.ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(e.ctx, e.clk.Now()) // a deadline in the distant past
	defer cancel2()

	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{{"cancelled", cancelled, context.Canceled}, {"expired", expired, context.DeadlineExceeded}} {
		req := request(T0, breq(k, checked("a", p, 1_000)), breq(Key("new", "api"), checked("a", p, 1_000)))
		ok, err := e.s.Consume(c.ctx, e.ns, req)
		if err == nil || ok {
			t.Errorf("%s: Consume = %v, %v; want an error", c.name, ok, err)
		} else if !errors.Is(err, c.want) {
			t.Errorf("%s: Consume error %v does not match %v", c.name, err, c.want)
		}
		if err := e.s.ApplyDeltas(c.ctx, e.ns, []store.Delta{delta(k, "a", 5_000)}); err == nil {
			t.Errorf("%s: ApplyDeltas succeeded", c.name)
		} else if !errors.Is(err, c.want) {
			t.Errorf("%s: ApplyDeltas error %v does not match %v", c.name, err, c.want)
		}
		if _, err := e.s.ReadBuckets(c.ctx, e.ns, []store.BucketKey{k}); err == nil {
			t.Errorf("%s: ReadBuckets succeeded", c.name)
		}
	}
	e.WantStored(k, "a", bucket.State{Tokens: 9_000})
	if rec := e.Read(Key("new", "api"))[0]; rec != nil {
		t.Errorf("a failed Consume created a bucket: %+v", rec)
	}
}
