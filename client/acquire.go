package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/internal/hold"
	"github.com/tollgate-rl/tollgate/internal/waitq"
	"github.com/tollgate-rl/tollgate/model"
)

// AcquireOption configures one call, as for tollgate.Limiter: it is the
// library's option type too (model.AcquireOption, which tollgate names
// AcquireOption), so that the same options serve both (see
// model.Acquirer). WithLimits, WithOnUnavailable and WithLeaseTTL
// are sent to the server; WithDurableLease changes nothing (every lease
// the server hands out is durable); WithReservation belongs to Reserve.
type AcquireOption = model.AcquireOption

// WithLimits is model.WithLimits: the call uses limits instead of the
// stored configuration. Bad limits make the call fail with a
// *model.ValidationError without reaching the server.
func WithLimits(limits ...model.Limit) AcquireOption { return model.WithLimits(limits...) }

// WithOnUnavailable is model.WithOnUnavailable: what the server does for
// this call if its store cannot answer (model.Block or model.Allow),
// overriding the stored system setting. It does not apply to the client's
// own failures to reach the server.
func WithOnUnavailable(mode model.OnUnavailable) AcquireOption {
	return model.WithOnUnavailable(mode)
}

// WithLeaseTTL is model.WithLeaseTTL: how long the lease lives unless
// extended (Lease.Extend) before it expires and the server's reconciler
// commits it as it stands (the server's default is 5 minutes; it accepts 1
// second to 24 hours). For Reserve it is the reservation's TTL (default:
// none); WithSlot extends the lease by it. Ignored by AcquireAndCommit and
// Available.
func WithLeaseTTL(d time.Duration) AcquireOption { return model.WithLeaseTTL(d) }

// callSettings is what opts say, as the library reads them, and what the wire
// takes of them: the limits as text.
type callSettings struct {
	model.AcquireSettings
	limits []string
}

func applyAcquire(opts []AcquireOption) (callSettings, error) {
	as, err := model.SettingsOf(opts...)
	if err != nil {
		return callSettings{}, err
	}
	o := callSettings{AcquireSettings: as}
	for _, l := range as.Limits {
		o.limits = append(o.limits, l.String())
	}
	return o, nil
}

// Grant is the outcome of AcquireAndCommit, as the library's.
type Grant = model.Grant

// Acquire checks and debits consume against every limit in effect for
// entity and resource, and their cascade ancestors, all or nothing, like
// tollgate.Limiter.Acquire. The returned lease must be ended with Commit
// or Rollback; a reconciler commits it when its TTL ends otherwise.
//
// A denial is a *model.RateLimitExceeded (nothing was consumed); bad
// input a *model.ValidationError; a store or network failure a
// *model.UnavailableError.
//
// The client sends an idempotency key with each acquire (its own, unless
// WithIdempotencyKey gives one; see WithoutIdempotencyKeys) and sends it
// again when the answer is lost: the server grants once, and the lease of
// a retry answered from the first grant reports Replayed.
func (c *Client) Acquire(ctx context.Context, entity, resource string, consume model.Consume, opts ...AcquireOption) (*Lease, error) {
	resp, replayed, err := c.acquire(ctx, entity, resource, consume, false, opts)
	if err != nil {
		return nil, err
	}
	if resp.LeaseID == "" {
		return nil, &model.UnavailableError{Op: "server", Err: badResponse(errors.New("granted acquire without a lease id"))}
	}
	le := newLease(c, entity, resource, resp)
	le.replayed = replayed
	return le, nil
}

// AcquireAndCommit acquires and commits in one call, for work whose cost is
// known up front; no lease is kept. Errors are those of Acquire.
func (c *Client) AcquireAndCommit(ctx context.Context, entity, resource string, consume model.Consume, opts ...AcquireOption) (Grant, error) {
	resp, replayed, err := c.acquire(ctx, entity, resource, consume, true, opts)
	if err != nil {
		return Grant{}, err
	}
	return Grant{Consumed: model.Consume(resp.Consumed), Statuses: api.ToStatuses(resp.Limits), Degraded: resp.Degraded,
		Replayed: replayed}, nil
}

func (c *Client) acquire(ctx context.Context, entity, resource string, consume model.Consume, commit bool, opts []AcquireOption) (resp api.AcquireResponse, replayed bool, err error) {
	o, err := applyAcquire(opts)
	if err != nil {
		return api.AcquireResponse{}, false, err
	}
	if o.Reservation != "" {
		return api.AcquireResponse{}, false, model.Invalid("reservation_id", o.Reservation, "reserve with Client.Reserve, not Acquire")
	}
	body := api.AcquireRequest{
		Entity: entity, Resource: resource, Consume: orEmpty(consume), Limits: o.limits,
		Commit: commit, OnUnavailable: string(o.OnUnavailable),
	}
	if !commit && o.LeaseTTL > 0 {
		body.LeaseTTLMS = api.CeilMS(o.LeaseTTL)
	}
	key := o.IdempotencyKey
	if key == "" && c.keys {
		key = newIdempotencyKey()
	}
	var h http.Header
	status := 0
	sent := ctx.Err() == nil // a call whose context has ended sends nothing
	err = c.do(ctx, request{method: http.MethodPost, path: api.Version + "/acquire", body: body,
		idempotencyKey: key, retry: key != "", header: &h, status: &status}, &resp)
	if key != "" && o.IdempotencyKey == "" && sent && (unknownOutcome(status, err) || err == nil && resp.Degraded) {
		c.abandon(key, entity, resource) // granted unseen, maybe: see abandon.go
	}
	return resp, h.Get(api.ReplayedHeader) == "true", err
}

// newIdempotencyKey returns a key for one logical acquire: 128 random
// bits, so that it names that call alone however many clients there are.
func newIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "tgc-" + hex.EncodeToString(b[:])
}

// Wait acquires like Acquire, but when denied it waits until granted or
// ctx ends, like tollgate.Limiter.Wait: the callers of this client waiting
// on the same entity and resource are served in deadline order by one
// poller, so they cost about one call to the server per grant (and one
// refused call after each grant, as the client cannot foresee the next
// refusal). The poller sleeps as each refusal says
// (model.RateLimitExceeded.Backoff): a rate limit's RetryAfter; for a
// concurrency or reserved limit, a second (model.SlotPoll) or the earliest
// expiry among its holders if sooner, so a waiter costs about one call a
// second; a lease of this client that gives such tokens back, as it ends,
// wakes the waiters for them at once. A caller whose deadline comes before
// refill could grant it is refused at once with an error matching
// model.ErrWaitDeadline and the denial; one waiting for a slot gets the
// same error when its deadline passes; one whose ctx is cancelled gets
// ctx.Err(). Other errors are returned as they occur. Each attempt is
// bounded by WithTimeout on its own.
func (c *Client) Wait(ctx context.Context, entity, resource string, consume model.Consume, opts ...AcquireOption) (*Lease, error) {
	return c.waiting.Wait(ctx, waitq.Key(entity, resource), func(ctx context.Context) (*Lease, waitq.Next, error) {
		le, err := c.Acquire(ctx, entity, resource, consume, opts...)
		var ex *model.RateLimitExceeded
		if errors.As(err, &ex) {
			return nil, waitq.Refused(ex), err
		}
		return le, waitq.Next{}, err
	})
}

// AcquireWait is Wait, under the name the client had before the library
// and the client shared theirs.
//
// Deprecated: use Wait.
func (c *Client) AcquireWait(ctx context.Context, entity, resource string, consume model.Consume, opts ...AcquireOption) (*Lease, error) {
	return c.Wait(ctx, entity, resource, consume, opts...)
}

// Available reports the current state of every limit in effect for entity
// and resource and their cascade ancestors, after refill; it writes
// nothing. Only WithLimits applies.
func (c *Client) Available(ctx context.Context, entity, resource string, opts ...AcquireOption) ([]model.Status, error) {
	o, err := applyAcquire(opts)
	if err != nil {
		return nil, err
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

// TimeUntilAvailable reports how long refill alone needs before Acquire
// with the same arguments could succeed (zero if it could now), as
// tollgate.Limiter.TimeUntilAvailable: GET /v1/available with what consume
// names. It writes nothing.
func (c *Client) TimeUntilAvailable(ctx context.Context, entity, resource string, consume model.Consume, opts ...AcquireOption) (time.Duration, error) {
	if len(consume) == 0 {
		return 0, model.Invalid("consume", "", "must name at least one limit")
	}
	o, err := applyAcquire(opts)
	if err != nil {
		return 0, err
	}
	q := url.Values{"entity": {entity}, "resource": {resource}}
	if len(o.limits) > 0 {
		q["limits"] = o.limits
	}
	for name, n := range consume {
		q.Add("consume", name+":"+strconv.FormatInt(n, 10))
	}
	var resp api.AvailableResponse
	if err := c.do(ctx, request{method: http.MethodGet, path: api.Version + "/available", query: q}, &resp); err != nil {
		return 0, err
	}
	if resp.RetryAfterMS == nil {
		return 0, &model.UnavailableError{Op: "server", Err: badResponse(errors.New("no retry_after_ms in the answer: a server older than this client"))}
	}
	return time.Duration(*resp.RetryAfterMS) * time.Millisecond, nil
}

// Do runs fn inside a lease, as tollgate.Limiter.Do: it acquires, calls fn,
// and commits if fn returns nil; if fn returns an error or panics, the
// lease is rolled back (and the panic continues). The endings are not
// cancelled with ctx, so a cancelled call still records what it did.
func (c *Client) Do(ctx context.Context, entity, resource string, consume model.Consume, fn func(context.Context, *Lease) error, opts ...AcquireOption) error {
	le, err := c.Acquire(ctx, entity, resource, consume, opts...)
	if err != nil {
		return err
	}
	return hold.Run(ctx, le, func() error { return fn(ctx, le) })
}

// orEmpty is c, or an empty Consume for nil: the server refuses null
// (a nil map's JSON) where an object belongs, and answers an empty one as
// the library answers a nil Consume.
func orEmpty(c model.Consume) model.Consume {
	if c == nil {
		return model.Consume{}
	}
	return c
}
