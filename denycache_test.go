package tollgate_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// denyEnv is a fake clock, a counting store and the planes over it: a
// limiter with the deny cache (lim), one without on the same store (plain,
// another limiter: its refunds are made elsewhere for lim) and an Admin
// sharing lim's change watch.
type denyEnv struct {
	t     *testing.T
	ctx   context.Context
	clk   *clock.Fake
	st    *faultStore
	lim   *tollgate.Limiter
	plain *tollgate.Limiter
	adm   *tollgate.Admin
}

func newDenyEnv(t *testing.T, maxAge time.Duration, opts ...tollgate.Option) *denyEnv {
	t.Helper()
	e := &denyEnv{t: t, ctx: context.Background(), clk: clock.NewFake(tgEpoch), st: newFaultStore()}
	w, err := tollgate.NewChangeWatch(e.st, tollgate.DefaultRefreshInterval)
	if err != nil {
		t.Fatal(err)
	}
	base := []tollgate.Option{tollgate.WithClock(e.clk)}
	if e.lim, err = tollgate.New(e.st, append(append(base, tollgate.WithChangeWatch(w), tollgate.WithDenyCache(maxAge)), opts...)...); err != nil {
		t.Fatal(err)
	}
	if e.plain, err = tollgate.New(e.st, base...); err != nil {
		t.Fatal(err)
	}
	if e.adm, err = tollgate.NewAdmin(e.st, append(base, tollgate.WithChangeWatch(w))...); err != nil {
		t.Fatal(err)
	}
	return e
}

// consumes runs fn and returns the store's Consume calls it made.
func (e *denyEnv) consumes(fn func()) int {
	e.st.resetCounts()
	fn()
	return e.st.count(mConsume)
}

// try acquires one token of rpm and commits it if granted; it returns the
// refusal, or nil.
func (e *denyEnv) try(lim *tollgate.Limiter, entity string, opts ...tollgate.AcquireOption) *tollgate.RateLimitExceeded {
	e.t.Helper()
	le, err := lim.Acquire(e.ctx, entity, "api", tollgate.Consume{"rpm": 1}, opts...)
	var ex *tollgate.RateLimitExceeded
	switch {
	case errors.As(err, &ex):
		return ex
	case err != nil:
		e.t.Fatalf("Acquire %s: %v", entity, err)
	}
	if err := le.Commit(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	return nil
}

// drain acquires rpm until the store refuses (through plain, so that lim
// remembers nothing) and returns how many were granted.
func (e *denyEnv) drain(entity string, opts ...tollgate.AcquireOption) int {
	e.t.Helper()
	n := 0
	for e.try(e.plain, entity, opts...) == nil {
		n++
	}
	return n
}

func (e *denyEnv) served() uint64 { return e.lim.Stats().Deny.Served }

// TestDenyCacheFlood: refusals within the refill of one token cost one
// Consume, and each is the refusal the store would have given (the same
// statuses and retry-after as a limiter without the cache, on a twin store,
// at every step); the first acquire once refill covers it goes to the store
// and is granted.
func TestDenyCacheFlood(t *testing.T) {
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 10), tollgate.PerMinute("tpm", 1000)) // a token every 6 s
	cases := []struct {
		name   string
		maxAge time.Duration
		step   time.Duration
		// consumes is how many Consume calls the refusals from 0 to 6 s
		// cost: one per maxAge.
		consumes int
	}{
		{"max age beyond the refill", 10 * time.Second, 100 * time.Millisecond, 1},
		{"max age 1s", time.Second, 100 * time.Millisecond, 6},
		{"max age 1s, 1ms steps", time.Second, time.Millisecond, 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, twin := newDenyEnv(t, c.maxAge), newDenyEnv(t, c.maxAge)
			twin.clk = e.clk
			twin.plain, _ = tollgate.New(twin.st, tollgate.WithClock(e.clk)) // the twin's limiter reads e's clock
			if n := e.drain("k", limits); n != 10 {
				t.Fatalf("drained %d, want 10", n)
			}
			twin.drain("k", limits)
			start := e.clk.Now()
			refusals := 0
			calls := e.consumes(func() {
				for e.clk.Now().Sub(start) < 6*time.Second {
					got, want := e.try(e.lim, "k", limits), twin.try(twin.plain, "k", limits)
					if got == nil || want == nil {
						t.Fatalf("at %v: refusal %v, store's %v", e.clk.Now().Sub(start), got, want)
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("at %v: refusal from memory\n%+v\nwant the store's\n%+v", e.clk.Now().Sub(start), got, want)
					}
					refusals++
					e.clk.Advance(c.step)
				}
			})
			if calls != c.consumes {
				t.Errorf("%d refusals cost %d Consume calls, want %d", refusals, calls, c.consumes)
			}
			if got := e.served(); got != uint64(refusals-c.consumes) {
				t.Errorf("Stats().Deny.Served = %d, want %d", got, refusals-c.consumes)
			}
			// 6 s: refill covers one token; the store grants it.
			if calls := e.consumes(func() {
				if ex := e.try(e.lim, "k", limits); ex != nil {
					t.Fatalf("refused at 6 s: %v", ex)
				}
			}); calls != 1 {
				t.Errorf("the grant at 6 s made %d Consume calls, want 1", calls)
			}
		})
	}
}

// TestDenyCacheSeesChanges: what changes a bucket's answer through this
// process is seen at once, by the next acquire, which goes to the store: a
// stored limit changed (raised: the balance stays empty, and the store's
// refusal says when the new rate refills a token), a reset by an Admin
// sharing the watch, a rollback or an adjustment down of a lease of this
// limiter (granted).
func TestDenyCacheSeesChanges(t *testing.T) {
	cfg := func(n int64) tollgate.Config {
		return tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", n)}}
	}
	cases := []struct {
		name string
		// hold is taken before the bucket is drained, and change runs
		// after the refusal was remembered.
		hold   bool
		change func(e *denyEnv, held *tollgate.Lease) error
		// retry is the store's refusal's retry-after after the change
		// (0: granted).
		retry time.Duration
	}{
		{"limit raised", false, func(e *denyEnv, _ *tollgate.Lease) error {
			return e.adm.SetLimits(e.ctx, tollgate.ResourceScope("api"), cfg(20))
		}, 3 * time.Second},
		{"reset", false, func(e *denyEnv, _ *tollgate.Lease) error {
			return e.adm.Reset(e.ctx, "k", "api", "test", nil)
		}, 0},
		{"rollback", true, func(e *denyEnv, held *tollgate.Lease) error { return held.Rollback(e.ctx) }, 0},
		{"adjusted down", true, func(e *denyEnv, held *tollgate.Lease) error {
			if err := held.Adjust(e.ctx, tollgate.Consume{"rpm": -1}); err != nil {
				return err
			}
			return held.Commit(e.ctx)
		}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newDenyEnv(t, time.Hour)
			if err := e.adm.SetLimits(e.ctx, tollgate.ResourceScope("api"), cfg(10)); err != nil {
				t.Fatal(err)
			}
			var held *tollgate.Lease
			if c.hold {
				var err error
				if held, err = e.lim.Acquire(e.ctx, "k", "api", tollgate.Consume{"rpm": 1}); err != nil {
					t.Fatal(err)
				}
			}
			e.drain("k")
			for range 3 {
				if ex := e.try(e.lim, "k"); ex == nil || ex.RetryAfter != 6*time.Second {
					t.Fatalf("drained bucket: %v, want a refusal with retry-after 6s", ex)
				}
			}
			if got := e.served(); got != 2 {
				t.Fatalf("served %d refusals from memory, want 2", got)
			}
			if err := c.change(e, held); err != nil {
				t.Fatal(err)
			}
			var ex *tollgate.RateLimitExceeded
			if calls := e.consumes(func() { ex = e.try(e.lim, "k") }); calls != 1 {
				t.Errorf("the acquire after the change made %d Consume calls, want 1", calls)
			}
			switch {
			case c.retry == 0 && ex != nil:
				t.Errorf("refused right after the change: %v", ex)
			case c.retry != 0 && (ex == nil || ex.RetryAfter != c.retry):
				t.Errorf("after the change: %v, want the store's refusal with retry-after %v", ex, c.retry)
			}
		})
	}
}

// TestDenyCacheRefundElsewhere: a refund by another limiter on the same
// store (another process, for this one) delays an admission here by at
// most the max age after the refusal remembered, and never beyond the
// refusal's retry-after: the first grant comes at min(refusal + max age,
// refill), counted with the clock in 10 ms steps.
func TestDenyCacheRefundElsewhere(t *testing.T) {
	cases := []struct {
		name   string
		limit  tollgate.Limit
		maxAge time.Duration
		grant  time.Duration // after the remembered refusal
	}{
		{"max age first", tollgate.PerMinute("rpm", 10), time.Second, time.Second},
		{"refill first", tollgate.PerSecond("rpm", 2), time.Second, 500 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newDenyEnv(t, c.maxAge)
			limits := tollgate.WithLimits(c.limit)
			held, err := e.plain.Acquire(e.ctx, "k", "api", tollgate.Consume{"rpm": 1}, limits)
			if err != nil {
				t.Fatal(err)
			}
			e.drain("k", limits)
			refused := e.clk.Now()
			if e.try(e.lim, "k", limits) == nil {
				t.Fatal("granted from a drained bucket")
			}
			e.clk.Advance(100 * time.Millisecond)
			if err := held.Rollback(e.ctx); err != nil { // a token back, elsewhere
				t.Fatal(err)
			}
			for e.try(e.lim, "k", limits) != nil {
				if e.clk.Now().Sub(refused) > time.Minute {
					t.Fatal("never granted")
				}
				e.clk.Advance(10 * time.Millisecond)
			}
			if got := e.clk.Now().Sub(refused); got != c.grant {
				t.Errorf("granted %v after the remembered refusal, want %v", got, c.grant)
			}
		})
	}
}

// TestDenyCacheShadowAndSlots: a limit in shadow never refuses, from
// memory or not; a concurrency limit is never refused from memory (a slot
// may come back anywhere at any moment), and a slot given back by another
// limiter is granted at once.
func TestDenyCacheShadowAndSlots(t *testing.T) {
	t.Run("shadow", func(t *testing.T) {
		e := newDenyEnv(t, time.Hour)
		cfg := tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 100), tollgate.PerMinute("tpm", 2)}, Shadow: []string{"tpm"}}
		if err := e.adm.SetLimits(e.ctx, tollgate.ResourceScope("api"), cfg); err != nil {
			t.Fatal(err)
		}
		calls := e.consumes(func() {
			for i := range 10 {
				le, err := e.lim.Acquire(e.ctx, "k", "api", tollgate.Consume{"rpm": 1, "tpm": 1})
				if err != nil {
					t.Fatalf("acquire %d, tpm in shadow exhausted: %v", i, err)
				}
				_ = le.Commit(e.ctx)
			}
		})
		if calls != 10 || e.served() != 0 {
			t.Errorf("10 grants made %d Consume calls (want 10) and %d served from memory (want 0)", calls, e.served())
		}
	})
	t.Run("concurrency", func(t *testing.T) {
		e := newDenyEnv(t, time.Hour)
		limits := tollgate.WithLimits(tollgate.ConcurrencyLimit("jobs", 1), tollgate.PerMinute("rpm", 100))
		one := tollgate.Consume{"jobs": 1, "rpm": 1}
		held, err := e.plain.Acquire(e.ctx, "k", "api", one, limits)
		if err != nil {
			t.Fatal(err)
		}
		calls := e.consumes(func() {
			for range 5 {
				if _, err := e.lim.Acquire(e.ctx, "k", "api", one, limits); !errors.Is(err, tollgate.ErrRateLimited) {
					t.Fatalf("acquire of a held slot: %v, want a refusal", err)
				}
			}
		})
		if calls != 5 || e.served() != 0 {
			t.Errorf("5 refusals by a slot made %d Consume calls (want 5), %d served from memory (want 0)", calls, e.served())
		}
		if err := held.Commit(e.ctx); err != nil {
			t.Fatal(err)
		}
		le, err := e.lim.Acquire(e.ctx, "k", "api", one, limits)
		if err != nil {
			t.Fatalf("the slot came back elsewhere, acquire: %v", err)
		}
		_ = le.Commit(e.ctx)
	})
}

// TestDenyCacheCascade: a child's acquire refused by its exhausted parent
// is refused from memory afterwards, with the store's statuses (the
// child's and the parent's), and a sibling's first acquire goes to the
// store (its bucket is not known).
func TestDenyCacheCascade(t *testing.T) {
	e := newDenyEnv(t, time.Hour)
	for _, ent := range []tollgate.Entity{{ID: "org"}, {ID: "a", ParentID: "org", Cascade: true}, {ID: "b", ParentID: "org", Cascade: true}} {
		if _, err := e.adm.CreateEntity(e.ctx, ent); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.adm.SetLimits(e.ctx, tollgate.ResourceScope("api"), tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 3)}}); err != nil {
		t.Fatal(err)
	}
	e.drain("org")
	first := e.try(e.lim, "a")
	if first == nil {
		t.Fatal("granted under an exhausted parent")
	}
	e.clk.Advance(time.Second)
	var again *tollgate.RateLimitExceeded
	if calls := e.consumes(func() { again = e.try(e.lim, "a") }); calls != 0 || again == nil {
		t.Fatalf("second refusal: %v, %d Consume calls, want a refusal from memory", again, calls)
	}
	want := e.try(e.plain, "a")
	if !reflect.DeepEqual(again, want) {
		t.Errorf("refusal from memory\n%+v\nwant the store's\n%+v", again, want)
	}
	if calls := e.consumes(func() { e.try(e.lim, "b") }); calls != 1 {
		t.Errorf("a sibling's first acquire made %d Consume calls, want 1", calls)
	}
}

// TestDenyCacheExactUnderConcurrency: goroutines flood one key through the
// cached limiter while the clock moves in steps that refill fractions of a
// token; after each step, a limiter without the cache must be refused (the
// flood took every token the store would have granted), and the grants
// must equal the bucket's exact bound.
func TestDenyCacheExactUnderConcurrency(t *testing.T) {
	e := newDenyEnv(t, time.Second)
	limits := tollgate.WithLimits(tollgate.PerSecond("rpm", 5)) // a token every 200 ms
	const (
		goroutines = 8
		tries      = 4 // each, per step: more than a step refills
		steps      = 40
		step       = 130 * time.Millisecond
	)
	var granted atomic.Int64
	for s := 0; s <= steps; s++ {
		var wg sync.WaitGroup
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range tries {
					le, err := e.lim.Acquire(e.ctx, "k", "api", tollgate.Consume{"rpm": 1}, limits)
					if err == nil {
						granted.Add(1)
						_ = le.Commit(e.ctx)
					} else if !errors.Is(err, tollgate.ErrRateLimited) {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		if ex := e.try(e.plain, "k", limits); ex == nil {
			t.Fatalf("step %d: the store granted a token the flood was refused from memory", s)
		}
		if want := 5 + int64(s)*int64(step/time.Millisecond)*5/1000; granted.Load() != want {
			t.Fatalf("step %d: %d granted, want exactly %d", s, granted.Load(), want)
		}
		e.clk.Advance(step)
	}
	if e.served() == 0 {
		t.Error("no refusal was served from memory")
	}
}

// TestDenyCacheBounded: the cache holds at most its size, however many
// buckets are refused, also a size smaller than its count of shards.
func TestDenyCacheBounded(t *testing.T) {
	for _, size := range []int{10, 64, 100} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			e := newDenyEnv(t, time.Hour, tollgate.WithDenyCacheSize(size))
			limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 1))
			for i := range 500 {
				id := fmt.Sprintf("k%d", i)
				e.drain(id, limits)
				if e.try(e.lim, id, limits) == nil {
					t.Fatal("granted from a drained bucket")
				}
				if n := e.lim.Stats().Deny.Entries; n > size {
					t.Fatalf("%d entries after %d refused buckets, want at most %d", n, i+1, size)
				}
			}
			if st := e.lim.Stats().Deny; st.Remembered != 500 || st.Entries == 0 {
				t.Errorf("Stats().Deny = %+v, want 500 remembered and some entries", st)
			}
		})
	}
}

func TestDenyCacheOptions(t *testing.T) {
	for _, c := range []struct {
		opt   tollgate.Option
		field string
	}{
		{tollgate.WithDenyCache(-time.Second), "deny_cache_max_age"},
		{tollgate.WithDenyCacheSize(0), "deny_cache_size"},
	} {
		_, err := tollgate.New(newFaultStore(), c.opt)
		var ve *model.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("New: %v, want a *ValidationError naming %s", err, c.field)
		}
	}
	// Off by default: no refusal is served from memory.
	e := newDenyEnv(t, 0)
	e.drain("k", tollgate.WithLimits(tollgate.PerMinute("rpm", 1)))
	if calls := e.consumes(func() {
		for range 3 {
			e.try(e.lim, "k", tollgate.WithLimits(tollgate.PerMinute("rpm", 1)))
		}
	}); calls != 3 {
		t.Errorf("without the cache 3 refusals made %d Consume calls, want 3", calls)
	}
}

// estimating is a store whose every observation is an estimate, as a split
// DynamoDB bucket's is.
type estimating struct{ *faultStore }

func (s estimating) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	ok, err := s.faultStore.Consume(ctx, ns, req)
	for i := range req.Buckets {
		req.Buckets[i].Estimated = true
	}
	return ok, err
}

// TestDenyCacheSkipsEstimates: a refusal whose buckets the store only
// estimated (BucketRequest.Estimated) bounds nothing, and is not
// remembered: every refusal goes to the store.
func TestDenyCacheSkipsEstimates(t *testing.T) {
	st := estimating{newFaultStore()}
	lim, err := tollgate.New(st, tollgate.WithClock(clock.NewFake(tgEpoch)), tollgate.WithDenyCache(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 1))
	ctx := context.Background()
	if _, err := lim.AcquireAndCommit(ctx, "k", "api", tollgate.Consume{"rpm": 1}, limits); err != nil {
		t.Fatal(err)
	}
	st.resetCounts()
	for range 5 {
		if _, err := lim.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 1}, limits); !errors.Is(err, tollgate.ErrRateLimited) {
			t.Fatalf("Acquire: %v, want a refusal", err)
		}
	}
	if n, d := st.count(mConsume), lim.Stats().Deny; n != 5 || d.Remembered != 0 {
		t.Errorf("5 refusals of estimated buckets: %d Consume calls (want 5), %+v (want nothing remembered)", n, d)
	}
}

// TestDenyCacheRefundRaces: goroutines take the one token of a bucket and
// give it back (a rollback refunds), while the others are refused, from
// the store or from memory, for an hour of max age. Once all are done the
// bucket is full again, so the next acquire must be granted: a refusal
// read before a refund and remembered after it would refuse it.
func TestDenyCacheRefundRaces(t *testing.T) {
	e := newDenyEnv(t, time.Hour)
	limits := tollgate.WithLimits(tollgate.RateLimit("rph", 1, time.Hour))
	one := tollgate.Consume{"rph": 1}
	for round := range 20 {
		key := fmt.Sprintf("k%d", round)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					le, err := e.lim.Acquire(e.ctx, key, "api", one, limits)
					switch {
					case err == nil:
						if err := le.Rollback(e.ctx); err != nil {
							t.Error(err)
						}
					case !errors.Is(err, tollgate.ErrRateLimited):
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		le, err := e.lim.Acquire(e.ctx, key, "api", one, limits)
		if err != nil {
			t.Fatalf("round %d: every lease rolled back, acquire: %v (deny cache %+v)", round, err, e.lim.Stats().Deny)
		}
		_ = le.Rollback(e.ctx)
	}
	// The rounds above race only when the scheduler interleaves them (with
	// one P a goroutine may take and give back its token undisturbed), so
	// that memory serves refusals at all is checked on its own.
	held, err := e.lim.Acquire(e.ctx, "held", "api", one, limits)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := e.lim.Acquire(e.ctx, "held", "api", one, limits); !errors.Is(err, tollgate.ErrRateLimited) {
			t.Fatalf("acquire on a held bucket: %v, want a refusal", err)
		}
	}
	if e.served() == 0 {
		t.Error("no refusal was served from memory")
	}
	_ = held.Rollback(e.ctx)
}
