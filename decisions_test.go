package tollgate_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// Resource names come from callers wherever a system-level configuration
// applies: the pairs counted apart stop at MaxDecisionSeries, and the
// decisions of the others are counted under OtherSeries.
func TestDecisionSeriesBounded(t *testing.T) {
	ctx := context.Background()
	lim, adm, _ := newPair(t, memory.New())
	if err := adm.SetLimits(ctx, tollgate.SystemScope(), tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 10)}}); err != nil {
		t.Fatal(err)
	}
	const extra = 7
	for i := range tollgate.MaxDecisionSeries + extra {
		le, err := lim.Acquire(ctx, "k", "r"+strconv.Itoa(i), tollgate.Consume{"rpm": 1})
		if err != nil {
			t.Fatalf("Acquire %d: %v", i, err)
		}
		_ = le.Commit(ctx)
	}
	st := lim.Stats().Decisions
	if len(st) != tollgate.MaxDecisionSeries+1 {
		t.Errorf("%d series, want %d and the other pair's", len(st), tollgate.MaxDecisionSeries)
	}
	var other uint64
	for _, c := range st {
		if c.Resource == tollgate.OtherSeries && c.Limit == tollgate.OtherSeries {
			other = c.Granted
		}
	}
	if other != extra {
		t.Errorf("decisions counted under %q = %d, want %d", tollgate.OtherSeries, other, extra)
	}
}

// The same holds for the denials of shadow limits (Stats.Shadow, the
// tollgate_shadow_denied_total series): a system-level limit in shadow
// applies to every resource a caller names, and one acquire above its
// capacity counts a would-be denial, so a caller naming a new resource
// each time must not add a pair each time.
func TestShadowSeriesBounded(t *testing.T) {
	ctx := context.Background()
	lim, adm, _ := newPair(t, memory.New())
	cfg := tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 10)}, Shadow: []string{"rpm"}}
	if err := adm.SetLimits(ctx, tollgate.SystemScope(), cfg); err != nil {
		t.Fatal(err)
	}
	const extra = 7
	for i := range tollgate.MaxDecisionSeries + extra {
		le, err := lim.Acquire(ctx, "k", "r"+strconv.Itoa(i), tollgate.Consume{"rpm": 11})
		if err != nil {
			t.Fatalf("Acquire %d: %v", i, err)
		}
		_ = le.Commit(ctx)
	}
	st := lim.Stats().Shadow
	if len(st) != tollgate.MaxDecisionSeries+1 {
		t.Errorf("%d shadow series, want %d and the other pair's", len(st), tollgate.MaxDecisionSeries)
	}
	var other, total uint64
	for _, c := range st {
		total += c.Count
		if c.Resource == tollgate.OtherSeries && c.Limit == tollgate.OtherSeries {
			other = c.Count
		}
	}
	if other != extra || total != tollgate.MaxDecisionSeries+extra {
		t.Errorf("shadow denials under %q = %d of %d, want %d of %d", tollgate.OtherSeries, other, total, extra, tollgate.MaxDecisionSeries+extra)
	}
}

// A degraded lease counts under its resource and DegradedLimit.
func TestDecisionsDegraded(t *testing.T) {
	ctx := context.Background()
	lim, fs, _ := newFaultLim(t)
	fs.failOn(errConnReset, mConsume)
	if _, err := lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1}, rpm100, tollgate.WithOnUnavailable(tollgate.Allow)); err != nil {
		t.Fatalf("Allow mode: %v", err)
	}
	for _, c := range lim.Stats().Decisions {
		if c.Resource == "api" && c.Limit == tollgate.DegradedLimit {
			if c.Degraded != 1 || c.Granted+c.Denied != 0 {
				t.Errorf("degraded decisions %+v, want 1 degraded alone", c)
			}
			return
		}
	}
	t.Errorf("no degraded decision counted: %+v", lim.Stats().Decisions)
}

// A warm acquire's grant and its config cache hit are counted together
// (one atomic add): both counts stay exact, for grants, refusals and
// peeks alike.
func TestGrantsAndCacheHitsCountedTogether(t *testing.T) {
	ctx := context.Background()
	lim, err := tollgate.New(memory.New())
	if err != nil {
		t.Fatal(err)
	}
	opt := tollgate.WithLimits(tollgate.RateLimit("rph", 5, time.Hour))
	one := tollgate.Consume{"rph": 1}
	le, err := lim.Acquire(ctx, "k", "api", one, opt) // warms the cache
	if err != nil {
		t.Fatal(err)
	}
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	before := lim.Stats()
	for range 4 {
		le, err := lim.Acquire(ctx, "k", "api", one, opt)
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 { // refused: the limit is spent
		if _, err := lim.Acquire(ctx, "k", "api", one, opt); !errors.Is(err, tollgate.ErrRateLimited) {
			t.Fatalf("Acquire: %v, want a refusal", err)
		}
	}
	if _, err := lim.Available(ctx, "k", "api", opt); err != nil {
		t.Fatal(err)
	}
	after := lim.Stats()
	if got := after.Cache.Hits - before.Cache.Hits; got != 8 {
		t.Errorf("cache hits: %d more, want 8 (4 grants, 3 refusals, 1 peek)", got)
	}
	if after.Cache.Misses != before.Cache.Misses {
		t.Errorf("cache misses: %d, want %d", after.Cache.Misses, before.Cache.Misses)
	}
	if len(after.Decisions) != 1 || after.Decisions[0].Granted != 5 || after.Decisions[0].Denied != 3 {
		t.Errorf("decisions %+v, want 5 granted and 3 denied", after.Decisions)
	}
}
