package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// Reserved is the outcome of Reserve.
//
// Deprecated: it is model.ReservationGrant, the library's name.
type Reserved = model.ReservationGrant

// Reserve reserves resource id for entity and resource, as
// tollgate.Limiter.Reserve does: consume names the
// reserved limits to take (1 each) and any other limits to debit with
// them, all or nothing; a nil or empty consume takes 1 of every reserved
// limit in effect for entity and resource, and nothing else. WithLimits
// and WithOnUnavailable apply as to Acquire; WithLeaseTTL gives the
// reservation an expiry after which the server's reconciler releases it
// (without it, it lasts until released). The server's audit event of the
// reservation records the principal of model.WithAudit, or else the
// client's, unless the server has API keys (then the key's name).
//
// The same id held by the same entity and resource is the same
// reservation (ReservationGrant.New is false); held by another, it is an error
// matching model.ErrReservationConflict. A full reserved limit is a
// *model.RateLimitExceeded; bad input a *model.ValidationError.
func (c *Client) Reserve(ctx context.Context, entity, resource, id string, consume model.Consume, opts ...AcquireOption) (model.ReservationGrant, error) {
	o, err := applyAcquire(opts)
	if err != nil {
		return model.ReservationGrant{}, err
	}
	body := api.ReserveRequest{Entity: entity, Resource: resource, ID: id, Consume: consume, Limits: o.limits, OnUnavailable: string(o.OnUnavailable)}
	if o.LeaseTTL > 0 {
		body.TTLMS = api.CeilMS(o.LeaseTTL)
	}
	var resp api.ReserveResponse
	var status int
	// WithAudit's principal, if any, is this call's (the server's API key
	// name wins over it).
	principal := model.WriteSettingsOf(o.Audit...).Principal
	req := request{method: http.MethodPost, path: api.Version + "/reservations", body: body, status: &status, principal: principal}
	if err := c.do(ctx, req, &resp); err != nil {
		return model.ReservationGrant{}, err
	}
	return model.ReservationGrant{
		Reservation: api.ToReservation(resp.Reservation), New: status == http.StatusCreated,
		Consumed: model.Consume(resp.Consumed), Statuses: api.ToStatuses(resp.Limits), Degraded: resp.Degraded,
	}, nil
}

// Release ends the reservation of resource id, whoever holds it, as
// tollgate.Limiter.Release does: its reserved tokens come back, what its
// acquire consumed of rate limits stays consumed. A reservation that does
// not exist in the client's namespace (never made, released, expired) is
// an error matching model.ErrLeaseNotFound; a caller releasing on an
// event, which may come twice, can treat that as done. Release satisfies
// events.Releaser.
//
// The server's audit event of the release records the trigger of
// model.WithTrigger (sent as the event_* query parameters) and the
// principal: the API key's name, or else model.WithPrincipal's, or else
// the client's (WithPrincipal).
func (c *Client) Release(ctx context.Context, id string, opts ...model.WriteOption) error {
	o := model.WriteSettingsOf(opts...)
	if err := o.Validate(); err != nil {
		return err
	}
	req := request{method: http.MethodDelete, path: reservationPath(id), query: triggerQuery(o.Trigger), principal: o.Principal}
	return c.do(ctx, req, nil)
}

// triggerQuery is the query of a release made on t (nil: none).
func triggerQuery(t model.EventTrigger) url.Values {
	if t.IsZero() {
		return nil
	}
	q := url.Values{}
	for k, v := range map[string]string{
		api.EventRuleParam: t.Rule, api.EventSourceParam: t.Source, api.EventDetailTypeParam: t.DetailType, api.EventIDParam: t.EventID,
	} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// Reservation returns the reservation of resource id, found by the id
// alone; one that does not exist is an error matching
// model.ErrLeaseNotFound.
func (c *Client) Reservation(ctx context.Context, id string) (model.Reservation, error) {
	var r api.Reservation
	if err := c.do(ctx, request{method: http.MethodGet, path: reservationPath(id)}, &r); err != nil {
		return model.Reservation{}, err
	}
	return api.ToReservation(r), nil
}

// Reservations lists the reservations of entity, of one resource if
// resource is not empty, sorted by id: up to limit (1 to 1000) whose ids
// follow after ("": the start), and the after of the next page ("" when
// there is none), as tollgate.Admin.Reservations.
func (c *Client) Reservations(ctx context.Context, entity, resource, after string, limit int) ([]model.Reservation, string, error) {
	q := url.Values{"entity": {entity}, "limit": {strconv.Itoa(limit)}}
	if resource != "" {
		q.Set("resource", resource)
	}
	if after != "" {
		q.Set("after", after)
	}
	var resp api.ReservationsResponse
	if err := c.do(ctx, request{method: http.MethodGet, path: api.Version + "/reservations", query: q}, &resp); err != nil {
		return nil, "", err
	}
	return api.ToReservations(resp.Reservations), resp.Next, nil
}

func reservationPath(id string) string { return api.Version + "/reservations/" + seg(id) }
