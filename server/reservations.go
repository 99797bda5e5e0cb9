package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Reservations (docs/semantics.md, section 12) over HTTP. A reservation is
// a durable lease of the library whose record the store keeps under the
// reserved id; these routes resolve it by that id in the request's
// namespace, as the lease routes resolve a lease, and hold nothing between
// requests. The lease routes never reach a reservation (isLeaseID).

// defaultReservationPage is the page of GET /v1/reservations without limit.
const defaultReservationPage = 100

// reserve makes a reservation (tollgate.Limiter.Reserve): 201 when this
// call made it, 200 when the same entity and resource held the id already
// (nothing debited again).
func (s *Server) reserve(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.ReserveRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if err := checkReservationID(req.ID); err != nil {
		return err
	}
	if err := c.checkEntity(r.Context(), req.Entity); err != nil {
		return err
	}
	if err := c.checkOverrides(r.Context(), req.Limits, req.OnUnavailable); err != nil {
		return err
	}
	opts, err := s.reserveOptions(&req)
	if err != nil {
		return err
	}
	opts = append(opts, tollgate.WithAudit(c.writeOpts()...)) // the reserve event's principal
	lim, err := c.limiter(r.Context())
	if err != nil {
		return err
	}
	g, err := lim.Reserve(r.Context(), req.Entity, req.Resource, req.ID, tollgate.Consume(req.Consume), opts...)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if !g.New {
		status = http.StatusOK
	}
	writeJSON(w, status, api.ReserveResponse{Reservation: api.FromReservation(g.Reservation), Consumed: g.Consumed,
		Limits: api.FromStatuses(g.Statuses), Degraded: g.Degraded})
	return nil
}

// reserveOptions turns a reservation request's limits, mode and TTL into
// acquire options, validating them.
func (s *Server) reserveOptions(req *api.ReserveRequest) ([]tollgate.AcquireOption, error) {
	opts, err := s.acquireOptions(make([]tollgate.AcquireOption, 0, 4), req.Limits, req.OnUnavailable)
	if err != nil {
		return nil, err
	}
	if req.TTLMS != 0 {
		ttl, err := s.ttlOf("ttl_ms", req.TTLMS)
		if err != nil {
			return nil, err
		}
		opts = append(opts, tollgate.WithLeaseTTL(recordExpiry(ttl)))
	}
	return opts, nil
}

// checkReservationID checks a reservation id of a body or a path, naming
// the field id, as the API calls it.
func checkReservationID(id string) error {
	err := model.ValidateReservationID(id)
	var ve *model.ValidationError
	if errors.As(err, &ve) {
		return model.Invalid("id", ve.Value, ve.Reason)
	}
	return err
}

func (s *Server) getReservation(w http.ResponseWriter, r *http.Request, c *call) error {
	id := r.PathValue("id")
	if err := checkReservationID(id); err != nil {
		return err
	}
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	rv, err := c.reservation(r.Context(), adm, id)
	return answer(w, http.StatusOK, rv, err, api.FromReservation)
}

// reservation reads reservation id for the request. One held by an entity
// beyond the key's scope is none of its business: it is answered as one
// that does not exist.
func (c *call) reservation(ctx context.Context, adm admin, id string) (tollgate.Reservation, error) {
	rv, err := adm.Reservation(ctx, id)
	if err != nil {
		return rv, err
	}
	if err := c.checkEntity(ctx, rv.Entity); err != nil {
		if errors.Is(err, api.ErrPermissionDenied) {
			return tollgate.Reservation{}, fmt.Errorf("reservation %s: %w", id, model.ErrLeaseNotFound)
		}
		return tollgate.Reservation{}, err
	}
	return rv, nil
}

// release ends a reservation: 204, or 404 lease_not_found when the id
// holds none in the request's namespace (as the library's Release). Its
// audit event records the caller's principal and the event_* parameters,
// which name the external event it was made on (package events, through
// the Go client).
func (s *Server) release(w http.ResponseWriter, r *http.Request, c *call) error {
	id := r.PathValue("id")
	if err := checkReservationID(id); err != nil {
		return err
	}
	opts := c.writeOpts()
	if t := triggerOf(r.URL.Query()); !t.IsZero() {
		if err := t.Validate(); err != nil {
			return err
		}
		opts = append(opts, tollgate.WithTrigger(t))
	}
	if c.key != nil && c.key.Scoped() { // the reservation's entity must be in scope
		adm, err := c.admin(r.Context())
		if err != nil {
			return err
		}
		if _, err := c.reservation(r.Context(), adm, id); err != nil {
			return err
		}
	}
	lim, err := c.limiter(r.Context())
	if err != nil {
		return err
	}
	return noContent(w, lim.Release(r.Context(), id, opts...))
}

// triggerOf reads the event_* parameters of a release.
func triggerOf(q url.Values) tollgate.EventTrigger {
	return tollgate.EventTrigger{
		Rule: q.Get(api.EventRuleParam), Source: q.Get(api.EventSourceParam),
		DetailType: q.Get(api.EventDetailTypeParam), EventID: q.Get(api.EventIDParam),
	}
}

func (s *Server) listReservations(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	limit, err := pageLimit(q, defaultReservationPage, store.MaxLeasePage)
	if err != nil {
		return err
	}
	if err := c.needEntity(r.Context(), "entity", q.Get("entity")); err != nil {
		return err
	}
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	rs, next, err := adm.Reservations(r.Context(), q.Get("entity"), q.Get("resource"), q.Get("after"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.ReservationsResponse{Reservations: api.FromReservations(rs), Next: next})
	return nil
}
