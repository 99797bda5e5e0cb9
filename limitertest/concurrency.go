package limitertest

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store/storetest"
)

func concurrencyCases() []testCase {
	return []testCase{
		{"LimiterOneBucketFrozenClock", testConcLimiterOneBucketFrozen},
		{"LimiterOneBucketAdvancingClock", testConcLimiterAdvancing},
		{"CascadeAtomicity", testConcCascade},
		{"ConcurrencyLimitChurn", testConcChurn},
		{"QuotaAcrossBoundary", testConcQuota},
	}
}

// Many goroutines on one calendar quota admit exactly its amount in a
// window, and exactly its amount again in the next.
func testConcQuota(t *testing.T, e *env) {
	lim := e.limiter()
	quota, err := tollgate.ParseLimit("q:300/hour@UTC")
	if err != nil {
		t.Fatal(err)
	}
	opt := tollgate.WithLimits(quota)
	for window := range 2 {
		if g := e.frozenGrants(lim, tollgate.Consume{"q": 1}, opt); g != 300 {
			t.Errorf("window %d: %d grants, want exactly 300", window, g)
		}
		e.clk.Set(e.clk.Now().Truncate(time.Hour).Add(time.Hour)) // the next hour
	}
}

// Many goroutines on one bucket with a frozen clock admit exactly the
// capacity, through a limiter (storetest's OneBucketFrozenClock).
func testConcLimiterOneBucketFrozen(t *testing.T, e *env) {
	lim := e.limiter()
	opt := tollgate.WithLimits(tollgate.PerMinute("rpm", 500))
	if g := e.frozenGrants(lim, tollgate.Consume{"rpm": 1}, opt); g != 500 {
		t.Errorf("%d grants, want exactly 500", g)
	}
	e.wantAvailable(lim, "hot", "api", "rpm", 0, opt)
	e.WantTokensAt(storetest.Key("hot", "api"), "rpm", storetest.T0, 0)
}

// As above, with the clock advancing while the goroutines run
// (storetest's OneBucketAdvancingClock).
func testConcLimiterAdvancing(t *testing.T, e *env) {
	lim := e.limiter()
	opt := tollgate.WithLimits(tollgate.PerMinute("rpm", 7_000).WithBurst(50), tollgate.PerMinute("tpm", 1_000_000))
	expected := func(el int64) int64 { return (50_000 + el*7_000_000/60_000) / 1_000 }
	grants, el := e.AdvancingRun(expected, func() (bool, error) {
		le, err := lim.Acquire(e.ctx, "hot", "api", tollgate.Consume{"rpm": 1, "tpm": 2}, opt)
		if errors.Is(err, tollgate.ErrRateLimited) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return true, le.Commit(e.ctx)
	})
	if want := expected(el); grants != want {
		t.Errorf("%d grants in %d ms, want exactly %d", grants, el, want)
	}
	e.wantAvailable(lim, "hot", "api", "rpm", 0, opt)
	e.WantTokensAt(storetest.Key("hot", "api"), "rpm", storetest.T0+el, 50_000+el*7_000_000/60_000-grants*1_000)
}

// Cascade atomicity under contention: 8 children cascade to one parent;
// goroutines acquire random amounts on random children and roll back some.
// The parent's consumption equals the sum of the children's, the parent never
// goes below zero, and grants never exceed its capacity.
func testConcCascade(t *testing.T, e *env) {
	const children, capacity = 8, 300
	lim := e.limiter()
	if _, err := e.admin().CreateEntity(e.ctx, tollgate.Entity{ID: "parent"}); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, children)
	for i := range ids {
		ids[i] = "child-" + strconv.Itoa(i)
		if _, err := e.admin().CreateEntity(e.ctx, tollgate.Entity{ID: ids[i], ParentID: "parent", Cascade: true}); err != nil {
			t.Fatal(err)
		}
	}
	// Each child's capacity equals the parent's, so the parent always binds
	// first.
	opt := tollgate.WithLimits(tollgate.PerMinute("tpm", capacity))
	var held [children]atomic.Int64 // tokens consumed per child, net of rollbacks
	rnd := storetest.NewRand(t)
	seeds := make([]uint64, 16)
	for i := range seeds {
		seeds[i] = rnd.Uint64()
	}
	acquire := func(c int, n int64) *tollgate.Lease {
		le, err := lim.Acquire(e.ctx, ids[c], "api", tollgate.Consume{"tpm": n}, opt)
		if err != nil {
			if !errors.Is(err, tollgate.ErrRateLimited) {
				t.Errorf("Acquire: %v", err)
			}
			return nil
		}
		for _, s := range le.Statuses() {
			if s.Available < 0 {
				t.Errorf("%s below zero after a grant: %+v", s.Entity, s)
			}
		}
		if got := le.Consumed()["tpm"]; got != n {
			t.Errorf("Consumed = %d, want %d (what was asked, debited to child and parent alike)", got, n)
		}
		held[c].Add(n)
		return le
	}
	// Phase 1: random amounts, a quarter rolled back.
	storetest.Parallel(len(seeds), func(i int) {
		r := rand.New(rand.NewPCG(seeds[i], 1))
		for range 30 {
			c, n := r.IntN(children), 1+r.Int64N(5)
			le := acquire(c, n)
			if le == nil {
				continue
			}
			if r.IntN(4) == 0 {
				if err := le.Rollback(e.ctx); err != nil {
					t.Errorf("Rollback: %v", err)
				}
				held[c].Add(-n)
			} else if err := le.Commit(e.ctx); err != nil {
				t.Errorf("Commit: %v", err)
			}
		}
	})
	// Phase 2: with every lease ended, drain with amount 1 until denied.
	storetest.Parallel(len(seeds), func(i int) {
		r := rand.New(rand.NewPCG(seeds[i], 2))
		for {
			le := acquire(r.IntN(children), 1)
			if le == nil {
				return
			}
			if err := le.Commit(e.ctx); err != nil {
				t.Errorf("Commit: %v", err)
			}
		}
	})

	var sum int64
	for c := range children {
		h := held[c].Load()
		sum += h
		if got := capacity - e.available(lim, ids[c], "api", ids[c], "tpm", opt); got != h {
			t.Errorf("%s consumed %d, its grants total %d", ids[c], got, h)
		}
		e.WantTokensAt(storetest.Key(ids[c], "api"), "tpm", storetest.T0, (capacity-h)*1_000)
	}
	if sum != capacity {
		t.Errorf("children granted %d in total, want exactly the parent's capacity %d", sum, capacity)
	}
	if got := e.available(lim, ids[0], "api", "parent", "tpm", opt); got != 0 {
		t.Errorf("parent available %d, want 0", got)
	}
	e.WantTokensAt(storetest.Key("parent", "api"), "tpm", storetest.T0, 0)
}

// Acquire/commit/rollback churn on a concurrency limit never has more
// leases in flight than the capacity, and returns every slot.
func testConcChurn(t *testing.T, e *env) {
	const capacity = 4
	lim := e.limiter()
	opt := tollgate.WithLimits(tollgate.ConcurrencyLimit("inflight", capacity), tollgate.PerSecond("rps", 1_000_000))
	var inflight, peak, grants atomic.Int64
	rnd := storetest.NewRand(t)
	seeds := make([]uint64, 16)
	for i := range seeds {
		seeds[i] = rnd.Uint64()
	}
	storetest.Parallel(len(seeds), func(i int) {
		r := rand.New(rand.NewPCG(seeds[i], 4))
		for range 100 {
			le, err := lim.Acquire(e.ctx, "job", "emr", tollgate.Consume{"inflight": 1, "rps": 1}, opt)
			if err != nil {
				if !errors.Is(err, tollgate.ErrRateLimited) {
					t.Errorf("Acquire: %v", err)
				}
				runtime.Gosched()
				continue
			}
			grants.Add(1)
			cur := inflight.Add(1)
			for {
				p := peak.Load()
				if cur <= p || peak.CompareAndSwap(p, cur) {
					break
				}
			}
			if cur > capacity {
				t.Errorf("%d leases in flight, capacity %d", cur, capacity)
			}
			runtime.Gosched()
			inflight.Add(-1)
			if r.IntN(2) == 0 {
				err = le.Commit(e.ctx)
			} else {
				err = le.Rollback(e.ctx)
			}
			if err != nil {
				t.Errorf("end lease: %v", err)
			}
		}
	})
	if p := peak.Load(); p > capacity || p < 1 {
		t.Errorf("peak in flight %d, want 1..%d", p, capacity)
	}
	if grants.Load() < 100 {
		t.Errorf("only %d grants in 1600 attempts", grants.Load())
	}
	e.wantAvailable(lim, "job", "emr", "inflight", capacity, opt)
	e.WantStored(storetest.Key("job", "emr"), "inflight", bucket.State{Tokens: capacity * 1_000})
	t.Logf("%d grants, peak %d in flight", grants.Load(), peak.Load())
}

// frozenGrants has storetest.Workers goroutines try 40 acquires each of
// consume on hot/api (committing each grant) and returns the grants.
func (e *env) frozenGrants(lim *tollgate.Limiter, consume tollgate.Consume, opt tollgate.AcquireOption) int64 {
	var grants atomic.Int64
	storetest.Parallel(storetest.Workers, func(int) {
		for range 40 {
			le, err := lim.Acquire(e.ctx, "hot", "api", consume, opt)
			if err != nil {
				if !errors.Is(err, tollgate.ErrRateLimited) {
					e.t.Errorf("Acquire: %v", err)
				}
				continue
			}
			grants.Add(1)
			if err := le.Commit(e.ctx); err != nil {
				e.t.Errorf("Commit: %v", err)
			}
		}
	})
	return grants.Load()
}
