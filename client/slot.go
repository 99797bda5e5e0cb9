package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-rl/tollgate"
)

// minExtendTTL is the shortest TTL the server accepts for an extension.
const minExtendTTL = time.Second

// WithSlot waits up to wait for what consume asks (typically one slot of a
// concurrency limit, and any rate limits of the call), runs fn holding it,
// and always ends the lease: Commit when fn returns nil, Rollback when it
// returns an error or panics (the panic continues), as
// tollgate.Limiter.WithSlot does. A wait of zero or less tries once;
// waiting is Wait's, on the client's clock.
//
// While fn runs, the lease is extended (Lease.Extend) every half of its
// TTL, so that a call longer than the TTL keeps its slot, and a crashed
// process's slot still comes back within one TTL. The TTL is WithLeaseTTL's
// or, without it, the one the server granted, measured on the client's
// clock at the grant (pass WithLeaseTTL to be independent of clock skew
// between client and server). If an extension finds the lease gone (the
// server answers that it does not know it: a reconciler took it, its
// namespace was deleted), fn's context is cancelled with the cause
// tollgate.ErrSlotLost (context.Cause). An extension that fails otherwise
// (the network, the server's store) is tried again at the next half.
//
// When nothing frees up within wait, WithSlot returns the last denial: a
// *tollgate.RateLimitExceeded.
func (c *Client) WithSlot(ctx context.Context, entity, resource string, consume tollgate.Consume, wait time.Duration,
	fn func(context.Context) error, opts ...AcquireOption) error {
	le, err := c.waitFor(ctx, entity, resource, consume, wait, opts)
	if err != nil {
		return err
	}
	o, err := applyAcquire(opts)
	if err != nil {
		return err
	}
	ttl := o.LeaseExpiry
	if ttl <= 0 {
		ttl = le.ExpiresAt().Sub(c.clock.Now())
	}
	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		c.keepAlive(fnCtx, le, ttl, cancel, done)
	}()
	return runIn(ctx, le, func() error {
		// The extensions stop before the lease ends, however fn returns.
		defer func() { close(done); <-stopped }()
		return fn(fnCtx)
	})
}

// waitFor acquires, waiting up to wait.
func (c *Client) waitFor(ctx context.Context, entity, resource string, consume tollgate.Consume, wait time.Duration, opts []AcquireOption) (*Lease, error) {
	if wait <= 0 {
		return c.Acquire(ctx, entity, resource, consume, opts...)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	le, err := c.Wait(wctx, entity, resource, consume, opts...)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("waited %v for %s/%s: %w", wait, entity, resource, err)
	}
	return le, err
}

// keepAlive extends le by ttl every half ttl until done is closed. A
// degraded lease never expires, and needs none.
func (c *Client) keepAlive(ctx context.Context, le *Lease, ttl time.Duration, cancel context.CancelCauseFunc, done <-chan struct{}) {
	if le.Degraded() {
		return
	}
	ttl = max(ttl, minExtendTTL)
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-c.clock.After(ttl / 2):
		}
		if err := le.Extend(ctx, ttl); errors.Is(err, tollgate.ErrLeaseClosed) {
			cancel(fmt.Errorf("%w: %w", tollgate.ErrSlotLost, err))
			return
		}
	}
}

// runIn runs fn and ends le: Commit if fn returns nil, else Rollback, also
// when fn panics (the panic continues). The lease is ended even if ctx was
// cancelled meanwhile.
func runIn(ctx context.Context, le *Lease, fn func() error) error {
	finished := false
	end := context.WithoutCancel(ctx)
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
		// Roll back rather than hold concurrency tokens until the lease
		// expires; this refunds the rate consumption too, which
		// under-counts but never blocks anyone.
		return errors.Join(err, le.Rollback(end))
	}
	return nil
}
