package tollgate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Reservations (docs/semantics.md, section 12): a reservation is a durable
// lease whose id is "r:" + the reserved resource's id, so that the store's
// refusal of a second record with one id (model.ErrLeaseExists) is what
// makes an id reserved once, and the id alone finds it again.

// reservationOf returns the reservation that rec records; rec's id has the
// reservation prefix.
func reservationOf(rec *store.LeaseRecord) Reservation {
	id, _ := model.ReservationOf(rec.ID)
	r := Reservation{ID: id, Entity: rec.Entity, Resource: rec.Resource, Holder: rec.Holder, Created: time.UnixMilli(rec.Created)}
	if rec.Expires > 0 {
		r.Expires = time.UnixMilli(rec.Expires)
	}
	return r
}

// reserveAttempts bounds the tries of a reservation whose id is released
// between the store's refusal and the reading of its record.
const reserveAttempts = 3

// consumeReservation runs d's request with the record of reservation
// d.opts.Reservation. If the id is taken, the record says by whom: the same
// entity and resource make the call idempotent (d becomes that
// reservation's lease, nothing debited again); anyone else is a conflict.
// A record gone by the time it is read was released meanwhile, and the id
// is free: the request is tried again.
//
// A denial is checked the same way, at the cost of one read: a backend may
// judge the buckets before the record (DynamoDB's transaction fails on
// both conditions at once, and reports the buckets), and an id already
// held is held whether or not the limit is full.
func (l *Limiter) consumeReservation(ctx context.Context, d *leaseData, now unixNano) (bool, error) {
	var expires int64 // never, unless asked: a reservation lasts until released
	if d.opts.LeaseTTL != 0 {
		expires = now.add(d.opts.LeaseTTL).milli()
	}
	rec := store.NewLeaseRecord(model.ReservationLeaseID(d.opts.Reservation), l.holder, &d.req, expires)
	// The event goes with the grant, atomically: a refusal, and a resumed
	// reservation (the id held already), write none.
	ev, err := l.reserveEvent(d, rec)
	if err != nil {
		return false, err
	}
	for attempt := 1; ; attempt++ {
		d.req.Lease, d.req.Event = rec, &ev
		granted, err := l.store.Consume(ctx, d.ns, &d.req)
		d.req.Lease, d.req.Event = nil, nil
		switch {
		case err == nil && granted:
			d.rec = rec
			return true, nil
		case err == nil:
			held, herr := l.heldReservation(ctx, d, rec)
			if herr != nil && !errors.Is(herr, model.ErrReservationConflict) {
				return false, nil // not held (or not known): the denial stands
			}
			return held, herr
		case !errors.Is(err, model.ErrLeaseExists):
			return false, err
		}
		held, err := l.heldReservation(ctx, d, rec)
		if !errors.Is(err, model.ErrLeaseNotFound) || attempt == reserveAttempts {
			return held, err
		}
	}
}

// Reserve reserves resource id for entity and resource: an acquire with
// WithReservation(id), which holds a token of each reserved limit it
// takes until Release (or, with WithLeaseTTL, until a reconciler
// releases it after that long). consume names the reserved limits to take
// (1 each) and any other limits to debit with them, all or nothing; a nil
// or empty consume takes 1 of every reserved limit in effect for entity
// and resource (WithLimits' or the stored ones), and nothing else. The
// reserve audit event records WithAudit's principal.
//
// The same id held by the same entity and resource is the same
// reservation (ReservationGrant.New is false, nothing debited again); held by
// another, it is an error matching ErrReservationConflict. A full
// reserved limit is a *RateLimitExceeded; bad input a *ValidationError,
// a bad id one of field id.
func (l *Limiter) Reserve(ctx context.Context, entity, resource, id string, consume Consume, opts ...AcquireOption) (ReservationGrant, error) {
	if err := model.ValidateReservationID(id); err != nil {
		var ve *model.ValidationError
		if errors.As(err, &ve) {
			return ReservationGrant{}, model.Invalid("id", ve.Value, ve.Reason)
		}
		return ReservationGrant{}, err
	}
	opts = append(opts[:len(opts):len(opts)], WithReservation(id))
	if len(consume) == 0 {
		var err error
		if consume, err = l.reservedLimits(ctx, entity, resource, opts); err != nil {
			return ReservationGrant{}, err
		}
	}
	le, err := l.Acquire(ctx, entity, resource, consume, opts...)
	if err != nil {
		return ReservationGrant{}, err
	}
	// A resumed lease (the id held already) reports no statuses, where a
	// fresh grant reports at least its reserved limit; a degraded lease
	// reserved nothing, and held nothing before either.
	out := ReservationGrant{Consumed: le.Consumed(), Statuses: le.Statuses(), Degraded: le.Degraded()}
	out.New = out.Degraded || len(out.Statuses) > 0
	out.Reservation = l.reservationAfter(ctx, entity, resource, id, le)
	return out, nil
}

// reservedLimits is the consume of a reservation that names none: 1 of
// every reserved limit in effect for entity and resource, those of the
// call's WithLimits or else the stored ones (read as Available reads
// them). None in effect is a *ValidationError on consume.
func (l *Limiter) reservedLimits(ctx context.Context, entity, resource string, opts []AcquireOption) (Consume, error) {
	set, err := model.SettingsOf(opts...)
	if err != nil {
		return nil, err
	}
	consume := Consume{}
	if set.Limits != nil {
		for _, lim := range set.Limits {
			if lim.Kind == model.Reserved {
				consume[lim.Name] = 1
			}
		}
	} else {
		sts, err := l.Available(ctx, entity, resource, opts...)
		if err != nil {
			return nil, err
		}
		for _, st := range sts {
			if st.Kind == model.Reserved && st.Entity == entity {
				consume[st.Limit] = 1
			}
		}
	}
	if len(consume) == 0 {
		return nil, model.Invalid("consume", "", "no reserved limit is in effect for entity "+strconv.Quote(entity)+
			" and resource "+strconv.Quote(resource)+": configure one (NAME:N/reserved) or name the limits to take")
	}
	return consume, nil
}

// reservationAfter describes the reservation that le holds, as the store
// has it (holder and creation included: one read). If that read fails
// (the reservation released meanwhile, or the store), and for a degraded
// lease, which has no record, it is what the call and the lease say.
func (l *Limiter) reservationAfter(ctx context.Context, entity, resource, id string, le *Lease) Reservation {
	if !le.Degraded() {
		if ns, err := l.namespaceID(ctx, nanoOf(l.clock.Now())); err == nil {
			if rv, err := reservationByID(ctx, l.store, ns, id); err == nil {
				return rv
			}
		}
	}
	return Reservation{ID: id, Entity: entity, Resource: resource, Expires: le.ExpiresAt()}
}

// heldReservation reads the stored record of rec's id: if it is the same
// entity and resource's, d becomes that reservation's lease (resumed) and
// heldReservation reports true; another's is ErrReservationConflict; no
// record is ErrLeaseNotFound.
func (l *Limiter) heldReservation(ctx context.Context, d *leaseData, rec *store.LeaseRecord) (bool, error) {
	held, err := l.store.GetLease(ctx, d.ns, rec.ID)
	switch {
	case err != nil:
		return false, err
	case held.Entity != rec.Entity || held.Resource != rec.Resource:
		return false, fmt.Errorf("reserve %s for %s/%s: %w", d.opts.Reservation, rec.Entity, rec.Resource, model.ErrReservationConflict)
	}
	d.kinds = d.kinds[:0] // the request is now the record's (resume)
	d.resume(&held)
	return true, nil
}

// Release ends the reservation of resource id, from any process sharing the
// store: its reserved tokens come back, and the rate consumption of its
// acquire stays (it is the lease's Commit). A reservation that does not
// exist (never made, already released, expired, or of another namespace)
// is an error matching ErrLeaseNotFound; events repeat, so a caller
// releasing on an event may treat that as done. Release satisfies
// events.Releaser.
//
// The release appends a reservation.release audit event in the same
// atomic step, with the principal of WithPrincipal and, with WithTrigger,
// the external event it was made on (details how=event, else
// how=released). A principal or trigger out of bounds is a
// *ValidationError, and nothing is released.
func (l *Limiter) Release(ctx context.Context, id string, opts ...WriteOption) error {
	if err := model.ValidateReservationID(id); err != nil {
		return err
	}
	if err := checkWrite(opts); err != nil {
		return err // before anything is read or written
	}
	le, err := l.ResumeLease(ctx, model.ReservationLeaseID(id))
	if errors.Is(err, model.ErrLeaseNotFound) {
		return fmt.Errorf("release %s: no reservation: %w", id, model.ErrLeaseNotFound)
	}
	if err != nil {
		return err
	}
	return le.end(ctx, endCall{release: true, opts: opts})
}

// reserveEvent returns the audit event of reservation rec's grant, with
// the write options of the call's WithAudit: the reservation id, what it
// consumed of each limit (of the entity's bucket: cascade ancestors are
// debited the same amounts), its holder and its expiry, if any.
func (l *Limiter) reserveEvent(d *leaseData, rec *store.LeaseRecord) (model.AuditEvent, error) {
	details := map[string]string{
		"reservation": d.opts.Reservation,
		"consumed":    consumedDetail(&d.req.Buckets[0]),
		"holder":      rec.Holder,
	}
	if rec.Expires > 0 {
		details["expires"] = time.UnixMilli(rec.Expires).UTC().Format(time.RFC3339Nano)
	}
	return l.auditEvent(model.ActionReservationReserve, rec.Entity, rec.Resource, details, d.opts.Audit)
}

// consumedDetail lists the limits b's request names, with their whole
// tokens, sorted: "clusters=1,launches=1".
func consumedDetail(b *store.BucketRequest) string {
	parts := make([]string, 0, len(b.Limits))
	for _, lr := range b.Limits {
		if lr.Check {
			parts = append(parts, lr.Name+"="+strconv.FormatInt(bucket.Tokens(lr.Amount), 10))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// How a reservation ended, in its reservation.release event's details.
const (
	releasedByCall  = "released"    // Limiter.Release
	releasedByEvent = "event"       // Limiter.Release with WithTrigger
	releasedCommit  = "committed"   // the lease's Commit
	releasedUndone  = "rolled_back" // the lease's Rollback
)

// releaseEvent returns the audit event of the ending c of rec, if rec is a
// reservation's (nil otherwise: other durable leases end unaudited, as
// their acquires are).
func (l *Limiter) releaseEvent(rec *store.LeaseRecord, c endCall) (*model.AuditEvent, error) {
	id, ok := model.ReservationOf(rec.ID)
	if !ok {
		return nil, nil
	}
	how := releasedCommit
	switch {
	case c.rollback:
		how = releasedUndone
	case c.release && !model.WriteSettingsOf(c.opts...).Trigger.IsZero():
		how = releasedByEvent
	case c.release:
		how = releasedByCall
	}
	details := map[string]string{"reservation": id, "how": how}
	ev, err := l.auditEvent(model.ActionReservationRelease, rec.Entity, rec.Resource, details, c.opts)
	if err != nil {
		return nil, err
	}
	return &ev, nil
}

// Reservation returns the reservation of resource id, found by the id alone.
// One that does not exist is an error matching ErrLeaseNotFound.
func (a *Admin) Reservation(ctx context.Context, id string) (Reservation, error) {
	if err := model.ValidateReservationID(id); err != nil {
		return Reservation{}, err
	}
	ns, err := a.namespaceID(ctx)
	if err != nil {
		return Reservation{}, err
	}
	return reservationByID(ctx, a.store, ns, id)
}

// reservationByID reads the reservation of resource id in namespace ns.
func reservationByID(ctx context.Context, s store.Store, ns, id string) (Reservation, error) {
	rec, err := s.GetLease(ctx, ns, model.ReservationLeaseID(id))
	if err != nil {
		return Reservation{}, storeErr(ctx, "get reservation", id, err)
	}
	return reservationOf(&rec), nil
}

// Reservations lists the reservations of entity, of one resource if resource
// is not empty, sorted by id: up to limit (1 to store.MaxLeasePage) whose
// ids follow after (""; the start), and the after of the next page ("" when
// there is none).
func (a *Admin) Reservations(ctx context.Context, entity, resource, after string, limit int) ([]Reservation, string, error) {
	if err := checkReservationQuery(entity, resource, after, limit); err != nil {
		return nil, "", err
	}
	ns, err := a.namespaceID(ctx)
	if err != nil {
		return nil, "", err
	}
	q := store.LeaseQuery{Entity: entity, Resource: resource, After: model.ReservationLeaseID(after)}
	return listRecords(ctx, a.store, ns, q, limit, "list reservations", func(rec *store.LeaseRecord) (Reservation, string, bool, bool) {
		if !isReservation(rec.ID) {
			// Records are sorted by id, and the ids with the prefix are
			// together: past them, there are no more.
			return Reservation{}, "", false, rec.ID > model.ReservationPrefix
		}
		r := reservationOf(rec)
		return r, r.ID, true, false
	})
}

// checkReservationQuery checks the arguments of Reservations.
func checkReservationQuery(entity, resource, after string, limit int) error {
	if err := model.ValidateEntityID(entity); err != nil {
		return err
	}
	if resource != "" {
		if err := model.ValidateResource(resource); err != nil {
			return err
		}
	}
	if after != "" {
		if err := model.ValidateReservationID(after); err != nil {
			return model.Invalid("after", after, "not a reservation id")
		}
	}
	if limit < 1 || limit > store.MaxLeasePage {
		return model.Invalid("limit", strconv.Itoa(limit), "must be 1 to "+strconv.Itoa(store.MaxLeasePage))
	}
	return nil
}
