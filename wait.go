package tollgate

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/internal/hold"
	"github.com/tollgate-rl/tollgate/internal/waitq"
	"github.com/tollgate-rl/tollgate/model"
)

// Wait acquires like Acquire, but when denied it waits until granted or
// ctx ends. Callers of one process waiting on the same entity and resource
// are served in deadline order (earliest context deadline first, callers
// without one after, in arrival order) by one poller per entity and
// resource (package internal/waitq), so waiting callers cost about one
// store call per grant rather than one per caller per retry.
//
// The poller sleeps as each refusal says (RateLimitExceeded.Backoff): a
// rate limit's RetryAfter exactly; for a concurrency or reserved limit,
// which a holder may give back at any time, it looks again after a second
// (SlotPoll), or at the earliest expiry among its holders if sooner. A
// lease of this Limiter that gives such tokens back, as it ends, wakes the
// pollers waiting for them at once.
//
// A caller whose deadline falls before refill could grant it is refused
// at once with an error matching ErrWaitDeadline and the refusal (a
// *RateLimitExceeded), rather than sleep in vain; one waiting for a slot
// stays in line until its deadline, and then gets the same error (which
// also matches context.DeadlineExceeded). Other errors are returned as
// they occur.
//
// After a grant, the next caller in line waits for as long as the granted
// request would now have to: callers asking the same amounts (the usual
// case) are served as soon as refill allows; one asking less may wait a
// little longer than it had to, never too little.
func (l *Limiter) Wait(ctx context.Context, entity, resource string, consume Consume, opts ...AcquireOption) (*Lease, error) {
	return l.waiting.Wait(ctx, waitq.Key(entity, resource), func(ctx context.Context) (*Lease, waitq.Next, error) {
		le, err := l.Acquire(ctx, entity, resource, consume, opts...)
		var ex *model.RateLimitExceeded
		switch {
		case errors.As(err, &ex):
			return nil, waitq.Refused(ex), err
		case err != nil:
			return nil, waitq.Next{}, err
		}
		next := le.nextWait()
		return le, waitq.Next{After: next, Least: next}, nil
	})
}

// nextWait returns how long the lease's request would have to wait now
// that it was granted: the longest refill any checked limit needs to cover
// its amount again (concurrency limits do not refill, and count 0),
// saturated at MaxWait.
func (le *Lease) nextWait() time.Duration {
	d, ok := le.open()
	if !ok {
		return 0
	}
	defer d.mu.Unlock()
	var ms int64
	for i := range d.req.Buckets {
		for j := range d.req.Buckets[i].Limits {
			lr := &d.req.Buckets[i].Limits[j]
			if !lr.Check || lr.Amount == 0 || !lr.Params.Refills() {
				continue
			}
			after := bucket.State{Tokens: lr.Observed.Tokens - lr.Amount, Rem: lr.Observed.Rem}
			ms = max(ms, bucket.RetryAt(after, lr.Params, lr.Amount, d.req.Now))
		}
	}
	return model.DurationMS(ms)
}

// wakeWaiters wakes the callers of Wait in this process waiting for the
// concurrency or reserved tokens that d's lease, ending, gave back. It
// costs one atomic load when nobody waits.
func (l *Limiter) wakeWaiters(d *leaseData) {
	if !l.waiting.Waiting() {
		return
	}
	for i := range d.req.Buckets {
		b := &d.req.Buckets[i]
		for j := range b.Limits {
			if lr := &b.Limits[j]; !lr.Params.Refills() && lr.Amount > 0 {
				l.waiting.Wake(waitq.Key(b.Key.Entity, b.Key.Resource))
				break
			}
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
	return hold.Run(ctx, le, func() error { return fn(ctx, le) })
}
