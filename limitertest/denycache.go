package limitertest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
)

// The deny cache (tollgate.WithDenyCache) refuses from memory what a
// refusal of the store showed time cannot yet cover: exact only if the
// state the backend reports (Observed, with its remainder) refilled by the
// bucket arithmetic never promises less than the store will hold. A limiter
// with the cache floods a drained bucket, the clock moving in steps that
// refill fractions of a token (7 a minute: 8571.4 ms each), and after each
// of its refusals a limiter without the cache asks the store: it must be
// refused too, with the same statuses and retry-after, so that no acquire
// was refused from memory that the store would have granted.
func testLimiterDenyCacheExact(t *testing.T, e *env) {
	denyCacheExact(t, e, "k", tollgate.Consume{"rpm": 1, "tpm": 10}, rpm7, 137*time.Millisecond, 20*time.Second, 2)
}

// rpm7 is 7 a minute (8571.4 ms a token) and a generous tpm.
var rpm7 = tollgate.WithLimits(tollgate.PerMinute("rpm", 7), tollgate.PerMinute("tpm", 1000))

// The same for a calendar quota (2 an hour of UTC): refused from memory
// until the boundary, granted by the store there, in 7-minute steps over
// two and a half hours from 10 past an hour: two boundaries, 4 grants.
func testLimiterDenyCacheQuota(t *testing.T, e *env) {
	q, err := tollgate.ParseLimit("q:2/hour@UTC")
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Set(e.clk.Now().UTC().Truncate(time.Hour).Add(time.Hour + 10*time.Minute))
	denyCacheExact(t, e, "k", tollgate.Consume{"q": 1}, tollgate.WithLimits(q), 7*time.Minute, 150*time.Minute, 4)
}

// The same through a cascade: the parent's bucket refuses, the child's
// does not.
func testCascadeDenyCacheExact(t *testing.T, e *env) {
	adm := e.admin()
	for _, ent := range []tollgate.Entity{{ID: "org"}, {ID: "k", ParentID: "org", Cascade: true}} {
		if _, err := adm.CreateEntity(e.ctx, ent); err != nil {
			t.Fatalf("CreateEntity: %v", err)
		}
	}
	if _, err := e.limiter().Acquire(e.ctx, "org", "api", tollgate.Consume{"rpm": 7},
		tollgate.WithLimits(tollgate.PerMinute("rpm", 7), tollgate.PerMinute("tpm", 1000))); err != nil {
		t.Fatalf("draining the parent: %v", err)
	}
	denyCacheExact(t, e, "k", tollgate.Consume{"rpm": 1, "tpm": 10}, rpm7, 137*time.Millisecond, 20*time.Second, 2)
}

// denyCacheExact drains entity's bucket under limits, then acquires one
// through a limiter with the deny cache every step for span, and after
// each refusal through a limiter without it: that one must be refused
// too, alike. The limiter with the cache must be granted want times.
func denyCacheExact(t *testing.T, e *env, entity string, one tollgate.Consume, limits tollgate.AcquireOption, step, span time.Duration, want int) {
	cached, plain := e.limiter(tollgate.WithDenyCache(time.Hour)), e.limiter()
	try := func(lim *tollgate.Limiter) *tollgate.RateLimitExceeded {
		le, err := lim.Acquire(e.ctx, entity, "api", one, limits)
		var ex *tollgate.RateLimitExceeded
		if errors.As(err, &ex) {
			return ex
		}
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		e.commit(le)
		return nil
	}
	for try(plain) == nil {
	}
	start := e.clk.Now()
	granted := 0
	for e.clk.Now().Sub(start) < span {
		if got := try(cached); got == nil {
			granted++
		} else if want := try(plain); want == nil {
			t.Fatalf("at %v: refused from memory, granted by the store", e.clk.Now().Sub(start))
		} else if !reflect.DeepEqual(got, want) {
			t.Fatalf("at %v: refusal\n%+v\nwant the store's\n%+v", e.clk.Now().Sub(start), got, want)
		}
		e.clk.Advance(step)
	}
	// Every token refill brought was granted.
	if granted != want {
		t.Errorf("%d granted in %v, want %d", granted, span, want)
	}
	if cached.Stats().Deny.Served == 0 {
		t.Error("no refusal served from memory")
	}
}
