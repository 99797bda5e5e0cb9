package dynamodb

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// sleepRecorder stands in for the backoff sleep: it records every sleep
// asked for and returns at once (or with the context's error), so that
// tests count backoffs instead of measuring wall time.
type sleepRecorder struct {
	mu     sync.Mutex
	sleeps []time.Duration
}

func (r *sleepRecorder) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.sleeps = append(r.sleeps, d)
	r.mu.Unlock()
	return ctx.Err()
}

// take returns the sleeps recorded since the last take.
func (r *sleepRecorder) take() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sleeps
	r.sleeps = nil
	return s
}

// withSleep replaces the backoff sleep of a Store.
func withSleep(f sleepFunc) Option { return func(s *Store) { s.opts.sleep = f } }

// checkBackoffs fails unless sleeps are a valid backoff sequence: each in
// (0, backoffLimit(i)], all within maxSleep of maxAttempts.
func checkBackoffs(t testing.TB, sleeps []time.Duration, maxAttempts int) {
	t.Helper()
	var total time.Duration
	for i, d := range sleeps {
		if d <= 0 || d > backoffLimit(i) {
			t.Errorf("sleep %d of %v, want in (0, %v]", i, d, backoffLimit(i))
		}
		total += d
	}
	if total > maxSleep(maxAttempts) {
		t.Errorf("slept %v in all, more than the budget's %v", total, maxSleep(maxAttempts))
	}
}

// expectBackoffs checks the sleeps rec recorded since the last take: n of
// them, a valid backoff sequence for a budget of maxAttempts.
func expectBackoffs(t testing.TB, rec *sleepRecorder, n, maxAttempts int) {
	t.Helper()
	s := rec.take()
	if len(s) != n {
		t.Errorf("%d backoffs %v, want %d", len(s), s, n)
	}
	checkBackoffs(t, s, maxAttempts)
}

// The bound docs/dynamodb.md 4.8 states for the default budget.
func TestMaxSleep(t *testing.T) {
	if got := maxSleep(DefaultMaxAttempts); got != 2115*time.Millisecond {
		t.Errorf("maxSleep(%d) = %v, want 2.115s (5+10+20+40+80+160 ms, then 9 x 200 ms)", DefaultMaxAttempts, got)
	}
	if got := maxSleep(1); got != 0 {
		t.Errorf("maxSleep(1) = %v, want 0: one attempt never retries", got)
	}
}

// A budget grants maxAttempts-1 retries in all, whatever their causes: lost
// races retry at once the first immediateRetries times, then back off;
// contention always backs off; a changed layout never sleeps. A spent budget
// answers ErrContention without sleeping.
func TestBudget(t *testing.T) {
	ctx := context.Background()
	t.Run("lost races", func(t *testing.T) {
		rec := &sleepRecorder{}
		b := &budget{max: immediateRetries + 3, sleep: rec.sleep}
		for i := range immediateRetries {
			if err := b.retry(ctx, errLostRace); err != nil {
				t.Fatalf("retry %d: %v", i+1, err)
			}
		}
		if s := rec.take(); len(s) != 0 {
			t.Errorf("the first %d lost races slept %v, want no sleep", immediateRetries, s)
		}
		for i := range 2 {
			if err := b.retry(ctx, errLostRace); err != nil {
				t.Fatalf("retry %d: %v", immediateRetries+i+1, err)
			}
		}
		s := rec.take()
		if len(s) != 2 {
			t.Fatalf("lost races beyond the immediate ones slept %d times, want 2", len(s))
		}
		checkBackoffs(t, s, b.max)
		if err := b.retry(ctx, errLostRace); !errors.Is(err, ErrContention) {
			t.Errorf("retry past the budget: %v, want ErrContention", err)
		}
		if s := rec.take(); len(s) != 0 {
			t.Errorf("a spent budget slept %v", s)
		}
	})

	t.Run("contention", func(t *testing.T) {
		rec := &sleepRecorder{}
		b := &budget{max: DefaultMaxAttempts, sleep: rec.sleep}
		for i := range DefaultMaxAttempts - 1 {
			if err := b.retry(ctx, errContended); err != nil {
				t.Fatalf("retry %d: %v", i+1, err)
			}
		}
		if err := b.retry(ctx, errContended); !errors.Is(err, ErrContention) {
			t.Errorf("retry past the budget: %v, want ErrContention", err)
		}
		s := rec.take()
		if len(s) != DefaultMaxAttempts-1 {
			t.Fatalf("%d sleeps, want one per retry (%d)", len(s), DefaultMaxAttempts-1)
		}
		checkBackoffs(t, s, b.max)
	})

	t.Run("layout", func(t *testing.T) {
		rec := &sleepRecorder{}
		b := &budget{max: 3, sleep: rec.sleep}
		for range 2 {
			if err := b.retry(ctx, errReplan); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.retry(ctx, errReplan); !errors.Is(err, ErrContention) {
			t.Errorf("retry past the budget: %v, want ErrContention", err)
		}
		if s := rec.take(); len(s) != 0 {
			t.Errorf("replans slept %v", s)
		}
	})

	t.Run("one attempt", func(t *testing.T) {
		b := &budget{max: 1, sleep: (&sleepRecorder{}).sleep}
		if err := b.retry(ctx, errLostRace); !errors.Is(err, ErrContention) {
			t.Errorf("retry with WithMaxAttempts(1): %v, want ErrContention", err)
		}
	})

	// The parallel branches of a cascade share one budget: together they
	// get maxAttempts-1 retries, not that many each.
	t.Run("shared", func(t *testing.T) {
		b := &budget{max: 10, sleep: (&sleepRecorder{}).sleep}
		var mu sync.Mutex
		granted := 0
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for b.retry(ctx, errContended) == nil {
					mu.Lock()
					granted++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if granted != 9 {
			t.Errorf("4 branches were granted %d retries in all, want 9", granted)
		}
	})

	t.Run("context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		b := &budget{max: 5, sleep: sleepCtx}
		if err := b.retry(cctx, errContended); !errors.Is(err, context.Canceled) {
			t.Errorf("backoff with an ended context: %v, want context.Canceled", err)
		}
		if err := b.retry(cctx, errReplan); !errors.Is(err, context.Canceled) {
			t.Errorf("immediate retry with an ended context: %v, want context.Canceled", err)
		}
	})

	t.Run("give up", func(t *testing.T) {
		b := &budget{max: 3}
		err := b.giveUp(ErrContention, "bucket e/r")
		if !errors.Is(err, ErrContention) || err.Error() != "dynamodb: gave up under write contention: bucket e/r after 3 attempts" {
			t.Errorf("giveUp = %q", err)
		}
		if err := b.giveUp(context.DeadlineExceeded, "x"); err != context.DeadlineExceeded {
			t.Errorf("giveUp of a context error = %v, want it as is", err)
		}
	})
}

func TestTxRetry(t *testing.T) {
	canceled := func(codes ...string) error {
		e := &types.TransactionCanceledException{}
		for _, c := range codes {
			e.CancellationReasons = append(e.CancellationReasons, types.CancellationReason{Code: aws.String(c)})
		}
		return e
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"conditions", canceled("ConditionalCheckFailed", "None"), errLostRace},
		{"conflict", canceled("None", "TransactionConflict"), errContended},
		{"throttled", canceled("ThrottlingError", "None"), errContended},
		{"provisioned", canceled("ProvisionedThroughputExceeded"), errContended},
		{"condition and conflict", canceled("ConditionalCheckFailed", "TransactionConflict"), errContended},
		{"validation", canceled("ValidationError", "None"), nil},
		{"item too large", canceled("None", "ItemCollectionSizeLimitExceeded"), nil},
		{"conflict exception", &types.TransactionConflictException{}, errContended},
		{"other", errors.New("boom"), nil},
	}
	for _, tt := range tests {
		if got := txRetry(tt.err); got != tt.want {
			t.Errorf("%s: txRetry = %v, want %v", tt.name, got, tt.want)
		}
	}
}
