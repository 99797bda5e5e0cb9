package model

import (
	"slices"
	"strings"
	"time"
)

// An Entity is something limits apply to: an API key, a project, an
// organisation. Entities form a tree through ParentID.
type Entity struct {
	ID   string
	Name string // display name, optional
	// ParentID names the parent entity, which must exist; empty for a root.
	ParentID string
	// Cascade makes every acquire of this entity also debit its parent's
	// buckets for the same resource, atomically, following the chain while
	// each link cascades (up to MaxCascadeDepth entities in all).
	Cascade   bool
	Metadata  map[string]string
	CreatedAt time.Time
	// Version counts the entity's changes: 1 when created, one more at
	// each update. A store sets it; a write ignores it (the condition on
	// it is the write option IfVersion). An entity stored before versions
	// were kept reads as 1.
	Version int64
}

// MaxCascadeDepth is the most entities one acquire debits: the entity and up
// to three ancestors (key -> project -> org -> account).
const MaxCascadeDepth = 4

// Validate checks the identifiers and bounds of e.
func (e Entity) Validate() error {
	if err := ValidateEntityID(e.ID); err != nil {
		return err
	}
	if e.ParentID != "" {
		if err := ValidateEntityID(e.ParentID); err != nil {
			err.(*ValidationError).Field = "parent_id"
			return err
		}
		if e.ParentID == e.ID {
			return invalid("parent_id", e.ParentID, "an entity cannot be its own parent")
		}
	}
	if e.Cascade && e.ParentID == "" {
		return invalid("cascade", "true", "cascade needs a parent")
	}
	if len(e.Name) > MaxDisplayNameLen {
		return invalid("name", e.Name, "longer than "+itoa(MaxDisplayNameLen)+" bytes")
	}
	if len(e.Metadata) > MaxMetadataEntries {
		return invalid("metadata", itoa(len(e.Metadata))+" entries", "at most "+itoa(MaxMetadataEntries)+" entries")
	}
	for k, v := range e.Metadata {
		switch {
		case k == "" || len(k) > MaxMetadataKeyLen:
			return invalid("metadata", k, "keys must be 1 to "+itoa(MaxMetadataKeyLen)+" bytes")
		case len(v) > MaxMetadataValLen:
			return invalid("metadata."+truncate(k), v, "longer than "+itoa(MaxMetadataValLen)+" bytes")
		}
	}
	return nil
}

// OnUnavailable says what an acquire does when the store cannot answer.
type OnUnavailable string

const (
	// Block returns an *UnavailableError (fail closed). The default.
	Block OnUnavailable = "block"
	// Allow grants a degraded lease that consumed nothing (fail open).
	Allow OnUnavailable = "allow"
)

// Validate accepts "", Block and Allow.
func (m OnUnavailable) Validate() error {
	if m != "" && m != Block && m != Allow {
		return invalid("on_unavailable", string(m), `must be "block" or "allow"`)
	}
	return nil
}

// Config is the limits stored at one level (system, resource, entity default
// or entity+resource).
type Config struct {
	Limits []Limit
	// Shadow names limits of Limits that are enforced in shadow: evaluated
	// and debited like the others, they never deny; a status says when one
	// would have (docs/semantics.md, "Shadow limits"). It is how a new
	// limit is rolled out: shadow, watch, enforce.
	Shadow []string
	// AlertAt are the fractions of a limit's capacity (each in (0, 1],
	// ascending, at most MaxAlertAt) at which an entity's use of any limit
	// of Limits raises an alert, once per upward crossing
	// (docs/operations.md, "Alerts").
	AlertAt []float64
	// OnUnavailable is meaningful at the system level only.
	OnUnavailable OnUnavailable
	// Version counts the puts of the config at its scope: 1 when stored
	// where none was (also after a delete), one more at each put that
	// replaces it. A store sets it; a put ignores it (the condition on it
	// is the write option IfVersion). A config stored before versions
	// were kept reads as 1.
	Version int64
}

// Clone returns a copy of c that shares no slice with it.
func (c Config) Clone() Config {
	c.Limits = slices.Clone(c.Limits)
	c.Shadow = slices.Clone(c.Shadow)
	c.AlertAt = slices.Clone(c.AlertAt)
	return c
}

// InShadow reports whether c enforces its limit name in shadow.
func (c Config) InShadow(name string) bool { return slices.Contains(c.Shadow, name) }

// Scope names the level a Config is stored at.
//
//	Scope{}                                  system
//	Scope{Resource: "gpt-4o"}                resource
//	Scope{Entity: "org-1"}                   entity default (all resources)
//	Scope{Entity: "org-1", Resource: "gpt-4o"} entity+resource
type Scope struct {
	Entity   string
	Resource string
}

// SystemScope is the scope of the system-wide defaults.
func SystemScope() Scope { return Scope{} }

// ResourceScope is the scope of a resource's defaults.
func ResourceScope(resource string) Scope { return Scope{Resource: resource} }

// EntityScope is the scope of an entity's limits for resource, or for every
// resource when resource is empty (the entity default).
func EntityScope(entity, resource string) Scope {
	if resource == "" {
		resource = DefaultResource
	}
	return Scope{Entity: entity, Resource: resource}
}

// Level names the scope: "system", "resource", "entity-default" or "entity".
func (s Scope) Level() string {
	switch {
	case s.Entity == "" && s.Resource == "":
		return "system"
	case s.Entity == "":
		return "resource"
	case s.Resource == DefaultResource:
		return "entity-default"
	}
	return "entity"
}

// CompareScopes orders scopes by entity, then resource (byte order): the
// system scope first, then resource scopes by resource, then each entity's
// scopes. It returns -1, 0 or +1. Config listings are in this order.
func CompareScopes(a, b Scope) int {
	if c := strings.Compare(a.Entity, b.Entity); c != 0 {
		return c
	}
	return strings.Compare(a.Resource, b.Resource)
}

// ScopedConfig is a Config with the scope it is stored at.
type ScopedConfig struct {
	Scope  Scope
	Config Config
}

// Validate checks the identifiers in s.
func (s Scope) Validate() error {
	if s.Entity != "" {
		if err := ValidateEntityID(s.Entity); err != nil {
			return err
		}
		if s.Resource == "" {
			return invalid("resource", "", "an entity scope needs a resource or "+DefaultResource)
		}
		if s.Resource == DefaultResource {
			return nil
		}
	}
	if s.Resource != "" {
		return ValidateResource(s.Resource)
	}
	return nil
}

// Validate checks the limits and the mode of c for scope s.
func (c Config) Validate(s Scope) error {
	if err := ValidateLimits(c.Limits); err != nil {
		return err
	}
	for i, name := range c.Shadow {
		if !slices.ContainsFunc(c.Limits, func(l Limit) bool { return l.Name == name }) {
			return invalid("shadow", name, "names no limit of this configuration")
		}
		if slices.Contains(c.Shadow[:i], name) {
			return invalid("shadow", name, "is listed twice")
		}
	}
	if err := ValidateAlertAt(c.AlertAt); err != nil {
		return err
	}
	if err := c.OnUnavailable.Validate(); err != nil {
		return err
	}
	if c.OnUnavailable != "" && s.Level() != "system" {
		return invalid("on_unavailable", string(c.OnUnavailable), "can be set at the system level only")
	}
	return nil
}

// AuditEvent records one change of configuration or entities.
type AuditEvent struct {
	// ID sorts in time order (a ULID).
	ID        string
	Time      time.Time
	Action    string // e.g. "entity.create", "config.set", "config.delete"
	Entity    string // empty for system and resource configuration
	Resource  string
	Principal string // who made the change, if the caller said
	Details   map[string]string
}

// Audit actions.
const (
	ActionEntityCreate = "entity.create"
	ActionEntityDelete = "entity.delete"
	// ActionEntityUpdate records a change of an entity's name, parent,
	// cascade flag or metadata.
	ActionEntityUpdate = "entity.update"
	ActionConfigSet    = "config.set"
	ActionConfigDelete = "config.delete"
	// ActionLeaseExpired records a lease the reconciler ended because its
	// holder did not end it before its expiry.
	ActionLeaseExpired = "lease.expired"
	// ActionLimitPenalize records limits emptied until a time (a vendor's
	// 429 with its own retry-after): who, why, until when, which limits.
	ActionLimitPenalize = "limit.penalize"
	// ActionLimitReset records limits refilled by an operator (a penalty
	// lifted, a mistake undone): who, why, which limits.
	ActionLimitReset = "limit.reset"
	// ActionReservationReserve records a reservation made: its id, what
	// it took, and who holds it.
	ActionReservationReserve = "reservation.reserve"
	// ActionReservationRelease records a reservation released, by its
	// holder or by an external event (the details say which).
	ActionReservationRelease = "reservation.release"
	// ActionKeyCreate and ActionKeyRevoke record changes of the stored
	// API keys (never the secret, nor its hash).
	ActionKeyCreate = "key.create"
	ActionKeyRevoke = "key.revoke"
)

// Page bounds of the listings.
const (
	// MaxEntityPage is the most entities one listing returns.
	MaxEntityPage = 1000
	// MaxAuditPage is the most audit events one listing returns.
	MaxAuditPage = 1000
)
