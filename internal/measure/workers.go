package measure

import (
	"encoding/json"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

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
