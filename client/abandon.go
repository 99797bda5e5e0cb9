package client

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/internal/abandon"
	"github.com/tollgate-rl/tollgate/model"
)

// Acquires of unknown outcome (docs/semantics.md 8, as the library's
// limiter does for the acquires it makes without a key).
//
// An acquire the server may have granted without its caller learning it
// (the server answered 5xx: its store did not answer; no whole answer came
// back after the client's retries; the caller's context ended with the
// request in flight; a grant answered degraded, whose store call failed)
// may hold a concurrency slot, or tokens, for a lease nobody holds, until
// a reconciler ends it at its expiry. When the client made its idempotency
// key up itself, nobody will send it again: the client knows the lease's
// id (model.IdempotentLeaseID of the key), and rolls the lease back in the
// background, at once and again 1, 5 and 30 s after (internal/abandon)
// while the server answers that there is no such lease (the write may land
// late) or does not answer. A key the caller gave is left alone: the caller may
// send it again, and must find the first grant.

// abandonTimeout bounds each rollback when the client has no timeout.
const abandonTimeout = 10 * time.Second

// MaxAbandoning bounds the acquires a client abandons at once; those
// beyond it are reported dropped, and left to the reconciler.
const MaxAbandoning = abandon.Max

// The outcomes of an abandonment (Abandoned.Outcome).
const (
	AbandonEnded    = model.AbandonEnded
	AbandonNotFound = model.AbandonNotFound
	AbandonFailed   = model.AbandonFailed
	AbandonDropped  = model.AbandonDropped
)

// Abandoned is an acquire of unknown outcome the client abandoned, as
// WithOnAbandon reports it (its Namespace empty). See model.Abandoned.
type Abandoned = model.Abandoned

// WithOnAbandon calls fn once for every acquire of unknown outcome the
// client abandons, when its rollbacks end, on a goroutine of its own: to
// log them, or, in tests, to know when they end.
func WithOnAbandon(fn func(Abandoned)) Option { return func(s *settings) { s.onAbandon = fn } }

// unknownOutcome reports whether an acquire answered with status (0: no
// answer) and err may have been granted unseen.
func unknownOutcome(status int, err error) bool {
	switch {
	case err == nil:
		return false
	case status >= 500 || status >= 200 && status <= 299: // a store's failure, or a grant unreadable
		return true
	case status != 0: // a refusal: 4xx
		return false
	}
	return errors.Is(err, ErrServerUnreachable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// abandon rolls back, in the background, the lease of an acquire of
// entity and resource sent with key, whose outcome is unknown.
func (c *Client) abandon(key, entity, resource string) {
	ab := Abandoned{LeaseID: model.IdempotentLeaseID(key), Entity: entity, Resource: resource}
	c.abandoning.Start(ab, func() (model.AbandonOutcome, error) { return c.rollBackAbandoned(ab.LeaseID) })
}

// rollBackAbandoned sends the rollback of lease id once.
func (c *Client) rollBackAbandoned(id string) (model.AbandonOutcome, error) {
	ctx := context.Background()
	if c.timeout <= 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, abandonTimeout)
		defer cancel()
	}
	err := c.do(ctx, request{method: http.MethodPost, path: api.Version + "/leases/" + seg(id) + "/rollback", retry: true}, nil)
	switch {
	case err == nil, errors.Is(err, model.ErrLeaseClosed):
		return AbandonEnded, nil
	case errors.Is(err, api.ErrLeaseNotFound):
		return AbandonNotFound, nil
	}
	return AbandonFailed, err
}
