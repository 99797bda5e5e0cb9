package tollgate

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate-rl/tollgate/internal/hold"
)

// WithSlot waits up to wait for what consume asks (typically one slot of a
// concurrency limit, and any rate limits of the call), runs fn holding it,
// and always ends the lease: Commit when fn returns nil, Rollback when it
// returns an error or panics (the panic continues), as Do does. A wait of
// zero or less tries once.
//
// While fn runs, a durable lease (one holding a slot) is extended every
// half of its expiry (WithLeaseTTL, or the limiter's default), so that
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
	le, err := hold.Within(ctx, wait, entity+"/"+resource,
		func(ctx context.Context) (*Lease, error) { return l.Acquire(ctx, entity, resource, consume, opts...) },
		func(ctx context.Context) (*Lease, error) { return l.Wait(ctx, entity, resource, consume, opts...) })
	if err != nil {
		return err
	}
	// A lease without a record does not expire (expiry 0: no extensions).
	var expiry time.Duration
	if le.ID() != "" {
		if expiry = le.ExpiresAt().Sub(l.clock.Now()); expiry > 0 {
			expiry = max(expiry, MinLeaseTTL)
		}
	}
	gone := func(err error) bool { return errors.Is(err, ErrLeaseClosed) }
	return hold.Slot(ctx, le, l.clock, expiry, gone, ErrSlotLost, fn)
}
