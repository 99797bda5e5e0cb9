package tollgate

import (
	"context"
)

var _ Acquirer[*Lease] = (*Limiter)(nil)

// AcquireAndCommit acquires and commits at once, for work whose cost is
// known up front: what Acquire then Commit would do, and what was
// consumed.
func (l *Limiter) AcquireAndCommit(ctx context.Context, entity, resource string, consume Consume, opts ...AcquireOption) (Grant, error) {
	le, err := l.Acquire(ctx, entity, resource, consume, opts...)
	if err != nil {
		return Grant{}, err
	}
	g := Grant{Consumed: le.Consumed(), Statuses: le.Statuses(), Degraded: le.Degraded()}
	if err := le.Commit(ctx); err != nil {
		return Grant{}, err
	}
	return g, nil
}
