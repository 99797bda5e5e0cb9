package tollgate

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
)

// Wait acquires like Acquire, but when denied it sleeps for the RetryAfter
// the denial reports and tries again, until granted or ctx ends. If ctx has a
// deadline that the next attempt could not meet, Wait returns the denial at
// once rather than sleep in vain. Other errors are returned as they occur.
func (l *Limiter) Wait(ctx context.Context, entity, resource string, consume Consume, opts ...AcquireOption) (*Lease, error) {
	for {
		le, err := l.Acquire(ctx, entity, resource, consume, opts...)
		var ex *model.RateLimitExceeded
		if !errors.As(err, &ex) {
			return le, err
		}
		d := max(ex.RetryAfter, time.Millisecond)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
			return nil, err
		}
		if err := clock.Sleep(ctx, l.clock, d); err != nil {
			return nil, err
		}
	}
}

// Do runs fn inside a lease: it acquires, calls fn, and commits if fn returns
// nil. If fn returns an error or panics, the lease is rolled back (and the
// panic continues). The rollback is not cancelled with ctx, so a cancelled
// call still returns what it took.
func (l *Limiter) Do(ctx context.Context, entity, resource string, consume Consume, fn func(context.Context, *Lease) error, opts ...AcquireOption) error {
	le, err := l.Acquire(ctx, entity, resource, consume, opts...)
	if err != nil {
		return err
	}
	return runIn(ctx, le, func() error { return fn(ctx, le) })
}

// runIn runs fn inside le and ends it: Commit if fn returns nil, Rollback
// if it returns an error or panics (the panic continues). The endings are
// not cancelled with ctx, so a cancelled call still records what it did
// and returns what it took.
func runIn(ctx context.Context, le *Lease, fn func() error) error {
	finished := false
	defer func() {
		if !finished {
			_ = le.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err := fn(); err != nil {
		finished = true
		if rbErr := le.Rollback(context.WithoutCancel(ctx)); rbErr != nil {
			return errors.Join(err, rbErr)
		}
		return err
	}
	finished = true
	// The work is done: record it even if ctx was cancelled meanwhile.
	if err := le.Commit(context.WithoutCancel(ctx)); err != nil {
		// Roll back rather than hold concurrency tokens forever; this
		// refunds the rate consumption too, which under-counts but never
		// blocks anyone.
		return errors.Join(err, le.Rollback(context.WithoutCancel(ctx)))
	}
	return nil
}
