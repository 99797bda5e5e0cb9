package tollgate

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Who made a change and why, recorded in its audit event.

// WriteOption configures a call that changes state, for its audit event.
// The options are model's, shared with the Go client.
type WriteOption = model.WriteOption

// EventTrigger names the external event (and the rule that acted on it) a
// change was made on; see WithTrigger.
type EventTrigger = model.EventTrigger

// WithPrincipal records who made a change in its audit event.
func WithPrincipal(principal string) WriteOption { return model.WithPrincipal(principal) }

// WithTrigger records, in the change's audit event, the external event it
// was made on (package events releases reservations with it).
func WithTrigger(t EventTrigger) WriteOption { return model.WithTrigger(t) }

// IfVersion makes a change of an entity or a stored config (UpdateEntity,
// DeleteEntity, SetLimits, DeleteLimits) conditional on its version
// (Entity.Version, Config.Version) being v, the one read: a change made
// since in between is an error matching ErrPreconditionFailed instead of
// lost, and nothing is written (optimistic locking; HTTP If-Match).
// IfVersion(0) is IfAbsent.
func IfVersion(v int64) WriteOption { return model.IfVersion(v) }

// IfAbsent makes SetLimits conditional on no config being stored at its
// scope (HTTP If-None-Match: *): one stored since it was found missing
// is an error matching ErrPreconditionFailed instead of overwritten.
func IfAbsent() WriteOption { return model.IfAbsent() }

// WithAudit applies write options (WithPrincipal) to the audit event of a
// reservation (WithReservation), which its grant appends; other acquires
// record no event and ignore it.
func WithAudit(opts ...WriteOption) AcquireOption { return model.WithAudit(opts...) }

// checkWrite checks what write options say (principal, trigger), for a
// call that checks its input before it reads or writes anything.
func checkWrite(opts []WriteOption) error {
	o := model.WriteSettingsOf(opts...)
	return o.Validate()
}

// auditEvent returns the event of a change, with the principal and the
// trigger's details of opts; details is the caller's to give away.
func (a *Admin) auditEvent(action, entity, resource string, details map[string]string, opts []WriteOption) (model.AuditEvent, error) {
	return newAuditEvent(&a.changes.eventIDs, a.clock.Now(), action, entity, resource, details, opts)
}

// auditEvent is Admin.auditEvent, for the changes a limiter makes
// (releases, reservations, penalties).
func (l *Limiter) auditEvent(action, entity, resource string, details map[string]string, opts []WriteOption) (model.AuditEvent, error) {
	return newAuditEvent(&l.changes.eventIDs, l.clock.Now(), action, entity, resource, details, opts)
}

// newAuditEvent returns the event of a change at now, its id from ids
// and its principal from opts.
func newAuditEvent(ids *eventIDs, now time.Time, action, entity, resource string, details map[string]string, opts []WriteOption) (model.AuditEvent, error) {
	o := model.WriteSettingsOf(opts...)
	if err := o.Validate(); err != nil {
		return model.AuditEvent{}, err
	}
	if !o.Trigger.IsZero() {
		if details == nil {
			details = make(map[string]string, 4)
		}
		o.Trigger.AddDetails(details)
	}
	now = now.UTC().Truncate(time.Millisecond)
	return model.AuditEvent{
		ID: ids.next(now), Time: now, Action: action, Entity: entity, Resource: resource,
		Principal: o.Principal, Details: details,
	}, nil
}

// AuditEvents returns up to limit (at most MaxAuditPage; 0 means 100) audit
// events of entity, oldest first, with ids after the cursor after (empty for
// the first page; pass the last id seen for the next). The empty entity lists
// system and resource configuration changes.
func (a *Admin) AuditEvents(ctx context.Context, entity, after string, limit int) ([]AuditEvent, error) {
	if entity != "" {
		if err := model.ValidateEntityID(entity); err != nil {
			return nil, err
		}
	}
	limit, err := pageSize(limit, MaxAuditPage)
	if err != nil {
		return nil, err
	}
	ns, err := a.namespace(ctx)
	if err != nil {
		return nil, err
	}
	if ns.err != nil {
		return nil, ns.err
	}
	// Events older than the retention are hidden, swept or not: ids sort
	// by time, so they are the ids up to the cutoff's.
	if cut := a.auditCutoff(ns); !cut.IsZero() {
		after = max(after, store.AuditIDBefore(cut))
	}
	evs, err := a.store.ListAudit(ctx, ns.id, entity, after, limit)
	return evs, storeErr(ctx, "list audit", entity, err)
}

// auditCutoff is the time before which the namespace's events are past
// its retention, or zero if it keeps them forever.
func (a *Admin) auditCutoff(ns *nsEntry) time.Time {
	if ns.retention <= 0 {
		return time.Time{}
	}
	return a.clock.Now().Add(-ns.retention)
}

// errAuditLogUnsupported is AuditLog's error over a store that does not
// implement store.AuditLog (every backend of the module does; a wrapper
// may not forward it).
var errAuditLogUnsupported = errors.New("tollgate: this store cannot list its audit log by time")

// AuditLog returns a page of the namespace's whole audit log (every
// entity's events and the system's) in time order, for export: up to
// q.Limit events (0 means 100) from q.Since (inclusive) to q.Until
// (exclusive) with ids after the cursor q.After. Pass the last id of a
// page as the next page's After; an empty page is the end. Events older
// than the namespace's AuditRetention are not listed, swept or not. A
// store whose indexes are eventually consistent (DynamoDB) may miss an
// event written a moment ago: an export ends a little in the past.
func (a *Admin) AuditLog(ctx context.Context, q model.AuditQuery) ([]AuditEvent, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	limit, err := pageSize(q.Limit, MaxAuditPage)
	if err != nil {
		return nil, err
	}
	log, ok := a.store.(store.AuditLog)
	if !ok {
		return nil, errAuditLogUnsupported
	}
	ns, err := a.namespace(ctx)
	if err != nil {
		return nil, err
	}
	if ns.err != nil {
		return nil, ns.err
	}
	r := store.AuditRange{Since: q.Since, Until: q.Until, After: q.After, Limit: limit}
	if cut := a.auditCutoff(ns); !cut.IsZero() && cut.After(r.Since) {
		r.Since = cut
		if !r.Until.IsZero() && r.Until.UnixMilli() <= r.Since.UnixMilli() {
			return nil, nil // the whole range is past the retention
		}
	}
	evs, err := log.ListAuditRange(ctx, ns.id, r)
	return evs, storeErr(ctx, "list audit log", "", err)
}

// eventIDs makes the sortable ids (ULIDs) of audit events. The zero value
// is ready for use.
type eventIDs struct {
	mu      sync.Mutex
	entropy io.Reader
}

// next returns a new id for an event at t, greater than the previous one
// of the same millisecond.
func (e *eventIDs) next(t time.Time) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.entropy == nil {
		e.entropy = ulid.Monotonic(rand.Reader, 0)
	}
	id, err := ulid.New(ulid.Timestamp(t), e.entropy)
	if err != nil {
		// The monotonic entropy ran out within one millisecond (2^80 ids);
		// fall back to fresh randomness, which still sorts by time.
		id = ulid.MustNew(ulid.Timestamp(t), rand.Reader)
	}
	return id.String()
}
