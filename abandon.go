package tollgate

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/internal/abandon"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Durable acquires of unknown outcome (docs/semantics.md 8).
//
// A durable acquire (a concurrency slot, WithDurableLease) whose store call
// fails without an answer (the store did not answer in time, the
// connection broke, the caller's context ended with the call in flight)
// may have been written all the same. Its record and its debit would then
// hold a concurrency slot, or tokens, for a lease nobody holds, until a
// reconciler ends it at its expiry (DefaultLeaseTTL), while its caller was
// told that the acquire failed. So the limiter abandons such a lease
// itself, in the background: it looks for the record, and rolls the lease
// back if it finds it open; a look that finds nothing, or fails, is made
// again 1, 5 and 30 s after the failure (internal/abandon), as a write may
// land after its caller gave up on it (a request held in a stalled server
// or on the network). What lands after the last look is the reconciler's.
//
// Only leases whose ids were made at random are abandoned. An acquire with
// an idempotency key, or a reservation, is retried by its caller under the
// same id, and the retry must find what the first call wrote.

// abandonLookTimeout bounds each look (a read and a rollback): a store
// that answers none of them in time counts as failing.
const abandonLookTimeout = 5 * time.Second

// MaxAbandoning bounds the abandoned leases a limiter looks for at once:
// during an outage every durable acquire fails, and the looks must not
// pile up. Those beyond it are counted (AbandonStats.Dropped) and left to
// the reconciler.
const MaxAbandoning = abandon.Max

// AbandonOutcome is how an abandonment ended. See model.AbandonOutcome.
type AbandonOutcome = model.AbandonOutcome

// The outcomes of an abandonment.
const (
	AbandonEnded    = model.AbandonEnded
	AbandonNotFound = model.AbandonNotFound
	AbandonFailed   = model.AbandonFailed
	AbandonDropped  = model.AbandonDropped
)

// Abandoned is one durable acquire of unknown outcome that the limiter
// abandoned. See model.Abandoned.
type Abandoned = model.Abandoned

// WithOnAbandon calls fn once for every durable acquire of unknown outcome
// the limiter abandons, when its looks end (see AbandonOutcome), on a
// goroutine of its own: to log them, or, in tests, to know when they end.
func WithOnAbandon(fn func(Abandoned)) Option { return func(o *options) { o.abandonFn = fn } }

// AbandonStats counts a limiter's abandoned acquires by outcome.
type AbandonStats struct {
	Ended, NotFound, Failed, Dropped uint64
}

// abandonments is a limiter's abandoned leases: those being looked for,
// and the counts of those done.
type abandonments struct {
	looks                            *abandon.Looks
	ended, notFound, failed, dropped atomic.Uint64
}

func newAbandonments(clk clock.Clock, fn func(Abandoned)) *abandonments {
	a := &abandonments{}
	a.looks = abandon.New(clk, func(ab Abandoned) {
		a.count(ab.Outcome)
		if fn != nil {
			fn(ab)
		}
	})
	return a
}

func (a *abandonments) count(o AbandonOutcome) {
	switch o {
	case AbandonEnded:
		a.ended.Add(1)
	case AbandonNotFound:
		a.notFound.Add(1)
	case AbandonFailed:
		a.failed.Add(1)
	case AbandonDropped:
		a.dropped.Add(1)
	}
}

func (a *abandonments) stats() AbandonStats {
	return AbandonStats{Ended: a.ended.Load(), NotFound: a.notFound.Load(), Failed: a.failed.Load(), Dropped: a.dropped.Load()}
}

// unknownOutcome reports whether err, a store's answer to a write, leaves
// unknown whether the write was applied: any error but a refusal of the
// request (invalid, or a domain error such as model.ErrLeaseExists).
func unknownOutcome(err error) bool {
	return err != nil && !errors.Is(err, model.ErrInvalid) && !errors.Is(err, model.ErrDomain)
}

// abandon starts looking for rec, the record of a durable acquire in
// namespace ns whose outcome is unknown, to roll its lease back.
func (l *Limiter) abandon(ns string, rec *store.LeaseRecord) {
	ab := Abandoned{Namespace: ns, LeaseID: rec.ID, Entity: rec.Entity, Resource: rec.Resource}
	l.abandoning.looks.Start(ab, func() (AbandonOutcome, error) { return l.lookForAbandoned(ns, rec.ID) })
}

// lookForAbandoned looks once for the record of lease id and rolls the
// lease back if it is open.
func (l *Limiter) lookForAbandoned(ns, id string) (AbandonOutcome, error) {
	ctx, cancel := context.WithTimeout(context.Background(), abandonLookTimeout)
	defer cancel()
	le, err := l.resumeIn(ctx, ns, id)
	switch {
	case errors.Is(err, model.ErrLeaseNotFound):
		return AbandonNotFound, nil
	case errors.Is(err, model.ErrLeaseClosed):
		return AbandonEnded, nil // a tombstone: an earlier look's rollback, its answer lost
	case err != nil:
		return AbandonFailed, err
	}
	if err := le.Rollback(ctx); err != nil && !errors.Is(err, model.ErrLeaseClosed) {
		return AbandonFailed, err
	}
	return AbandonEnded, nil
}
