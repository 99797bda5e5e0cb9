package client

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate-rl/tollgate/model"

	"github.com/tollgate-rl/tollgate/internal/hold"
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
// model.ErrSlotLost (context.Cause). An extension that fails otherwise
// (the network, the server's store) is tried again at the next half.
//
// When nothing frees up within wait, WithSlot returns the last denial: a
// *model.RateLimitExceeded.
func (c *Client) WithSlot(ctx context.Context, entity, resource string, consume model.Consume, wait time.Duration,
	fn func(context.Context) error, opts ...AcquireOption) error {
	le, err := hold.Within(ctx, wait, entity+"/"+resource,
		func(ctx context.Context) (*Lease, error) { return c.Acquire(ctx, entity, resource, consume, opts...) },
		func(ctx context.Context) (*Lease, error) { return c.Wait(ctx, entity, resource, consume, opts...) })
	if err != nil {
		return err
	}
	o, err := applyAcquire(opts)
	if err != nil {
		return err
	}
	ttl := o.LeaseTTL
	if ttl <= 0 {
		ttl = le.ExpiresAt().Sub(c.clock.Now())
	}
	if le.Degraded() {
		ttl = 0 // a degraded lease never expires
	} else if ttl > 0 {
		ttl = max(ttl, minExtendTTL)
	}
	gone := func(err error) bool { return errors.Is(err, model.ErrLeaseClosed) }
	return hold.Slot(ctx, le, c.clock, ttl, gone, model.ErrSlotLost, fn)
}
