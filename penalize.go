package tollgate

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Penalize empties the named limits of entity and resource until until,
// for every process sharing the store: what to do when a vendor answers
// 429 with its own retry-after, so that no process spends the limit before
// the vendor takes requests again. Acquires before until are denied with a
// RetryAfter of at least until - now; from until the limits refill from
// zero, exactly. A penalty ending earlier than one in place changes
// nothing; penalties combine to the later end. Only the entity's own
// bucket is emptied, not its cascade ancestors'.
//
// The limits are those in effect for entity and resource in the stored
// configuration (Admin.SetLimits); a lease knows the limits it was
// acquired with, explicit ones included (Lease.Penalize). Each named limit
// must be in effect and refill: a concurrency or reserved limit, which time does not
// refill, is a *ValidationError, as are until not after now or more than
// MaxPenalty ahead, and a reason longer than model.MaxReasonLen bytes.
//
// The penalty is recorded in the audit log (model.ActionLimitPenalize)
// with the reason, until and the limits, and the principal given by
// WithPrincipal. The limits come as a slice, not variadic, so that the
// write options can follow.
func (l *Limiter) Penalize(ctx context.Context, entity, resource string, until time.Time, reason string, limits []string, opts ...WriteOption) error {
	if err := model.ValidateEntityID(entity); err != nil {
		return err
	}
	if err := model.ValidateResource(resource); err != nil {
		return err
	}
	now := nanoOf(l.clock.Now())
	ns, err := l.namespaceID(ctx, now)
	if err != nil {
		return err
	}
	var chainBuf [model.MaxCascadeDepth]*model.Entity
	chain, err := l.chain(ctx, ns, entity, now, &chainBuf, nil, nil)
	if err != nil {
		return err
	}
	r, err := l.resolve(ctx, ns, entity, resource, now)
	if err != nil {
		return err
	}
	if !r.found {
		return model.Invalid("limits", entity+"/"+resource, "no limits are configured for entity "+
			strconv.Quote(entity)+" and resource "+strconv.Quote(resource)+" at any level")
	}
	b := store.BucketRequest{Key: store.BucketKey{Entity: entity, Resource: resource}, Entity: chain[0],
		Limits: make([]store.LimitRequest, len(r.limits))}
	for i, p := range r.limits {
		b.Limits[i] = store.LimitRequest{Name: p.limit.Name, Params: p.params}
	}
	return l.penalize(ctx, ns, b, until, reason, limits, opts)
}

// penalize checks a penalty of the limits named among b's (those in
// effect) and applies it with its audit event. b is the caller's to
// change.
func (l *Limiter) penalize(ctx context.Context, ns string, b store.BucketRequest, until time.Time, reason string, names []string, opts []WriteOption) error {
	now := l.clock.Now()
	if err := checkPenalty(now, until, reason, names); err != nil {
		return err
	}
	for i := range b.Limits {
		lr := &b.Limits[i]
		lr.Check, lr.Amount, lr.Observed, lr.Wait = false, 0, bucket.State{}, 0
	}
	for _, name := range names {
		i := b.Find(name)
		switch {
		case i < 0:
			return model.Invalid("limits", name, "no limit named "+strconv.Quote(name)+" applies to entity "+
				strconv.Quote(b.Key.Entity)+" and resource "+strconv.Quote(b.Key.Resource))
		case !b.Limits[i].Params.Refills():
			return model.Invalid("limits", name, "concurrency or reserved limit "+strconv.Quote(name)+
				" cannot be penalized: time does not refill it, so emptying it until a time means nothing")
		}
		b.Limits[i].Check = true
	}
	utc := until.UTC()
	details := map[string]string{
		"until":  utc.Format(time.RFC3339Nano),
		"limits": strings.Join(names, ","),
	}
	if reason != "" {
		details["reason"] = reason
	}
	ev, err := l.auditEvent(model.ActionLimitPenalize, b.Key.Entity, b.Key.Resource, details, opts)
	if err != nil {
		return err
	}
	req := &store.PenaltyRequest{Now: now.UnixMilli(), Until: ceilMilli(until), Bucket: b, Event: &ev}
	err = l.store.Penalize(ctx, ns, req)
	return storeErr(ctx, "penalize", b.Key.Entity+"/"+b.Key.Resource, err)
}

// checkPenalty checks what a penalty's caller passed.
func checkPenalty(now, until time.Time, reason string, names []string) error {
	switch {
	case ceilMilli(until) <= now.UnixMilli():
		return model.Invalid("until", until.UTC().Format(time.RFC3339Nano), "must be after now ("+now.UTC().Format(time.RFC3339Nano)+")")
	case until.Sub(now) > MaxPenalty:
		return model.Invalid("until", until.UTC().Format(time.RFC3339Nano), "must be at most "+MaxPenalty.String()+" ahead")
	case len(reason) > model.MaxReasonLen:
		return model.Invalid("reason", reason[:64]+"...", "longer than "+strconv.Itoa(model.MaxReasonLen)+" bytes")
	case len(names) == 0:
		return model.Invalid("limits", "", "name at least one limit to penalize")
	}
	return nil
}

// ceilMilli returns t in Unix milliseconds, rounded up: a penalty lasts at
// least until t, never a fraction of a millisecond less.
func ceilMilli(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Sub(time.UnixMilli(ms)) > 0 {
		ms++
	}
	return ms
}

// Penalize empties limits of the lease's entity and resource until until,
// for every process sharing the store, as Limiter.Penalize does; the limits
// named are looked up among those the lease was acquired with (WithLimits
// or stored). Call it before ending the lease.
func (le *Lease) Penalize(ctx context.Context, until time.Time, reason string, limits []string, opts ...WriteOption) error {
	d, ok := le.open()
	if !ok {
		return model.ErrLeaseClosed
	}
	if len(d.req.Buckets) == 0 { // degraded: the lease knows no limits
		d.mu.Unlock()
		return d.lim.Penalize(ctx, le.key.ent.ID, le.key.resource, until, reason, limits, opts...)
	}
	// A copy, so that the store is not called under the lease's lock.
	b := d.req.Buckets[0]
	b.Limits = append([]store.LimitRequest(nil), b.Limits...)
	ns := d.ns
	d.mu.Unlock()
	return d.lim.penalize(ctx, ns, b, until, reason, limits, opts)
}
