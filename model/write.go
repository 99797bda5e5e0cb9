package model

import (
	"slices"
	"strconv"
)

// WriteOption configures a call that changes state and records the change
// in the audit log: who made it (WithPrincipal) and, when an external
// event caused it, which (WithTrigger). The options are shared by the
// library (tollgate.Limiter) and the Go client, as AcquireOption is.
type WriteOption func(*WriteSettings)

// WriteSettings is what a call's write options say; WriteSettingsOf reads
// them. The zero value is a call without options.
type WriteSettings struct {
	// Principal is who made the change (WithPrincipal); "": not known.
	Principal string
	// Trigger is the external event the change was made on (WithTrigger);
	// the zero value: none.
	Trigger EventTrigger
	// Expect, if not nil (IfVersion, IfAbsent), is the version the
	// entity or config a change replaces or deletes must have, 0 for
	// none to exist: else the change fails with an error matching
	// ErrPreconditionFailed and writes nothing (optimistic locking).
	Expect *int64
}

// WriteSettingsOf returns what opts say.
func WriteSettingsOf(opts ...WriteOption) WriteSettings {
	var s WriteSettings
	for _, o := range opts {
		o(&s)
	}
	return s
}

// Validate checks the settings' bounds: a principal of at most
// MaxPrincipalLen bytes and the trigger's fields (EventTrigger.Validate).
func (s *WriteSettings) Validate() error {
	if len(s.Principal) > MaxPrincipalLen {
		return Invalid("principal", s.Principal, "longer than "+strconv.Itoa(MaxPrincipalLen)+" bytes")
	}
	if s.Expect != nil && *s.Expect < 0 {
		return Invalid("if_version", strconv.FormatInt(*s.Expect, 10), "must be a version, 1 or more")
	}
	return s.Trigger.Validate()
}

// IfVersion makes a change of an entity or a stored config (an update, a
// put, a delete) conditional on its version (Entity.Version,
// Config.Version) being v: read, change, write back with IfVersion of
// the version read, and a concurrent change is an error matching
// ErrPreconditionFailed instead of lost. Over HTTP it is the If-Match
// header. Other calls ignore it. IfVersion(0) is IfAbsent; a negative v
// is a *ValidationError of the call.
func IfVersion(v int64) WriteOption {
	return func(s *WriteSettings) { s.Expect = &v }
}

// IfAbsent makes a config's put conditional on no config being stored at
// its scope (HTTP If-None-Match: *), as IfVersion makes it conditional on
// the one read: a config stored concurrently is an error matching
// ErrPreconditionFailed instead of overwritten.
func IfAbsent() WriteOption { return IfVersion(0) }

// WithPrincipal records who made a change in its audit event.
func WithPrincipal(principal string) WriteOption {
	return func(s *WriteSettings) { s.Principal = principal }
}

// WithTrigger records, in the change's audit event, the external event it
// was made on: package events releases a reservation with the rule that
// matched an infrastructure event and that event's source, detail-type
// and id.
func WithTrigger(t EventTrigger) WriteOption {
	return func(s *WriteSettings) { s.Trigger = t }
}

// EventTrigger names an external event (an EventBridge event) and the rule
// that acted on it. Every field is optional; the zero value names none.
type EventTrigger struct {
	Rule       string // the rule that matched (events.Rule.Name)
	Source     string // the event's source, e.g. "aws.emr"
	DetailType string // the event's detail-type
	EventID    string // the event's id
}

// MaxTriggerFieldLen bounds each field of an EventTrigger, in bytes: an
// EventBridge source or detail-type is at most 256 characters.
const MaxTriggerFieldLen = 256

// IsZero reports whether t names no event.
func (t EventTrigger) IsZero() bool { return t == EventTrigger{} }

// Validate checks that no field is longer than MaxTriggerFieldLen bytes,
// as a *ValidationError naming the field as the HTTP API does
// (event_rule, event_source, event_detail_type, event_id).
func (t EventTrigger) Validate() error {
	for _, f := range t.fields() {
		if len(f.value) > MaxTriggerFieldLen {
			return Invalid("event_"+f.name, f.value[:64]+"...", "longer than "+strconv.Itoa(MaxTriggerFieldLen)+" bytes")
		}
	}
	return nil
}

// AddDetails adds t's fields that are set to an audit event's details,
// as rule, source, detail_type and event_id.
func (t EventTrigger) AddDetails(details map[string]string) {
	for _, f := range t.fields() {
		if f.value == "" {
			continue
		}
		if f.name == "id" {
			details["event_id"] = f.value
		} else {
			details[f.name] = f.value
		}
	}
}

type triggerField struct{ name, value string }

// fields lists t's fields with their names, the HTTP API's without the
// event_ prefix.
func (t EventTrigger) fields() [4]triggerField {
	return [4]triggerField{{"rule", t.Rule}, {"source", t.Source}, {"detail_type", t.DetailType}, {"id", t.EventID}}
}

// WithAudit applies write options (WithPrincipal) to the audit event of an
// acquire that records one: a reservation (WithReservation) appends a
// reservation.reserve event with its grant. Other acquires record no
// event, and ignore it. The Go client sends the principal as its header,
// which a server with API keys ignores for the key's name.
func WithAudit(opts ...WriteOption) AcquireOption {
	opts = slices.Clip(slices.Clone(opts)) // the caller may reuse its slice; a later append must copy
	return func(s *AcquireSettings) { s.Audit = append(s.Audit, opts...) }
}
