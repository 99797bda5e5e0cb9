package client

import (
	"context"
	"net/http"
	"time"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// Penalties and their undo: Penalize (the data plane, what a caller does
// when a vendor answers 429) and Reset (the control plane, an operator's
// undo).

// Penalize empties the named limits of entity and resource until until,
// for every process sharing the server's store, as
// tollgate.Limiter.Penalize does: what to do when a vendor answers 429
// with its own retry-after. Acquires before until are denied with a
// RetryAfter of at least until - now. The limits must be rate limits in
// effect; until after now and at most model.MaxPenalty ahead (by the
// server's clock); else a *model.ValidationError. The audit event
// records the reason and the call's or the client's principal.
func (c *Client) Penalize(ctx context.Context, entity, resource string, until time.Time, reason string, limits []string, opts ...model.WriteOption) error {
	body := api.PenalizeRequest{Entity: entity, Resource: resource, Penalty: penalty(until, reason, limits)}
	req, err := changing(request{method: http.MethodPost, path: api.Version + "/penalize", body: body}, opts)
	if err != nil {
		return err
	}
	return c.do(ctx, req, nil)
}

// penalty is the body of a penalty ending at until, rounded up to the
// millisecond: it lasts at least until then.
func penalty(until time.Time, reason string, limits []string) api.Penalty {
	ms := until.UnixMilli()
	if until.After(time.UnixMilli(ms)) {
		ms++
	}
	if limits == nil {
		limits = []string{} // not null, which the server refuses
	}
	return api.Penalty{UntilMS: ms, Reason: reason, Limits: limits}
}

// Penalize empties limits of the lease's entity and resource until until,
// as Client.Penalize does; the server looks the limits up among those the
// lease was acquired with (WithLimits or stored). Call it before ending
// the lease: an ended lease reports model.ErrLeaseClosed. A degraded
// lease, which the server knows nothing of, penalizes through
// Client.Penalize.
func (le *Lease) Penalize(ctx context.Context, until time.Time, reason string, limits []string, opts ...model.WriteOption) error {
	if le.degraded {
		return le.c.Penalize(ctx, le.entity, le.resource, until, reason, limits, opts...)
	}
	o := model.WriteSettingsOf(opts...)
	if err := o.Validate(); err != nil {
		return err
	}
	return le.callAs(ctx, "penalize", o.Principal, penalty(until, reason, limits), nil)
}

// Reset refills limits of entity's bucket for resource (those named, or
// every refilling one), lifting a penalty, as tollgate.Admin.Reset does;
// an admin key's call, audited with the call's or the client's principal.
func (c *Client) Reset(ctx context.Context, entity, resource, reason string, limits []string, opts ...model.WriteOption) error {
	body := api.ResetRequest{Entity: entity, Resource: resource, Reason: reason, Limits: limits}
	req, err := changing(request{method: http.MethodPost, path: api.Version + "/reset", body: body}, opts)
	if err != nil {
		return err
	}
	return c.do(ctx, req, nil)
}
