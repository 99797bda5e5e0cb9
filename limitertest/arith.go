package limitertest

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
)

// longestPeriod is the longest refill period a time.Duration holds, in
// whole milliseconds: about 292 years.
const longestPeriod = tollgate.MaxWait / time.Millisecond * time.Millisecond

// Arithmetic saturates, whatever the amounts (docs/semantics.md 1 and 4):
// a capacity of MaxTokens is granted whole, debt saturates at -(2^62-1)
// millitokens, waits longer than a time.Duration holds are exact in
// milliseconds (saturated at MaxWaitMS beyond int64) while RetryAfter
// saturates at MaxWait, and a bucket left alone for millennia refills
// exactly.
func testLimiterSaturation(t *testing.T, e *env) {
	lim := e.limiter()
	saturatedDebt(t, e, lim)
	deepDebt(t, e, lim)
}

// saturatedDebt piles MaxTokens of debt twice onto a limit of capacity
// MaxTokens refilling 1 token per 292 years: the balance stops at
// -(2^62-1) millitokens, and the wait, beyond 2^63-1 ms, saturates; it is a
// rate limit's wait, not a concurrency limit's hint.
func saturatedDebt(t *testing.T, e *env, lim *tollgate.Limiter) {
	slow := tollgate.WithLimits(tollgate.RateLimit("slow", 1, longestPeriod).WithBurst(model.MaxTokens), tollgate.PerMinute("rpm", 100))
	e.commit(e.acquire(lim, "miser", "api", tollgate.Consume{"slow": model.MaxTokens}, slow))
	for range 2 {
		// In debt, slow grants nothing, not even 0: the debt comes by
		// adjustments of leases of another limit.
		le := e.acquire(lim, "miser", "api", tollgate.Consume{"rpm": 1}, slow)
		if err := le.Adjust(e.ctx, tollgate.Consume{"slow": model.MaxTokens}); err != nil {
			t.Fatalf("Adjust by MaxTokens: %v", err)
		}
		e.commit(le)
	}
	e.wantAvailable(lim, "miser", "api", "slow", bucket.Available(bucket.State{Tokens: -bucket.MaxTokens}), slow)
	ex := e.denied(lim, "miser", "api", tollgate.Consume{"slow": 1}, slow)
	if p := ex.Primary(); ex.RetryAfter != tollgate.MaxWait || ex.RetryAfterMS() != tollgate.MaxWaitMS ||
		p.RetryAfterMS != tollgate.MaxWaitMS || p.Waits != "" || p.Kind != tollgate.Rate {
		t.Errorf("saturated debt: RetryAfter %v, RetryAfterMS %d, primary %+v; want MaxWait, MaxWaitMS", ex.RetryAfter, ex.RetryAfterMS(), p)
	}
	if d, err := lim.TimeUntilAvailable(e.ctx, "miser", "api", tollgate.Consume{"slow": 1}, slow); err != nil || d != tollgate.MaxWait {
		t.Errorf("TimeUntilAvailable in saturated debt = %v, %v; want MaxWait", d, err)
	}
}

// deepDebt is the probe of issue 21: 10^12 tokens of debt at 1 a second
// want (10^12+1)·1,000 ms, about 31,700 years, exactly. Two hundred years
// later (as far as the clock goes: the limiter counts time in int64
// nanoseconds, to 2262) the wait is shorter by exactly as much, and a
// limit that refills MaxTokens a millisecond, drained, is full, not
// wrapped.
func deepDebt(t *testing.T, e *env, lim *tollgate.Limiter) {
	rps := tollgate.WithLimits(tollgate.PerSecond("rps", 1))
	one := tollgate.Consume{"rps": 1}
	le := e.acquire(lim, "debtor", "api", one, rps)
	if err := le.Adjust(e.ctx, tollgate.Consume{"rps": 1_000_000_000_000}); err != nil {
		t.Fatal(err)
	}
	e.commit(le)
	fast := tollgate.WithLimits(tollgate.RateLimit("fast", model.MaxTokens, time.Millisecond))
	e.commit(e.acquire(lim, "spender", "api", tollgate.Consume{"fast": model.MaxTokens}, fast))
	const wantMS int64 = (1_000_000_000_000 + 1) * 1000
	start := e.clk.Now().UnixMilli()
	ex := e.denied(lim, "debtor", "api", one, rps)
	if p := ex.Primary(); ex.RetryAfterMS() != wantMS || ex.RetryAfter != tollgate.MaxWait ||
		p.RetryAfterMS != wantMS || p.RetryAfter != tollgate.MaxWait || p.Available != -1_000_000_000_000 {
		t.Errorf("deep debt: RetryAfterMS %d, RetryAfter %v, primary %+v; want %d ms, MaxWait", ex.RetryAfterMS(), ex.RetryAfter, p, wantMS)
	}
	if !strings.Contains(ex.Error(), "1000000000001000ms") {
		t.Errorf("Error() = %q, want the exact wait", ex.Error())
	}
	if d, err := lim.TimeUntilAvailable(e.ctx, "debtor", "api", one, rps); err != nil || d != tollgate.MaxWait {
		t.Errorf("TimeUntilAvailable = %v, %v; want MaxWait", d, err)
	}
	if ex, err := lim.Check(e.ctx, "debtor", "api", one, rps); err != nil || ex == nil || ex.RetryAfterMS() != wantMS {
		t.Errorf("Check = %v, %v; want a refusal of %d ms", ex, err, wantMS)
	}
	const elapsed int64 = 200 * 365 * 24 * 3600 * 1000
	e.clk.Set(time.UnixMilli(start + elapsed))
	if ex := e.denied(lim, "debtor", "api", one, rps); ex.RetryAfterMS() != wantMS-elapsed {
		t.Errorf("200 years on: RetryAfterMS %d, want %d", ex.RetryAfterMS(), wantMS-elapsed)
	}
	e.wantAvailable(lim, "spender", "api", "fast", model.MaxTokens, fast)
}

// A concurrency slot's RetryAfter is the time until the earliest expiry
// among the leases holding it; a full reserved limit whose reservations
// never expire has none and waits for a release; a refusal that a rate
// limit shares looks nothing up (docs/semantics.md 4).
func testLimiterSlotRetryAfter(t *testing.T, e *env) {
	lim := e.limiter(tollgate.WithConcurrencyRetryAfter(250 * time.Millisecond))
	slots := tollgate.WithLimits(tollgate.ConcurrencyLimit("inflight", 2), tollgate.PerMinute("rpm", 1000))
	one := tollgate.Consume{"inflight": 1, "rpm": 1}
	a := e.acquire(lim, "job", "emr", one, slots, tollgate.WithLeaseTTL(time.Minute))
	e.Advance(10_000)
	b := e.acquire(lim, "job", "emr", one, slots, tollgate.WithLeaseTTL(30*time.Second))
	wantSlot := func(step string, want time.Duration, waits string) {
		t.Helper()
		ex := e.denied(lim, "job", "emr", one, slots)
		if p := ex.Primary(); ex.RetryAfter != want || p.Waits != waits || p.Limit != "inflight" || p.RetryAfterMS != want.Milliseconds() {
			t.Errorf("%s: RetryAfter %v, primary %+v; want %v, %q", step, ex.RetryAfter, p, want, waits)
		}
	}
	wantSlot("the second lease expires first", 30*time.Second, tollgate.WaitsExpiry)
	if d, err := lim.TimeUntilAvailable(e.ctx, "job", "emr", one, slots); err != nil || d != 30*time.Second {
		t.Errorf("TimeUntilAvailable = %v, %v; want 30s", d, err)
	}
	e.commit(b)
	c := e.acquire(lim, "job", "emr", one, slots) // the default expiry, 5 minutes
	wantSlot("then the first", 50*time.Second, tollgate.WaitsExpiry)
	e.Advance(50_000)
	wantSlot("the first expired, awaiting a reconciler: the hint", 250*time.Millisecond, tollgate.WaitsRelease)
	e.commit(a)
	e.commit(c)

	// A rate limit exceeded as well: refill decides, nothing is looked up.
	tight := tollgate.WithLimits(tollgate.ConcurrencyLimit("inflight", 1), tollgate.PerMinute("rpm", 1))
	e.acquire(lim, "job-2", "emr", one, tight)
	ex := e.denied(lim, "job-2", "emr", one, tight)
	if ex.RetryAfter != time.Minute || ex.Waits() != "" || statusOf(t, ex.Statuses, "inflight").Waits != tollgate.WaitsRelease {
		t.Errorf("with rpm exceeded too: RetryAfter %v, Waits %q, statuses %+v; want 1m, refill", ex.RetryAfter, ex.Waits(), ex.Statuses)
	}

	// Reservations without an expiry: no retry-after, a release awaited.
	clusters := tollgate.WithLimits(tollgate.ReservedLimit("clusters", 1))
	reserve := func(id string, opts ...tollgate.AcquireOption) error {
		_, err := lim.Acquire(e.ctx, "team", "emr", tollgate.Consume{"clusters": 1}, append([]tollgate.AcquireOption{clusters, tollgate.WithReservation(id)}, opts...)...)
		return err
	}
	if err := reserve("j-1"); err != nil {
		t.Fatal(err)
	}
	ex = e.denied(lim, "team", "emr", tollgate.Consume{"clusters": 1}, clusters, tollgate.WithReservation("j-2"))
	if p := ex.Primary(); ex.RetryAfter != 0 || ex.RetryAfterMS() != 0 || ex.Waits() != tollgate.WaitsRelease || p.Kind != tollgate.Reserved ||
		!strings.Contains(ex.Error(), "waits for a release") {
		t.Errorf("full reserved limit: RetryAfter %v, Waits %q, %q; want none, a release", ex.RetryAfter, ex.Waits(), ex.Error())
	}
	if d, err := lim.TimeUntilAvailable(e.ctx, "team", "emr", tollgate.Consume{"clusters": 1}, clusters, tollgate.WithReservation("j-2")); err != nil || d != tollgate.SlotPoll {
		t.Errorf("TimeUntilAvailable of a full reserved limit = %v, %v; want SlotPoll, never 0", d, err)
	}
	// A reservation with an expiry tells when it comes back at the latest.
	if err := lim.Release(e.ctx, "j-1"); err != nil {
		t.Fatal(err)
	}
	if err := reserve("j-2", tollgate.WithLeaseTTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ex = e.denied(lim, "team", "emr", tollgate.Consume{"clusters": 1}, clusters, tollgate.WithReservation("j-3"))
	if ex.RetryAfter != time.Hour || ex.Waits() != tollgate.WaitsExpiry {
		t.Errorf("full reserved limit, the holder expiring: RetryAfter %v, Waits %q; want 1h, expiry", ex.RetryAfter, ex.Waits())
	}
}

// statusOf returns the status of limit name among sts.
func statusOf(t *testing.T, sts []model.Status, name string) model.Status {
	t.Helper()
	for _, s := range sts {
		if s.Limit == name {
			return s
		}
	}
	t.Fatalf("no status of %s in %+v", name, sts)
	return model.Status{}
}
