package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/internal/waitq"
	"github.com/tollgate-rl/tollgate/model"
)

// A Lease is a granted acquire, recorded in the server's store: any server
// over that store serves it by its id. Adjust it when the real cost is
// known, Extend it if the work outlasts its TTL, then end it with Commit or
// Rollback. It is safe for concurrent use.
//
// As with the library's lease, once it has ended Adjust, Commit and
// Rollback return an error matching model.ErrLeaseClosed without a call
// to the server, and Consumed and Statuses return nil.
type Lease struct {
	c        *Client
	id       string
	entity   string
	resource string
	degraded bool
	replayed bool

	mu       sync.Mutex
	expires  time.Time
	consumed model.Consume
	statuses []model.Status
	closed   bool
}

func newLease(c *Client, entity, resource string, r api.AcquireResponse) *Lease {
	le := &Lease{
		c: c, id: r.LeaseID, entity: entity, resource: resource, degraded: r.Degraded,
		consumed: model.Consume(r.Consumed), statuses: api.ToStatuses(r.Limits),
	}
	if r.ExpiresMS != 0 {
		le.expires = time.UnixMilli(r.ExpiresMS)
	}
	return le
}

// ResumeLease takes up the open lease id, acquired through any server over
// the same store (by this process before a restart, or by another), as
// tollgate.Limiter.ResumeLease does: the lease as the server has it, with
// its consumption and expiry, and no Statuses (a resumed lease reports
// none). A lease that has ended is a *model.LeaseEndedError (matching
// model.ErrLeaseClosed); one the namespace does not hold, an error
// matching model.ErrLeaseNotFound.
func (c *Client) ResumeLease(ctx context.Context, id string) (*Lease, error) {
	if id == "" {
		return nil, model.Invalid("lease_id", id, "empty")
	}
	var out api.LeaseResponse
	if err := c.do(ctx, request{method: http.MethodGet, path: api.Version + "/leases/" + seg(id)}, &out); err != nil {
		return nil, err
	}
	if out.State != "open" {
		return nil, &model.UnavailableError{Op: "server", Err: badResponse(fmt.Errorf("lease %s is %q, want open", id, out.State))}
	}
	// Only a degraded lease comes back without its entity.
	le := &Lease{c: c, id: id, entity: out.Entity, resource: out.Resource, degraded: out.Entity == "", consumed: model.Consume(out.Consumed)}
	if out.ExpiresMS != 0 {
		le.expires = time.UnixMilli(out.ExpiresMS)
	}
	return le, nil
}

// Replayed reports whether the lease is the grant of an earlier acquire
// with the same idempotency key (a retry after a lost answer), handed out
// again: this call debited nothing, and Statuses is empty.
func (le *Lease) Replayed() bool { return le.replayed }

// ID returns the lease's id, by which any server over the same store
// serves it.
func (le *Lease) ID() string { return le.id }

// Entity returns the entity the lease was acquired for.
func (le *Lease) Entity() string { return le.entity }

// Resource returns the resource the lease was acquired for.
func (le *Lease) Resource() string { return le.resource }

// Degraded reports whether the server granted the lease without its store
// (Allow mode while the store was unavailable): nothing was consumed.
func (le *Lease) Degraded() bool { return le.degraded }

// ExpiresAt returns when the lease expires, as the server last reported it
// (after Acquire, Adjust or Extend): from then on the server's reconciler
// commits it as it stands. It is the zero time for a degraded lease,
// which never expires.
func (le *Lease) ExpiresAt() time.Time {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.expires
}

// Consumed returns what the lease has consumed so far, as the server last
// reported it (after Acquire or Adjust), per limit and summed over the
// cascade. It returns nil once the lease has ended.
func (le *Lease) Consumed() model.Consume {
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.closed {
		return nil
	}
	return maps.Clone(le.consumed)
}

// Statuses reports every limit the lease debited, with balances just after
// the grant. A degraded or ended lease has none.
func (le *Lease) Statuses() []model.Status {
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.closed {
		return nil
	}
	return slices.Clone(le.statuses)
}

// Adjust records a change to the lease's consumption on the server, e.g.
// the difference between an estimate and the real cost; negative amounts
// give back. Unlike the library's Adjust it is a network call, hence the
// context. The server applies it at Commit.
//
// As with the library's Adjust, a lease gives back at most what it took:
// an adjustment that would make the lease's net consumption of a limit
// negative (like an unknown or concurrency limit) is a
// *model.ValidationError naming the field consume.NAME, and the server
// records none of it.
func (le *Lease) Adjust(ctx context.Context, delta model.Consume) error {
	var resp api.LeaseResponse
	if err := le.call(ctx, "adjust", api.AdjustRequest{Consume: orEmpty(delta)}, &resp); err != nil {
		return err
	}
	le.update(resp)
	return nil
}

// Extend moves the lease's expiry to d from now (the server accepts 1
// second to 24 hours), so that work running longer than the lease's TTL
// keeps it: call it well before ExpiresAt, at half the TTL say. A d of
// zero or less is a *model.ValidationError on ttl_ms without a call to
// the server. A lease that expired or ended meanwhile reports
// model.ErrLeaseClosed (see Commit); Extend does not revive it.
func (le *Lease) Extend(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return model.Invalid("ttl_ms", d.String(), "must be positive")
	}
	var resp api.LeaseResponse
	if err := le.call(ctx, "extend", api.ExtendRequest{TTLMS: api.CeilMS(d)}, &resp); err != nil {
		return err
	}
	le.update(resp)
	return nil
}

// update takes what an answer about the open lease says of it.
func (le *Lease) update(resp api.LeaseResponse) {
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.closed {
		return
	}
	le.consumed = model.Consume(resp.Consumed)
	if resp.ExpiresMS != 0 {
		le.expires = time.UnixMilli(resp.ExpiresMS)
	}
}

// Commit writes pending adjustments and returns the lease's concurrency
// tokens. If the server's store fails, Commit returns the error and the
// lease stays open, so Commit (or Rollback) can be called again. A lease
// the server no longer has (ended through another handle or server,
// expired, or a retried Commit whose first attempt did arrive) is an error
// matching both model.ErrLeaseClosed and model.ErrLeaseNotFound.
func (le *Lease) Commit(ctx context.Context) error { return le.end(ctx, "commit") }

// Rollback gives back everything the lease consumed and discards pending
// adjustments. If the server's store fails, Rollback returns the error and
// the lease stays open.
func (le *Lease) Rollback(ctx context.Context) error { return le.end(ctx, "rollback") }

// end commits or rolls back the lease. Both may be sent again when their
// answer is lost (the server remembers how a lease ended): a commit again
// is answered as the first, and a rollback again with 409 rolled_back,
// which here means done.
func (le *Lease) end(ctx context.Context, action string) error {
	err := le.call(ctx, action, nil, nil)
	var ended *model.LeaseEndedError
	if action == "rollback" && errors.As(err, &ended) && ended.How == model.EndedRolledBack {
		err = nil
	}
	if err != nil {
		return err
	}
	le.wakeWaiters()
	le.close()
	return nil
}

// wakeWaiters wakes this client's callers of Wait waiting for the
// concurrency or reserved tokens that the lease, ending, gave back: those
// its statuses show it took.
func (le *Lease) wakeWaiters() {
	if !le.c.waiting.Waiting() {
		return
	}
	le.mu.Lock()
	sts := le.statuses
	le.mu.Unlock()
	for _, s := range sts {
		if (s.Kind == model.Concurrency || s.Kind == model.Reserved) && s.Requested > 0 {
			le.c.waiting.Wake(waitq.Key(s.Entity, s.Resource))
		}
	}
}

// call posts to /v1/leases/{id}/{action}, unless the lease has ended. An
// answer that the lease has ended closes it here too.
//
// The server answers 409 lease_closed for a lease that has ended (through
// another handle, another server, or a reconciler after its expiry),
// saying how: a *model.LeaseEndedError, which matches model.ErrLeaseClosed
// as the library's does. A lease it has forgotten (ended long ago), or
// never granted in the client's namespace, is 404 lease_not_found, which
// matches model.ErrLeaseClosed here as well. Every call but an adjust
// (which adds up) is sent again when its answer is lost.
func (le *Lease) call(ctx context.Context, action string, body, out any) error {
	return le.callAs(ctx, action, "", body, out)
}

// callAs is call, with principal (unless empty) replacing the client's
// for this call.
func (le *Lease) callAs(ctx context.Context, action, principal string, body, out any) error {
	if le.isClosed() {
		return fmt.Errorf("lease %s: %w", le.id, model.ErrLeaseClosed)
	}
	path := api.Version + "/leases/" + seg(le.id) + "/" + action
	req := request{method: http.MethodPost, path: path, body: body, retry: action != "adjust", principal: principal}
	err := le.c.do(ctx, req, out)
	var ended *model.LeaseEndedError
	switch {
	case errors.As(err, &ended):
		ended.ID, ended.Entity, ended.Resource = le.id, le.entity, le.resource
	case errors.Is(err, api.ErrLeaseNotFound):
		err = fmt.Errorf("lease %s: %w (%w)", le.id, model.ErrLeaseClosed, err)
	}
	if errors.Is(err, model.ErrLeaseClosed) {
		le.close()
	}
	return err
}

func (le *Lease) isClosed() bool {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.closed
}

func (le *Lease) close() {
	le.mu.Lock()
	defer le.mu.Unlock()
	le.closed = true
	le.consumed, le.statuses = nil, nil
}
