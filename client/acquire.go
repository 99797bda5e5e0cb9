package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// acquireOptions is what AcquireOption values set.
type acquireOptions struct {
	limits   []string
	limitErr error
	mode     tollgate.OnUnavailable
	ttl      time.Duration
}

// AcquireOption configures one Acquire, AcquireAndCommit, AcquireWait or
// Available call.
type AcquireOption func(*acquireOptions)

// WithLimits makes the call use limits instead of the stored configuration,
// as tollgate.WithLimits does. They are checked when the option is made; bad
// limits make the call fail with a *tollgate.ValidationError without
// reaching the server.
func WithLimits(limits ...tollgate.Limit) AcquireOption {
	texts := make([]string, len(limits))
	for i, l := range limits {
		texts[i] = l.String()
	}
	err := model.ValidateLimits(limits)
	if err == nil && len(limits) == 0 {
		err = model.Invalid("limits", "", "WithLimits needs at least one limit")
	}
	return func(o *acquireOptions) { o.limits, o.limitErr = texts, err }
}

// WithOnUnavailable sets what the server does for this call if its store
// cannot answer (tollgate.Block or tollgate.Allow), overriding the stored
// system setting. It does not apply to the client's own failures to reach
// the server.
func WithOnUnavailable(mode tollgate.OnUnavailable) AcquireOption {
	return func(o *acquireOptions) { o.mode = mode }
}

// WithLeaseTTL sets how long the lease lives unless extended (Lease.Extend)
// before it expires and the server's reconciler commits it as it stands
// (the server's default is 5 minutes; it accepts 1 second to 24 hours).
// For Reserve it is the reservation's expiry (default: none); WithSlot
// extends the lease by it. Ignored by AcquireAndCommit and Available.
func WithLeaseTTL(d time.Duration) AcquireOption {
	return func(o *acquireOptions) { o.ttl = d }
}

func applyAcquire(opts []AcquireOption) acquireOptions {
	var o acquireOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Grant is the outcome of AcquireAndCommit: what was consumed and every
// limit's state just after.
type Grant struct {
	Consumed tollgate.Consume
	Statuses []tollgate.Status
	// Degraded reports that the server's store could not answer and the
	// Allow mode granted without counting.
	Degraded bool
}

// Acquire checks and debits consume against every limit in effect for
// entity and resource, and their cascade ancestors, all or nothing, like
// tollgate.Limiter.Acquire. The returned lease must be ended with Commit
// or Rollback; a reconciler commits it when its TTL ends otherwise.
//
// A denial is a *tollgate.RateLimitExceeded (nothing was consumed); bad
// input a *tollgate.ValidationError; a store or network failure a
// *tollgate.UnavailableError.
func (c *Client) Acquire(ctx context.Context, entity, resource string, consume tollgate.Consume, opts ...AcquireOption) (*Lease, error) {
	resp, err := c.acquire(ctx, entity, resource, consume, false, opts)
	if err != nil {
		return nil, err
	}
	if resp.LeaseID == "" {
		return nil, &model.UnavailableError{Op: "server", Err: badResponse(errors.New("granted acquire without a lease id"))}
	}
	return newLease(c, entity, resource, resp), nil
}

// AcquireAndCommit acquires and commits in one call, for work whose cost is
// known up front; no lease is kept. Errors are those of Acquire.
func (c *Client) AcquireAndCommit(ctx context.Context, entity, resource string, consume tollgate.Consume, opts ...AcquireOption) (Grant, error) {
	resp, err := c.acquire(ctx, entity, resource, consume, true, opts)
	if err != nil {
		return Grant{}, err
	}
	return Grant{Consumed: tollgate.Consume(resp.Consumed), Statuses: api.ToStatuses(resp.Limits), Degraded: resp.Degraded}, nil
}

func (c *Client) acquire(ctx context.Context, entity, resource string, consume tollgate.Consume, commit bool, opts []AcquireOption) (api.AcquireResponse, error) {
	o := applyAcquire(opts)
	if o.limitErr != nil {
		return api.AcquireResponse{}, o.limitErr
	}
	body := api.AcquireRequest{
		Entity: entity, Resource: resource, Consume: consume, Limits: o.limits,
		Commit: commit, OnUnavailable: string(o.mode),
	}
	if !commit && o.ttl > 0 {
		body.LeaseTTLMS = api.CeilMS(o.ttl)
	}
	var resp api.AcquireResponse
	err := c.do(ctx, request{method: http.MethodPost, path: api.Version + "/acquire", body: body}, &resp)
	return resp, err
}

// Wait acquires like Acquire, but when denied it waits until granted or
// ctx ends, like tollgate.Limiter.Wait: the callers of this client waiting
// on the same entity and resource are served in deadline order by one
// poller, which sleeps each refusal's RetryAfter, so they cost about one
// call to the server per grant (and one refused call after each grant, as
// the client cannot foresee the next refusal). A caller whose deadline
// comes before the next attempt is refused at once with an error matching
// tollgate.ErrWaitDeadline and the denial; one whose ctx ends while it
// waits gets ctx.Err(). Other errors are returned as they occur. Each
// attempt is bounded by WithTimeout on its own.
func (c *Client) Wait(ctx context.Context, entity, resource string, consume tollgate.Consume, opts ...AcquireOption) (*Lease, error) {
	return c.waiting.Wait(ctx, entity+"\x00"+resource, func(ctx context.Context) (*Lease, time.Duration, error) {
		le, err := c.Acquire(ctx, entity, resource, consume, opts...)
		var ex *tollgate.RateLimitExceeded
		if errors.As(err, &ex) {
			return nil, max(ex.RetryAfter, time.Millisecond), err
		}
		return le, 0, err
	})
}

// AcquireWait is Wait, under the name the client had before the library
// and the client shared theirs.
//
// Deprecated: use Wait.
func (c *Client) AcquireWait(ctx context.Context, entity, resource string, consume tollgate.Consume, opts ...AcquireOption) (*Lease, error) {
	return c.Wait(ctx, entity, resource, consume, opts...)
}

// Available reports the current state of every limit in effect for entity
// and resource and their cascade ancestors, after refill; it writes
// nothing. Only WithLimits applies.
func (c *Client) Available(ctx context.Context, entity, resource string, opts ...AcquireOption) ([]tollgate.Status, error) {
	o := applyAcquire(opts)
	if o.limitErr != nil {
		return nil, o.limitErr
	}
	q := url.Values{"entity": {entity}}
	if resource != "" {
		q.Set("resource", resource)
	}
	if len(o.limits) > 0 {
		q["limits"] = o.limits
	}
	var resp api.AvailableResponse
	if err := c.do(ctx, request{method: http.MethodGet, path: api.Version + "/available", query: q}, &resp); err != nil {
		return nil, err
	}
	return api.ToStatuses(resp.Limits), nil
}
