package tollgate

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrSlotLost is the cause of the context WithSlot hands its function when
// the lease was ended elsewhere while the function ran (a reconciler took
// it, its namespace was purged): the slot is no longer held.
var ErrSlotLost = errors.New("tollgate: the slot's lease was ended elsewhere")

// WithSlot waits up to wait for what consume asks (typically one slot of a
// concurrency limit, and any rate limits of the call), runs fn holding it,
// and always ends the lease: Commit when fn returns nil, Rollback when it
// returns an error or panics (the panic continues), as Do does. A wait of
// zero or less tries once.
//
// While fn runs, a durable lease (one holding a slot) is extended every
// half of its expiry (WithLeaseExpiry, or the limiter's default), so that
// a call longer than the expiry keeps its slot, and a crashed process's
// slot still comes back within one expiry. If an extension finds the lease
// ended elsewhere, fn's context is cancelled with the cause ErrSlotLost
// (context.Cause). An extension the store fails is tried again at the next
// half.
//
// When nothing frees up within wait, WithSlot returns the last denial: a
// *RateLimitExceeded.
func (l *Limiter) WithSlot(ctx context.Context, entity, resource string, consume Consume, wait time.Duration,
	fn func(context.Context) error, opts ...AcquireOption) error {
	le, err := l.waitFor(ctx, entity, resource, consume, wait, opts)
	if err != nil {
		return err
	}
	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		l.keepAlive(fnCtx, le, cancel, done)
	}()
	return runIn(ctx, le, func() error {
		// The extensions stop before the lease ends, however fn returns.
		defer func() { close(done); <-stopped }()
		return fn(fnCtx)
	})
}

// waitFor acquires, waiting up to wait.
func (l *Limiter) waitFor(ctx context.Context, entity, resource string, consume Consume, wait time.Duration, opts []AcquireOption) (*Lease, error) {
	if wait <= 0 {
		return l.Acquire(ctx, entity, resource, consume, opts...)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	le, err := l.Wait(wctx, entity, resource, consume, opts...)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("waited %v for %s/%s: %w", wait, entity, resource, err)
	}
	return le, err
}

// keepAlive extends le every half of its expiry until done is closed. A
// lease without a record does not expire, and needs none.
func (l *Limiter) keepAlive(ctx context.Context, le *Lease, cancel context.CancelCauseFunc, done <-chan struct{}) {
	expiry := le.Expires().Sub(l.clock.Now())
	if le.ID() == "" || expiry <= 0 {
		return
	}
	expiry = max(expiry, MinLeaseExpiry)
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-l.clock.After(expiry / 2):
		}
		if err := le.Extend(ctx, expiry); errors.Is(err, ErrLeaseClosed) {
			cancel(fmt.Errorf("%w: %w", ErrSlotLost, err))
			return
		}
	}
}
