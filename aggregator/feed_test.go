package aggregator

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

var errFlaky = errors.New("flaky")

// drive moves clk to each timer the code under test waits on, until
// finished is closed: the loops' waits pass without the test sleeping.
func drive(clk *clock.Fake, finished <-chan struct{}) {
	for clk.BlockUntilWaiters(1, finished) {
		at, _ := clk.NextDeadline()
		clk.Set(at)
	}
}

// A failing try is tried again after waits that double from Initial up to
// Max (zero fields take DefaultBackoff's), measured on the clock, until it
// succeeds.
func TestRetryBacksOff(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		name  string
		b     Backoff
		fails int
		want  []time.Duration
	}{
		{"succeeds at once", Backoff{Initial: s, Max: 4 * s}, 0, nil},
		{"doubles up to Max", Backoff{Initial: s, Max: 4 * s}, 5, []time.Duration{s, 2 * s, 4 * s, 4 * s, 4 * s}},
		{"Max below Initial", Backoff{Initial: 3 * s, Max: s}, 2, []time.Duration{3 * s, 3 * s}},
		{"zero is DefaultBackoff", Backoff{}, 7, []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s}},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Unix(1_700_000_000, 0)
			clk := clock.NewFake(start)
			c.b.Clock = clk
			var tried []time.Duration // when each try began, since the first
			var told []time.Duration  // the waits onRetry was told
			finished := make(chan struct{})
			var err error
			go func() {
				defer close(finished)
				err = c.b.Retry(context.Background(), func(context.Context) error {
					tried = append(tried, clk.Now().Sub(start))
					if len(tried) <= c.fails {
						return errFlaky
					}
					return nil
				}, func(err error, wait time.Duration) {
					if !errors.Is(err, errFlaky) {
						t.Errorf("onRetry told %v", err)
					}
					told = append(told, wait)
				})
			}()
			drive(clk, finished)
			if err != nil {
				t.Fatalf("Retry = %v, want nil", err)
			}
			if !slices.Equal(told, c.want) {
				t.Errorf("waits %v, want %v", told, c.want)
			}
			var at time.Duration
			for i, w := range append([]time.Duration{0}, c.want...) {
				if at += w; tried[i] != at {
					t.Errorf("try %d at %v, want %v", i+1, tried[i], at)
				}
			}
		})
	}
}

// Retry stops when its context ends, during a wait or during a try, and
// returns the context's error; a try that fails because the context ended
// is not reported as one to retry.
func TestRetryStopsOnCancel(t *testing.T) {
	for _, during := range []string{"wait", "try"} {
		t.Run(during, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tries, retries := 0, 0
			finished := make(chan struct{})
			var err error
			go func() {
				defer close(finished)
				err = Backoff{Clock: clk}.Retry(ctx, func(ctx context.Context) error {
					if tries++; tries == 2 && during == "try" {
						cancel()
						return ctx.Err()
					}
					return errFlaky
				}, func(error, time.Duration) {
					if retries++; retries == 2 && during == "wait" {
						cancel()
					}
				})
			}()
			drive(clk, finished)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Retry = %v, want context.Canceled", err)
			}
			if tries != 2 || retries != 2 && during == "wait" || retries != 1 && during == "try" {
				t.Errorf("%d tries, %d retries reported", tries, retries)
			}
		})
	}
}

// Retry around Apply is how a feed's batch is written: a usage store that
// fails twice gets the batch a third time, and it counts once.
func TestRetryApply(t *testing.T) {
	mem := memory.New()
	flaky := &failingUsage{UsageStore: mem, fails: 2}
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	batch := []store.Change{{NS: "ns", Key: store.BucketKey{Entity: "e", Resource: "r"}, Time: 1_700_000_000_000,
		Consumed: map[string]int64{"rpm": 1000}, Events: 1, Source: "src", Seq: "1"}}
	finished := make(chan struct{})
	var err error
	go func() {
		defer close(finished)
		err = Backoff{Clock: clk}.Retry(context.Background(), func(ctx context.Context) error {
			return Apply(ctx, flaky, batch, DefaultRetention)
		}, nil)
	}()
	drive(clk, finished)
	if err != nil || flaky.calls != 3 {
		t.Fatalf("Retry = %v after %d writes, want nil after 3", err, flaky.calls)
	}
	snaps, err := mem.ListUsage(context.Background(), "ns", store.UsageQuery{Entity: "e", Window: store.Daily, From: 0, To: 1 << 50})
	if err != nil || len(snaps) != 1 || snaps[0].Events != 1 || snaps[0].Consumed["rpm"] != 1000 {
		t.Errorf("usage %+v, %v; want one snapshot of 1 event and 1000 rpm", snaps, err)
	}
}

// failingUsage fails its first fails writes.
type failingUsage struct {
	store.UsageStore
	fails, calls int
}

func (f *failingUsage) AddUsage(ctx context.Context, ns string, incs []store.UsageIncrement) error {
	if f.calls++; f.calls <= f.fails {
		return errFlaky
	}
	return f.UsageStore.AddUsage(ctx, ns, incs)
}

// A reader that returns before its context ends (failing, or not) is run
// again after a wait; the waits grow across restarts; Restart returns once
// the context ends, without running it again.
func TestRestart(t *testing.T) {
	s := time.Second
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs := 0
	var errs []error
	var waits []time.Duration
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		Backoff{Initial: s, Max: 4 * s, Clock: clk}.Restart(ctx, func(ctx context.Context) error {
			switch runs++; {
			case runs == 3:
				return nil // returned early without an error: run again too
			case runs < 5:
				return errFlaky
			}
			cancel() // the process stops while the reader runs
			<-ctx.Done()
			return nil
		}, func(err error, wait time.Duration) {
			errs = append(errs, err)
			waits = append(waits, wait)
		})
	}()
	drive(clk, finished)
	if runs != 5 {
		t.Errorf("%d runs, want 5", runs)
	}
	if want := []error{errFlaky, errFlaky, nil, errFlaky}; !slices.Equal(errs, want) {
		t.Errorf("onRestart told %v, want %v", errs, want)
	}
	if want := []time.Duration{s, 2 * s, 4 * s, 4 * s}; !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
}

// Restart returns when its context ends during a wait, without another run.
func TestRestartStopsOnCancel(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs := 0
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		Backoff{Clock: clk}.Restart(ctx, func(context.Context) error {
			runs++
			return errFlaky
		}, func(error, time.Duration) {
			if runs == 2 {
				cancel()
			}
		})
	}()
	drive(clk, finished)
	if runs != 2 {
		t.Errorf("%d runs, want 2: none after the context ended", runs)
	}
}
