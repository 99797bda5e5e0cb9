package measure

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
)

// Tally is what a worker process of a multi-process test counts and
// reports: its grants and refusals, the span of its limiters' clock
// readings around the grants (SpanClock), and its errors. A worker's
// result embeds it, beside what its scenario adds.
type Tally struct {
	Grants int64  `json:"grants"`
	Denied int64  `json:"denied"`
	First  int64  `json:"first"` // Unix ms: the earliest time a grant can have
	Last   int64  `json:"last"`  // Unix ms: the latest time a grant can have
	Errors int64  `json:"errors"`
	Error  string `json:"error,omitempty"`
}

func (t Tally) tally() Tally { return t }

// A Tallied is a worker's result: it embeds a Tally.
type Tallied interface{ tally() Tally }

// Failed returns a worker's result that says only that it could not work.
func Failed(err error) Tally { return Tally{Error: err.Error()} }

// RunWorkers starts this test binary again once per element of envs, at
// once, each with no test to run and that element's variables added to
// its environment (the test binary's TestMain sees them and works
// instead), and decodes the JSON each writes on stdout into its result.
// A worker that fails, or reports errors, fails t.
func RunWorkers[R Tallied](t *testing.T, envs [][]string) []R {
	t.Helper()
	results := make([]R, len(envs))
	var wg sync.WaitGroup
	for i, env := range envs {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), env...)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				t.Errorf("worker %d: %v", i, err)
				return
			}
			if err := json.Unmarshal(out, &results[i]); err != nil {
				t.Errorf("worker %d output %q: %v", i, out, err)
			}
		})
	}
	wg.Wait()
	for i, r := range results {
		if r := r.tally(); r.Error != "" || r.Errors > 0 {
			t.Errorf("worker %d: %d errors; %s", i, r.Errors, r.Error)
		}
	}
	return results
}

// Bound returns the grants of results, the most limit l can admit over
// the span of their clock readings during grants, which holds the time of
// every grant, and that span: Allowed, the burst (the bucket is full at the
// first grant at the most) plus the exact refill of the span
// (docs/semantics.md 3: floor(span x rate), however often refill runs).
func Bound[R Tallied](l model.Limit, results []R) (grants, allowed int64, window time.Duration) {
	first, last := int64(1<<62), int64(0)
	for _, r := range results {
		r := r.tally()
		grants += r.Grants
		first, last = min(first, r.First), max(last, r.Last)
	}
	return grants, Allowed(l, first, last), time.Duration(last-first) * time.Millisecond
}

// HoldsBound checks results against the exact bound of limit and logs
// what they admitted (what names the case): a grant beyond the bound fails
// t, and so does admitting less than minFrac of it (a store that refuses
// what it should grant). It returns the grants.
func HoldsBound[R Tallied](t testing.TB, what string, limit model.Limit, results []R, minFrac float64) int64 {
	t.Helper()
	grants, allowed, window := Bound(limit, results)
	frac := float64(grants) / float64(allowed)
	t.Logf("%s: %d grants in %v, exact bound %d (%.1f%%)", what, grants, window, allowed, 100*frac)
	if grants > allowed {
		t.Errorf("%s: over-admission: %d grants, bound %d", what, grants, allowed)
	}
	if frac < minFrac {
		t.Errorf("%s: admitted only %.1f%% of the bound", what, 100*frac)
	}
	return grants
}

// SetUpCascade stores the multi-process tests' cascade through adm: an
// entity "org" and keys cascading to it, keyLimit for every caller of
// resource "api" and orgLimit for the organisation's own.
func SetUpCascade(t testing.TB, adm *tollgate.Admin, keys []string, keyLimit, orgLimit model.Limit) {
	t.Helper()
	ctx := context.Background()
	if _, err := adm.CreateEntity(ctx, tollgate.Entity{ID: "org"}); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if _, err := adm.CreateEntity(ctx, tollgate.Entity{ID: k, ParentID: "org", Cascade: true}); err != nil {
			t.Fatal(err)
		}
	}
	for scope, l := range map[tollgate.Scope]model.Limit{tollgate.ResourceScope("api"): keyLimit, tollgate.EntityScope("org", "api"): orgLimit} {
		if err := adm.SetLimits(ctx, scope, tollgate.Config{Limits: []model.Limit{l}}); err != nil {
			t.Fatal(err)
		}
	}
}

// HoldsCascade checks the results of workers acquiring for keys (one
// worker each, in order) in the cascade of SetUpCascade: the
// organisation's bound over all of them (at least minFrac of it admitted)
// and each key's over its own worker. It returns the grants.
func HoldsCascade[R Tallied](t testing.TB, what string, keys []string, keyLimit, orgLimit model.Limit, results []R, minFrac float64) int64 {
	t.Helper()
	grants := HoldsBound(t, what+", the organisation's "+orgLimit.String(), orgLimit, results, minFrac)
	for i := range results {
		if g, a, _ := Bound(keyLimit, results[i:i+1]); g > a {
			t.Errorf("%s over-admitted: %d grants, bound %d", keys[i], g, a)
		}
	}
	return grants
}
