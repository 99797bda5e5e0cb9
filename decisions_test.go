package tollgate_test

import (
	"context"
	"strconv"
	"testing"

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
