package tollgate

import (
	"context"
	"crypto/rand"
	"io"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/tollgate-rl/tollgate/model"
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
	ns, err := a.namespaceID(ctx)
	if err != nil {
		return nil, err
	}
	evs, err := a.store.ListAudit(ctx, ns, entity, after, limit)
	return evs, storeErr(ctx, "list audit", entity, err)
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
