package tollgate

import (
	"context"
)

var _ Acquirer[*Lease] = (*Limiter)(nil)

// AcquireAndCommit acquires and commits at once, for work whose cost is
// known up front: what Acquire then Commit would do, and what was
// consumed.
//
// With an idempotency key (WithIdempotencyKey), a lease that holds no
// concurrency token is granted and committed in one store step, which
// remembers it: a retry with the key gets the same Grant back, Replayed,
// and debits nothing.
func (l *Limiter) AcquireAndCommit(ctx context.Context, entity, resource string, consume Consume, opts ...AcquireOption) (Grant, error) {
	le, err := l.acquire(ctx, entity, resource, consume, true, opts)
	if err != nil {
		return Grant{}, err
	}
	g := Grant{Consumed: le.Consumed(), Statuses: le.Statuses(), Degraded: le.Degraded(), Replayed: le.Replayed()}
	if err := le.Commit(ctx); err != nil {
		return Grant{}, err
	}
	return g, nil
}
