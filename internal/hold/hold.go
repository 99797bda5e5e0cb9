// Package hold runs work inside a lease, for the library's and the Go
// client's Do and WithSlot alike: the lease is ended however the work ends,
// and, for WithSlot, kept alive while it runs.
package hold

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
)

// Lease is what the helpers need of a lease (a library or a client one).
type Lease interface {
	Extend(ctx context.Context, d time.Duration) error
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Run runs fn and ends le: Commit if fn returns nil, else Rollback, also
// when fn panics (the panic continues). The endings are not cancelled with
// ctx, so a cancelled call still records what it did and returns what it
// took. A failed Commit is followed by a Rollback rather than hold
// concurrency tokens until the lease expires: it refunds the rate
// consumption too, which under-counts but never blocks anyone.
func Run[L Lease](ctx context.Context, le L, fn func() error) error {
	end := context.WithoutCancel(ctx)
	finished := false
	defer func() {
		if !finished {
			_ = le.Rollback(end)
		}
	}()
	if err := fn(); err != nil {
		finished = true
		if rbErr := le.Rollback(end); rbErr != nil {
			return errors.Join(err, rbErr)
		}
		return err
	}
	finished = true
	if err := le.Commit(end); err != nil {
		return errors.Join(err, le.Rollback(end))
	}
	return nil
}

// Slot runs fn holding le (as Run), extending le by expiry every half
// expiry on c while fn runs (expiry 0: never, a lease that does not
// expire). When an extension fails with an error that gone reports, fn's
// context is cancelled with the cause lost wrapping it: the slot is no
// longer held. Other extension failures are tried again at the next half.
func Slot[L Lease](ctx context.Context, le L, c clock.Clock, expiry time.Duration, gone func(error) bool, lost error,
	fn func(context.Context) error) error {
	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		keepAlive(fnCtx, le, c, expiry, gone, lost, cancel, done)
	}()
	return Run(ctx, le, func() error {
		// The extensions stop before the lease ends, however fn returns.
		defer func() { close(done); <-stopped }()
		return fn(fnCtx)
	})
}

// keepAlive extends le every half expiry until done is closed.
func keepAlive[L Lease](ctx context.Context, le L, c clock.Clock, expiry time.Duration, gone func(error) bool, lost error,
	cancel context.CancelCauseFunc, done <-chan struct{}) {
	if expiry <= 0 {
		return
	}
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-c.After(expiry / 2):
		}
		if err := le.Extend(ctx, expiry); err != nil && gone(err) {
			cancel(fmt.Errorf("%w: %w", lost, err))
			return
		}
	}
}

// Within acquires with try when wait is zero or less, else with waitFor
// under a deadline wait from now; a wait that ran out is said in the error
// (which still matches context.DeadlineExceeded or the last refusal).
func Within[L any](ctx context.Context, wait time.Duration, what string, try, waitFor func(context.Context) (L, error)) (L, error) {
	if wait <= 0 {
		return try(ctx)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	le, err := waitFor(wctx)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		var zero L
		return zero, fmt.Errorf("waited %v for %s: %w", wait, what, err)
	}
	return le, err
}
