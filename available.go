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

// TimeUntilAvailable reports how long before Acquire with the same
// arguments could succeed: zero if it could now. Refill's time is exact,
// saturated at MaxWait (Check's RetryAfterMS is exact beyond it).
// Concurrency and reserved limits wait for a release, which no clock
// foretells: for them it is when to look again, the earliest expiry among
// their holders or the limiter's polling hint, and SlotPoll for a full
// reserved limit (never zero while a release is awaited). It writes
// nothing.
func (l *Limiter) TimeUntilAvailable(ctx context.Context, entity, resource string, consume Consume, opts ...AcquireOption) (time.Duration, error) {
	ex, err := l.Check(ctx, entity, resource, consume, opts...)
	if err != nil || ex == nil {
		return 0, err
	}
	if ex.RetryAfter == 0 {
		return model.SlotPoll, nil // a reserved limit, waiting for a release
	}
	return ex.RetryAfter, nil
}

// Check reports the refusal that Acquire with the same arguments would meet
// now, writing nothing: nil if it could succeed now. It is
// TimeUntilAvailable in full: every limit's status, waits beyond MaxWait
// exactly (RetryAfterMS), what concurrency and reserved limits wait for
// (Waits). A refusal by such limits alone reads their holders' expiries,
// as Acquire's does.
func (l *Limiter) Check(ctx context.Context, entity, resource string, consume Consume, opts ...AcquireOption) (*RateLimitExceeded, error) {
	if len(consume) == 0 {
		return nil, model.Invalid("consume", "", "must name at least one limit")
	}
	d, err := l.peek(ctx, entity, resource, consume, opts)
	if err != nil {
		return nil, err
	}
	defer d.release()
	if !refused(d) {
		return nil, nil
	}
	return l.refusal(ctx, d), nil
}

// refused reports whether a checked limit of d's request cannot cover its
// amount.
func refused(d *leaseData) bool {
	for _, b := range d.req.Buckets {
		for _, lr := range b.Limits {
			if lr.Check && lr.Observed.Tokens < lr.Amount {
				return true
			}
		}
	}
	return false
}

// peek plans a request and evaluates it against copies of the stored
// buckets. The caller releases the returned state.
func (l *Limiter) peek(ctx context.Context, entity, resource string, consume Consume, opts []AcquireOption) (*leaseData, error) {
	d := l.getLeaseData()
	for _, o := range opts {
		o(&d.opts)
	}
	now := d.now()
	_, err := l.plan(ctx, d, entity, resource, consume, now)
	l.countMemoHits(d)
	if err != nil {
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
