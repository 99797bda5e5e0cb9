package tollgate

import (
	"context"
	"time"
)

// Acquirer is the API that a Limiter (limits in this process, over a
// store) and a client.Client (limits through a tollgate serve) share: the
// same method names, arguments, options and typed errors, so code written
// against it runs on either. L is the lease each hands out: *Lease or
// *client.Lease.
//
//	func charge[L tollgate.Held](ctx context.Context, a tollgate.Acquirer[L], key string) error {
//		return a.Do(ctx, key, "openai/gpt-4o", tollgate.Consume{"rpm": 1}, func(ctx context.Context, l L) error {
//			return l.Adjust(ctx, tollgate.Consume{"tpm": 500})
//		})
//	}
type Acquirer[L Held] interface {
	Acquire(ctx context.Context, entity, resource string, consume Consume, opts ...AcquireOption) (L, error)
	Wait(ctx context.Context, entity, resource string, consume Consume, opts ...AcquireOption) (L, error)
	Do(ctx context.Context, entity, resource string, consume Consume, fn func(context.Context, L) error, opts ...AcquireOption) error
	AcquireAndCommit(ctx context.Context, entity, resource string, consume Consume, opts ...AcquireOption) (Grant, error)
	Available(ctx context.Context, entity, resource string, opts ...AcquireOption) ([]Status, error)
	TimeUntilAvailable(ctx context.Context, entity, resource string, consume Consume, opts ...AcquireOption) (time.Duration, error)
}

// Held is a granted lease, wherever it is held: *Lease, or the Go client's
// *client.Lease.
type Held interface {
	ID() string
	Entity() string
	Resource() string
	Degraded() bool
	Consumed() Consume
	Statuses() []Status
	Adjust(ctx context.Context, delta Consume) error
	Extend(ctx context.Context, d time.Duration) error
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Grant is the outcome of AcquireAndCommit: what was consumed and every
// limit's state just after.
type Grant struct {
	Consumed Consume
	Statuses []Status
	// Degraded reports that the store could not answer and the Allow mode
	// granted without counting.
	Degraded bool
}

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
