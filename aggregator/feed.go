package aggregator

import (
	"context"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
)

// The loops that keep a change feed going whatever fails: a batch of
// changes is written before the feed moves on (Retry), and a feed reader
// that fails is started again (Restart). `tollgate aggregator` runs the
// DynamoDB stream's reader (store/dynamodb/stream) inside both; a program
// of its own that reads a feed can do the same. The AWS Lambda function
// needs neither: Lambda hands a failed batch again itself.

// Backoff paces the tries of something that keeps failing: the first wait
// is Initial, each next one twice the last, at most Max. A zero field
// takes DefaultBackoff's value.
type Backoff struct {
	Initial time.Duration
	Max     time.Duration
	// Clock times the waits (nil: the wall clock); tests use clock.Fake.
	Clock clock.Clock
}

// DefaultBackoff is what `tollgate aggregator` waits between tries: a
// second at first, doubling up to 30 seconds.
var DefaultBackoff = Backoff{Initial: time.Second, Max: 30 * time.Second}

func (b Backoff) first() time.Duration {
	if b.Initial > 0 {
		return b.Initial
	}
	return DefaultBackoff.Initial
}

// next is the wait after one of wait.
func (b Backoff) next(wait time.Duration) time.Duration {
	limit := b.Max
	if limit <= 0 {
		limit = DefaultBackoff.Max
	}
	return min(2*wait, max(limit, b.first()))
}

// sleep waits d on b's clock; it returns ctx's error, at once if ctx has
// already ended (a timer due at the same time must not win).
func (b Backoff) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := b.Clock
	if c == nil {
		c = clock.Real{}
	}
	return clock.Sleep(ctx, c, d)
}

// Retry calls try until it returns nil or ctx ends, waiting between tries
// as b says (from b.Initial again at every call). onRetry, if not nil, is
// told each failure and how long Retry waits before the next try. It
// returns nil once try has succeeded, else ctx's error.
//
// It is how a batch of a change feed is written: retried rather than
// skipped, since the feed moves on once it is written. Apply is safe to
// retry: a write that applied before it failed is skipped the second time
// (exactly once per Source and Seq).
func (b Backoff) Retry(ctx context.Context, try func(context.Context) error, onRetry func(err error, wait time.Duration)) error {
	for wait := b.first(); ; wait = b.next(wait) {
		err := try(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if onRetry != nil {
			onRetry(err, wait)
		}
		if err := b.sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// Restart runs run until ctx ends, and runs it again, after a wait, each
// time it returns before then (with an error or not): the loop around a
// feed's reader, which fails when its store does and is meant to run until
// the process stops. The waits grow as b says across restarts, and do not
// start again after a long run. onRestart, if not nil, is told each
// failure and the wait before the next run. Restart returns once ctx ends.
func (b Backoff) Restart(ctx context.Context, run func(context.Context) error, onRestart func(err error, wait time.Duration)) {
	for wait := b.first(); ; wait = b.next(wait) {
		err := run(ctx)
		if ctx.Err() != nil {
			return
		}
		if onRestart != nil {
			onRestart(err, wait)
		}
		if b.sleep(ctx, wait) != nil {
			return
		}
	}
}
