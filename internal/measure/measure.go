// Package measure is test support for the backends' benchmarks and
// multi-process tests: latencies measured in alternation with a baseline,
// a clock that records when a grant can have happened, to hold admissions
// to a limit's exact bound, and worker processes of the test binary that
// report their tallies (RunWorkers).
package measure

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/internal/cputime"
	"github.com/tollgate-rl/tollgate/model"
)

// Paired runs op b.N times, each time right after one run of base, and
// reports op's median and 99th percentile (p50-us, p99-us), base's median
// (base-p50-us) and the ratio of the medians (x-paired). A store's speed
// drifts during a run (a JVM, the machine's other load), so a baseline
// measured seconds apart from its case is not a fair one: measured in
// alternation, both see the same moments. ns/op counts both. It also
// reports the process's CPU time per call of each (cpu-us, base-cpu-us,
// read around each call: Linux accounts CPU time to the nanosecond) and
// their ratio (cpu-x): the client's cost, which the store's processes
// (children, not counted) do not share.
func Paired(b *testing.B, base, op func()) {
	bd := make([]time.Duration, 0, 1024)
	d := make([]time.Duration, 0, 1024)
	var baseCPU, opCPU time.Duration
	for b.Loop() {
		c0 := cputime.Process()
		bd = append(bd, Timed(base))
		c1 := cputime.Process()
		d = append(d, Timed(op))
		c2 := cputime.Process()
		baseCPU, opCPU = baseCPU+c1-c0, opCPU+c2-c1
	}
	p50, p99 := Percentiles(d)
	base50, _ := Percentiles(bd)
	b.ReportMetric(p50, "p50-us")
	b.ReportMetric(p99, "p99-us")
	b.ReportMetric(base50, "base-p50-us")
	b.ReportMetric(p50/base50, "x-paired")
	n := float64(b.N)
	b.ReportMetric(float64(opCPU.Microseconds())/n, "cpu-us")
	b.ReportMetric(float64(baseCPU.Microseconds())/n, "base-cpu-us")
	if baseCPU > 0 {
		b.ReportMetric(float64(opCPU)/float64(baseCPU), "cpu-x")
	}
}

// Timed returns how long op took.
func Timed(op func()) time.Duration {
	t := time.Now()
	op()
	return time.Since(t)
}

// Percentiles sorts d and returns its 50th and 99th percentiles in
// microseconds.
func Percentiles(d []time.Duration) (p50, p99 float64) {
	slices.Sort(d)
	return float64(d[len(d)/2].Nanoseconds()) / 1000, float64(d[len(d)*99/100].Nanoseconds()) / 1000
}

// SpanClock is the wall clock, recording the span of its readings (Unix
// ms, truncated as the limiter truncates) since the last Reset: the time
// of a request is one of the readings its Acquire makes, so a grant's time
// is known to lie in the span, however long the call took to return on a
// loaded machine. It is a clock.Clock.
type SpanClock struct {
	mu     sync.Mutex
	lo, hi int64
}

// Now reads the wall clock and records the reading.
func (c *SpanClock) Now() time.Time {
	t := time.Now()
	ms := t.UnixMilli()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lo == 0 || ms < c.lo {
		c.lo = ms
	}
	c.hi = max(c.hi, ms)
	return t
}

// After is time.After.
func (c *SpanClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Reset forgets the readings.
func (c *SpanClock) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lo, c.hi = 0, 0
}

// Span returns the earliest and latest readings since the last Reset.
func (c *SpanClock) Span() (lo, hi int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lo, c.hi
}

// Allowed is the most a rate limit l can admit over [first, last] (Unix
// ms), the span of the clock readings of every grant: its burst (a bucket
// is created full) plus the exact refill of the span, floor(span x rate)
// however often refill runs (docs/semantics.md 3).
func Allowed(l model.Limit, first, last int64) int64 {
	return l.Capacity + (last-first)*l.RefillAmount/l.RefillPeriod.Milliseconds()
}
