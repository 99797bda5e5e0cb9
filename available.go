package tollgate

import (
	"context"
	"time"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Available reports the current state of every limit in effect for entity and
// resource and its cascade ancestors, after refill. It writes nothing.
func (l *Limiter) Available(ctx context.Context, entity, resource string, opts ...AcquireOption) ([]Status, error) {
	d, err := l.peek(ctx, entity, resource, nil, opts)
	if err != nil {
		return nil, err
	}
	defer d.release()
	return l.statuses(d, false), nil
}

// TimeUntilAvailable reports how long refill alone needs before Acquire with
// the same arguments could succeed: zero if it could now. Concurrency limits
// that are exhausted report the concurrency retry hint. It writes nothing.
func (l *Limiter) TimeUntilAvailable(ctx context.Context, entity, resource string, consume Consume, opts ...AcquireOption) (time.Duration, error) {
	if len(consume) == 0 {
		return 0, model.Invalid("consume", "", "must name at least one limit")
	}
	d, err := l.peek(ctx, entity, resource, consume, opts)
	if err != nil {
		return 0, err
	}
	defer d.release()
	var wait time.Duration
	for _, b := range d.req.Buckets {
		for _, lr := range b.Limits {
			if lr.Check && lr.Observed.Tokens < lr.Amount {
				wait = max(wait, l.retryAfter(lr))
			}
		}
	}
	return wait, nil
}

// peek plans a request and evaluates it against copies of the stored
// buckets. The caller releases the returned state.
func (l *Limiter) peek(ctx context.Context, entity, resource string, consume Consume, opts []AcquireOption) (*leaseData, error) {
	d := l.getLeaseData()
	for _, o := range opts {
		o(&d.opts)
	}
	now := d.now()
	if _, err := l.plan(ctx, d, entity, resource, consume, now); err != nil {
		d.release()
		return nil, err
	}
	keys := make([]store.BucketKey, len(d.req.Buckets))
	for i, b := range d.req.Buckets {
		keys[i] = b.Key
	}
	recs, err := l.store.ReadBuckets(ctx, d.ns, keys)
	if err != nil {
		d.release()
		return nil, storeErr(ctx, "read buckets", entity+"/"+resource, err)
	}
	for i := range d.req.Buckets {
		rec := recs[i]
		if rec == nil {
			rec = store.NewRecord(d.req.Now)
		}
		store.Prepare(rec, &d.req.Buckets[i], d.req.Now)
	}
	return d, nil
}
