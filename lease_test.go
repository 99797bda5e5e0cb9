package tollgate_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/memory"
)

var llmLimits = tollgate.WithLimits(
	tollgate.PerMinute("rpm", 100),
	tollgate.PerMinute("tpm", 10_000),
	tollgate.PerHour("tph", 100_000),
)

func TestLeaseClosedAfterCommitOrRollback(t *testing.T) {
	ctx := context.Background()
	lim, fs, _ := newFaultLim(t)
	for _, end := range []string{"commit", "rollback"} {
		le := mustAcquire(t, lim, "k", "llm", tollgate.Consume{"rpm": 1, "tpm": 100}, llmLimits)
		var err error
		if end == "commit" {
			err = le.Commit(ctx)
		} else {
			err = le.Rollback(ctx)
		}
		if err != nil {
			t.Fatalf("%s: %v", end, err)
		}
		fs.resetCounts()
		if err := le.Commit(ctx); !errors.Is(err, tollgate.ErrLeaseClosed) {
			t.Errorf("Commit after %s: %v, want ErrLeaseClosed", end, err)
		}
		if err := le.Rollback(ctx); !errors.Is(err, tollgate.ErrLeaseClosed) {
			t.Errorf("Rollback after %s: %v, want ErrLeaseClosed", end, err)
		}
		if err := le.Adjust(ctx, tollgate.Consume{"tpm": 1}); !errors.Is(err, tollgate.ErrLeaseClosed) {
			t.Errorf("Adjust after %s: %v, want ErrLeaseClosed", end, err)
		}
		if n := fs.count(mApplyDeltas); n != 0 {
			t.Errorf("closed lease wrote %d times", n)
		}
	}
	// The second Rollback did not refund twice.
	if got := availableOf(t, lim, "k", "llm", "tpm", llmLimits); got != 9_900 {
		t.Errorf("tpm available = %d, want 9900 (one committed lease of 100)", got)
	}
}

func TestLeaseAdjustValidation(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	le := mustAcquire(t, lim, "k", "llm", tollgate.Consume{"rpm": 1, "tpm": 100}, llmLimits)
	wantValidation(t, le.Adjust(ctx, tollgate.Consume{"bogus": 1}), "consume.bogus")
	// All or nothing: a bad name keeps the good ones out too.
	wantValidation(t, le.Adjust(ctx, tollgate.Consume{"tpm": 50, "bogus": 1}), "consume.bogus")
	wantValidation(t, le.Adjust(ctx, tollgate.Consume{"tpm": math.MaxInt64}), "consume.tpm")
	wantValidation(t, le.Adjust(ctx, tollgate.Consume{"tpm": math.MinInt64}), "consume.tpm")
	if got := le.Consumed(); got["tpm"] != 100 || got["rpm"] != 1 {
		t.Errorf("Consumed after rejected adjustments = %v, want rpm 1, tpm 100", got)
	}
	// The lease is still usable.
	if err := le.Adjust(ctx, tollgate.Consume{"tpm": 5}); err != nil {
		t.Fatal(err)
	}
	if err := le.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := availableOf(t, lim, "k", "llm", "tpm", llmLimits); got != 9_895 {
		t.Errorf("tpm available = %d, want 9895", got)
	}
}

func TestLeaseConsumedAndDebt(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	le := mustAcquire(t, lim, "k", "llm", tollgate.Consume{"rpm": 1, "tpm": 500}, llmLimits)
	if got := le.Consumed(); len(got) != 2 || got["rpm"] != 1 || got["tpm"] != 500 {
		t.Errorf("initial Consumed = %v, want rpm 1, tpm 500", got)
	}
	// Estimated 500, used 12,000: more than the bucket holds.
	if err := le.Adjust(ctx, tollgate.Consume{"tpm": 12_000}); err != nil {
		t.Fatal(err)
	}
	if err := le.Adjust(ctx, tollgate.Consume{"tpm": -500, "tph": 12_000}); err != nil {
		t.Fatal(err)
	}
	want := tollgate.Consume{"rpm": 1, "tpm": 12_000, "tph": 12_000}
	if got := le.Consumed(); len(got) != 3 || got["rpm"] != want["rpm"] || got["tpm"] != want["tpm"] || got["tph"] != want["tph"] {
		t.Errorf("Consumed = %v, want %v", got, want)
	}
	// Adjustments are written by Commit, not before.
	if got := availableOf(t, lim, "k", "llm", "tpm", llmLimits); got != 9_500 {
		t.Errorf("tpm before commit = %d, want 9500", got)
	}
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := availableOf(t, lim, "k", "llm", "tpm", llmLimits); got != -2_000 {
		t.Errorf("tpm after commit = %d, want -2000 (debt)", got)
	}
	if got := availableOf(t, lim, "k", "llm", "tph", llmLimits); got != 88_000 {
		t.Errorf("tph after commit = %d, want 88000", got)
	}
	// In debt, the next acquire is denied until refill repays it.
	_, err := lim.Acquire(ctx, "k", "llm", tollgate.Consume{"tpm": 1}, llmLimits)
	ex := wantExceeded(t, err)
	if s := statusOf(t, ex.Statuses, "k", "tpm"); s.Available != -2_000 || !s.Exceeded {
		t.Errorf("tpm status in debt = %+v", s)
	}
}

func TestLeaseRollbackRefundsAndDiscards(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	le := mustAcquire(t, lim, "k", "llm", tollgate.Consume{"rpm": 3, "tpm": 700}, llmLimits)
	_ = le.Adjust(ctx, tollgate.Consume{"tpm": 300, "tph": 50})
	if err := le.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	sts, err := lim.Available(ctx, "k", "llm", llmLimits)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sts {
		if s.Available != s.Capacity {
			t.Errorf("%s after rollback = %d, want %d", s.Limit, s.Available, s.Capacity)
		}
	}
}

func TestLeaseStatusesAfterGrant(t *testing.T) {
	lim, _ := newLim(t, memory.New())
	mustAcquire(t, lim, "k", "llm", tollgate.Consume{"tpm": 1_000}, llmLimits).Commit(context.Background())
	le := mustAcquire(t, lim, "k", "llm", tollgate.Consume{"rpm": 1, "tpm": 2_500}, llmLimits)
	want := []tollgate.Status{
		{Entity: "k", Resource: "llm", Limit: "rpm", Kind: tollgate.Rate, Capacity: 100, Available: 99, Requested: 1, Source: tollgate.SourceCall, Window: time.Minute},
		{Entity: "k", Resource: "llm", Limit: "tpm", Kind: tollgate.Rate, Capacity: 10_000, Available: 6_500, Requested: 2_500, Source: tollgate.SourceCall, Window: time.Minute},
		{Entity: "k", Resource: "llm", Limit: "tph", Kind: tollgate.Rate, Capacity: 100_000, Available: 100_000, Source: tollgate.SourceCall, Window: time.Hour},
	}
	got := le.Statuses()
	if len(got) != len(want) {
		t.Fatalf("Statuses = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Statuses[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if le.Entity() != "k" || le.Resource() != "llm" || le.Degraded() || le.Cause() != nil {
		t.Errorf("lease: entity %q resource %q degraded %v cause %v", le.Entity(), le.Resource(), le.Degraded(), le.Cause())
	}
}

func TestLeaseCascadeConsumedAndAdjust(t *testing.T) {
	ctx := context.Background()
	lim, adm, _ := newPair(t, memory.New())
	mustCreate(t, adm, tollgate.Entity{ID: "org"})
	mustCreate(t, adm, tollgate.Entity{ID: "key", ParentID: "org", Cascade: true})
	le := mustAcquire(t, lim, "key", "llm", tollgate.Consume{"rpm": 1, "tpm": 100}, llmLimits)
	if got := le.Consumed(); got["rpm"] != 1 || got["tpm"] != 100 {
		t.Errorf("cascade Consumed = %v, want rpm 1, tpm 100 (what was asked, once)", got)
	}
	_ = le.Adjust(ctx, tollgate.Consume{"tpm": 50})
	if got := le.Consumed()["tpm"]; got != 150 {
		t.Errorf("cascade Consumed tpm after +50 = %d, want 150", got)
	}
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"key", "org"} {
		if got := availableOf(t, lim, id, "llm", "tpm", llmLimits); got != 9_850 {
			t.Errorf("%s tpm = %d, want 9850 (the adjustment applies at every level)", id, got)
		}
	}
	le = mustAcquire(t, lim, "key", "llm", tollgate.Consume{"rpm": 1, "tpm": 100}, llmLimits)
	if err := le.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"key", "org"} {
		if got := availableOf(t, lim, id, "llm", "rpm", llmLimits); got != 99 {
			t.Errorf("%s rpm after rollback = %d, want 99", id, got)
		}
	}
}

func TestLeaseConcurrentAdjust(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	le := mustAcquire(t, lim, "k", "llm", tollgate.Consume{"tpm": 1_000}, llmLimits)
	const workers, each = 8, 200
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				delta := tollgate.Consume{"tpm": 2}
				if w%2 == 1 {
					delta = tollgate.Consume{"tpm": -1, "tph": 1}
				}
				if err := le.Adjust(ctx, delta); err != nil {
					t.Error(err)
					return
				}
				_ = le.Consumed()
			}
		}(w)
	}
	wg.Wait()
	// Four workers add 2*200, four subtract 200: +800 net.
	if got := le.Consumed(); got["tpm"] != 1_800 || got["tph"] != 800 {
		t.Errorf("Consumed = %v, want tpm 1800, tph 800", got)
	}
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := availableOf(t, lim, "k", "llm", "tpm", llmLimits); got != 8_200 {
		t.Errorf("tpm = %d, want 8200", got)
	}
	if got := availableOf(t, lim, "k", "llm", "tph", llmLimits); got != 99_200 {
		t.Errorf("tph = %d, want 99200", got)
	}
}

func TestLeaseConcurrentEnd(t *testing.T) {
	// Many goroutines race to end one lease: exactly one wins.
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	le := mustAcquire(t, lim, "k", "llm", tollgate.Consume{"tpm": 100}, llmLimits)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var err error
			if i%2 == 0 {
				err = le.Commit(ctx)
			} else {
				err = le.Rollback(ctx)
			}
			switch {
			case err == nil:
				mu.Lock()
				wins++
				mu.Unlock()
			case !errors.Is(err, tollgate.ErrLeaseClosed):
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d goroutines ended the lease, want 1", wins)
	}
	if got := availableOf(t, lim, "k", "llm", "tpm", llmLimits); got != 9_900 && got != 10_000 {
		t.Errorf("tpm = %d, want 9900 (committed) or 10000 (rolled back)", got)
	}
}

func TestLeaseConcurrencyLimitReturnedOnEnd(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	slots := tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", 2), tollgate.PerMinute("rpm", 100))
	a := mustAcquire(t, lim, "k", "jobs", tollgate.Consume{"slots": 1, "rpm": 1}, slots)
	b := mustAcquire(t, lim, "k", "jobs", tollgate.Consume{"slots": 1, "rpm": 1}, slots)
	if got := availableOf(t, lim, "k", "jobs", "slots", slots); got != 0 {
		t.Errorf("slots in use: available %d, want 0", got)
	}
	if err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := availableOf(t, lim, "k", "jobs", "slots", slots); got != 1 {
		t.Errorf("after Commit: slots %d, want 1", got)
	}
	if err := b.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := availableOf(t, lim, "k", "jobs", "slots", slots); got != 2 {
		t.Errorf("after Rollback: slots %d, want 2", got)
	}
	// Commit keeps the rate consumption; Rollback refunded b's.
	if got := availableOf(t, lim, "k", "jobs", "rpm", slots); got != 99 {
		t.Errorf("rpm = %d, want 99", got)
	}
}

func TestLeaseAdjustRejectsConcurrencyLimit(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	opt := tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", 3), tollgate.PerMinute("rpm", 10))
	le, err := lim.Acquire(ctx, "k", "api", tollgate.Consume{"slots": 1, "rpm": 1}, opt)
	if err != nil {
		t.Fatal(err)
	}
	wantValidation(t, le.Adjust(ctx, tollgate.Consume{"slots": 2}), "consume.slots")
	if got := le.Consumed(); got["slots"] != 1 {
		t.Errorf("Consumed()[slots] = %d after a rejected adjust, want 1", got["slots"])
	}
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	sts, err := lim.Available(ctx, "k", "api", opt)
	if err != nil {
		t.Fatal(err)
	}
	if s := statusOf(t, sts, "k", "slots"); s.Available != 3 {
		t.Errorf("slots available after commit = %d, want 3", s.Available)
	}
}

// A lease gives back at most what it consumed: a negative adjustment
// cannot refund another caller's consumption (here, a committed acquire
// that spent the whole hour).
func TestLeaseAdjustCannotRefundOthers(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	hour := tollgate.WithLimits(tollgate.PerHour("rpm", 10))
	if err := mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 10}, hour).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	le := mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 0}, hour)
	ve := wantValidation(t, le.Adjust(ctx, tollgate.Consume{"rpm": -10}), "consume.rpm")
	if ve.Value != "-10" || !strings.Contains(ve.Reason, "negative") {
		t.Errorf("ValidationError value %q, reason %q; want -10 and why", ve.Value, ve.Reason)
	}
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := availableOf(t, lim, "k", "api", "rpm", hour); got != 0 {
		t.Errorf("rpm available = %d after the rejected refund, want 0", got)
	}
}

// Net consumption may reach zero but not pass it, over any sequence of
// adjustments; a rejected delta applies none of its names.
func TestLeaseAdjustNetNeverNegative(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	le := mustAcquire(t, lim, "k", "llm", tollgate.Consume{"rpm": 1, "tpm": 500}, llmLimits)
	for _, d := range []tollgate.Consume{{"tpm": -200}, {"tpm": 100}, {"tpm": -400}} {
		if err := le.Adjust(ctx, d); err != nil {
			t.Fatalf("Adjust(%v): %v", d, err)
		}
	}
	// tpm is at 0 net; tph was never consumed.
	wantValidation(t, le.Adjust(ctx, tollgate.Consume{"tpm": -1}), "consume.tpm")
	wantValidation(t, le.Adjust(ctx, tollgate.Consume{"tph": -1}), "consume.tph")
	wantValidation(t, le.Adjust(ctx, tollgate.Consume{"rpm": 5, "tpm": -1}), "consume.tpm")
	if got := le.Consumed(); got["rpm"] != 1 || got["tpm"] != 0 {
		t.Errorf("Consumed = %v after rejected adjustments, want rpm 1, tpm 0", got)
	}
	if err := le.Adjust(ctx, tollgate.Consume{"rpm": -1, "tph": 7}); err != nil {
		t.Fatal(err)
	}
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{"rpm": 100, "tpm": 10_000, "tph": 99_993} {
		if got := availableOf(t, lim, "k", "llm", name, llmLimits); got != want {
			t.Errorf("%s available = %d, want %d", name, got, want)
		}
	}
}

// In a cascade every bucket receives the adjustment, so the bound holds in
// each of them.
func TestLeaseAdjustNetNeverNegativeInCascade(t *testing.T) {
	ctx := context.Background()
	lim, adm, _ := newPair(t, memory.New())
	mustCreate(t, adm, tollgate.Entity{ID: "org"})
	mustCreate(t, adm, tollgate.Entity{ID: "key", ParentID: "org", Cascade: true})
	le := mustAcquire(t, lim, "key", "llm", tollgate.Consume{"tpm": 100}, llmLimits)
	wantValidation(t, le.Adjust(ctx, tollgate.Consume{"tpm": -101}), "consume.tpm")
	if err := le.Adjust(ctx, tollgate.Consume{"tpm": -100}); err != nil {
		t.Fatal(err)
	}
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"key", "org"} {
		if got := availableOf(t, lim, id, "llm", "tpm", llmLimits); got != 10_000 {
			t.Errorf("%s tpm = %d, want 10000", id, got)
		}
	}
}

// Nor does a lease's net consumption of a limit go above MaxTokens, the
// most one acquire may take: an adjustment that would take it there is
// refused whole, rather than saturating the bucket's balance.
func TestLeaseAdjustNetAtMostMaxTokens(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	le := mustAcquire(t, lim, "k", "llm", tollgate.Consume{"rpm": 1, "tpm": 500}, llmLimits)
	const max = model.MaxTokens
	wantValidation(t, le.Adjust(ctx, tollgate.Consume{"tpm": max}), "consume.tpm")
	// The probe's adjustment, once and then again.
	probe := tollgate.Consume{"tpm": 4_600_000_000_000_000}
	if err := le.Adjust(ctx, probe); err != nil {
		t.Fatal(err)
	}
	wantValidation(t, le.Adjust(ctx, probe), "consume.tpm")
	if err := le.Adjust(ctx, tollgate.Consume{"tpm": -probe["tpm"]}); err != nil {
		t.Fatal(err)
	}
	if err := le.Adjust(ctx, tollgate.Consume{"tpm": max - 1000}); err != nil {
		t.Fatal(err)
	}
	if err := le.Adjust(ctx, tollgate.Consume{"tpm": 500}); err != nil { // exactly MaxTokens net
		t.Fatal(err)
	}
	wantValidation(t, le.Adjust(ctx, tollgate.Consume{"rpm": 1, "tpm": 1}), "consume.tpm")
	if got := le.Consumed(); got["rpm"] != 1 || got["tpm"] != max {
		t.Errorf("Consumed = %v after refused adjustments, want rpm 1, tpm %d", got, max)
	}
	if err := le.Adjust(ctx, tollgate.Consume{"tpm": -max}); err != nil { // back to 0 net
		t.Fatal(err)
	}
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := availableOf(t, lim, "k", "llm", "tpm", llmLimits); got != 10_000 {
		t.Errorf("tpm available = %d, want 10000", got)
	}
}

// The bound counts the adjustments a resumed lease finds in its record.
func TestResumedLeaseAdjustNetAtMostMaxTokens(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	le := mustAcquire(t, lim, "k", "llm", tollgate.Consume{"tpm": 500}, llmLimits, tollgate.WithDurableLease())
	if err := le.Adjust(ctx, tollgate.Consume{"tpm": model.MaxTokens - 500}); err != nil {
		t.Fatal(err)
	}
	if err := le.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := lim.ResumeLease(ctx, le.ID())
	if err != nil {
		t.Fatal(err)
	}
	wantValidation(t, r.Adjust(ctx, tollgate.Consume{"tpm": 1}), "consume.tpm")
	if err := r.Adjust(ctx, tollgate.Consume{"tpm": -1}); err != nil {
		t.Fatal(err)
	}
}

// A degraded lease wrote nothing and writes nothing: any adjustment in
// range is accepted.
func TestLeaseAdjustDegradedAcceptsRefunds(t *testing.T) {
	ctx := context.Background()
	lim, fs, _ := newFaultLim(t)
	fs.failOn(errConnReset, mConsume)
	le := mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 1}, rpm100, tollgate.WithOnUnavailable(tollgate.Allow))
	if !le.Degraded() {
		t.Fatal("want a degraded lease")
	}
	if err := le.Adjust(ctx, tollgate.Consume{"rpm": -5}); err != nil {
		t.Errorf("Adjust of a degraded lease: %v", err)
	}
	// Its adjustments of a limit add up to at most MaxTokens in magnitude.
	if err := le.Adjust(ctx, tollgate.Consume{"rpm": 5 - model.MaxTokens}); err != nil {
		t.Fatal(err)
	}
	wantValidation(t, le.Adjust(ctx, tollgate.Consume{"rpm": -1}), "consume.rpm")
	if err := le.Adjust(ctx, tollgate.Consume{"rpm": 2 * model.MaxTokens / 2}); err != nil {
		t.Fatal(err)
	}
	wantValidation(t, le.Adjust(ctx, tollgate.Consume{"tpm": model.MaxTokens + 1}), "consume.tpm")
}
