package api

import "github.com/tollgate-rl/tollgate/model"

// The query parameters of DELETE /v1/reservations/{id} that name the
// external event a release was made on (model.EventTrigger), for its
// audit event: the rule that matched it, and the event's source,
// detail-type and id. Each is optional, at most
// model.MaxTriggerFieldLen bytes.
const (
	EventRuleParam       = "event_rule"
	EventSourceParam     = "event_source"
	EventDetailTypeParam = "event_detail_type"
	EventIDParam         = "event_id"
)

// ReserveRequest is the body of POST /v1/reservations.
type ReserveRequest struct {
	Entity   string `json:"entity"`
	Resource string `json:"resource"`
	// ID is the resource id reserved (an EMR cluster id, a job id).
	ID string `json:"id"`
	// Consume names the reserved limits to take (1 each) and any other
	// limits to debit with them, all or nothing, as an acquire's consume.
	// Absent or empty: 1 of every reserved limit in effect for the entity
	// and resource, and nothing else.
	Consume map[string]int64 `json:"consume,omitempty"`
	// Limits, in the limit syntax ("clusters:3/reserved"), replace the
	// stored ones, as in AcquireRequest.
	Limits []string `json:"limits,omitempty"`
	// TTLMS, when set (1000 to 86400000), is how long the reservation
	// lives before a reconciler releases it; absent, it lasts until
	// released.
	TTLMS int64 `json:"ttl_ms,omitempty"`
	// OnUnavailable overrides the stored mode: "block" or "allow".
	OnUnavailable string `json:"on_unavailable,omitempty"`
}

// Reservation is a reserved resource id on the wire (GET
// /v1/reservations/{id}, and the lists).
type Reservation struct {
	ID       string `json:"id"`
	Entity   string `json:"entity"`
	Resource string `json:"resource"`
	// Holder names the server process that made it.
	Holder      string `json:"holder,omitempty"`
	CreatedAtMS int64  `json:"created_at_ms,omitempty"`
	// ExpiresAtMS is when a reconciler releases it; absent: never.
	ExpiresAtMS int64 `json:"expires_at_ms,omitempty"`
}

// ReserveResponse answers POST /v1/reservations: the reservation, and
// what this call consumed (nothing when the id was held already).
type ReserveResponse struct {
	Reservation
	Consumed map[string]int64 `json:"consumed"`
	// Limits are the statuses of the limits debited; empty when the same
	// entity and resource held the id already (200, not 201).
	Limits []LimitStatus `json:"limits"`
	// Degraded is set when the store could not answer and mode "allow"
	// granted without counting: nothing is reserved.
	Degraded bool `json:"degraded,omitempty"`
}

// ReservationsResponse answers GET /v1/reservations. Next, when set, is
// the "after" parameter of the following page.
type ReservationsResponse struct {
	Reservations []Reservation `json:"reservations"`
	Next         string        `json:"next,omitempty"`
}

// Penalty is the body of POST /v1/leases/{id}/penalize (the lease's
// entity and resource), and with them of POST /v1/penalize. Exactly one of
// UntilMS and RetryAfterMS says when the penalty ends.
type Penalty struct {
	// UntilMS is the end of the penalty, Unix ms.
	UntilMS int64 `json:"until_ms,omitempty"`
	// RetryAfterMS is the end of the penalty from the server's now: a
	// vendor's retry-after as it came.
	RetryAfterMS int64 `json:"retry_after_ms,omitempty"`
	// Reason is kept in the audit event (at most 1024 bytes).
	Reason string `json:"reason,omitempty"`
	// Limits names the limits to empty: rate limits in effect.
	Limits []string `json:"limits"`
}

// PenalizeRequest is the body of POST /v1/penalize.
type PenalizeRequest struct {
	Entity   string `json:"entity"`
	Resource string `json:"resource"`
	Penalty
}

// FromReservation converts a reservation.
func FromReservation(r model.Reservation) Reservation {
	return Reservation{ID: r.ID, Entity: r.Entity, Resource: r.Resource, Holder: r.Holder,
		CreatedAtMS: model.UnixMilli(r.Created), ExpiresAtMS: model.UnixMilli(r.Expires)}
}

// ToReservation converts a reservation back.
func ToReservation(r Reservation) model.Reservation {
	return model.Reservation{ID: r.ID, Entity: r.Entity, Resource: r.Resource, Holder: r.Holder,
		Created: model.FromUnixMilli(r.CreatedAtMS), Expires: model.FromUnixMilli(r.ExpiresAtMS)}
}

// FromReservations converts reservations; never nil.
func FromReservations(rs []model.Reservation) []Reservation {
	out := make([]Reservation, len(rs))
	for i, r := range rs {
		out[i] = FromReservation(r)
	}
	return out
}

// ToReservations converts reservations back.
func ToReservations(rs []Reservation) []model.Reservation {
	out := make([]model.Reservation, len(rs))
	for i, r := range rs {
		out[i] = ToReservation(r)
	}
	return out
}
