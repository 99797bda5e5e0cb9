package model

import (
	"context"
	"time"
)

// Administrator is the control plane, as Acquirer is the data plane: what
// an operator or a tool calls to change what limits act on and to read
// what they did, in one namespace. A tollgate.Admin (over a store, in this
// process) and a client.Client (through a tollgate serve) satisfy it
// alike: the same names, arguments, write options and typed errors, so
// code written against it runs on either.
//
// Write options (WithPrincipal, WithTrigger) name who made a change and
// why, in its audit event. A server with API keys records the key's name
// as the principal, whatever the call says.
type Administrator interface {
	// Entities: the tree limits apply to.
	CreateEntity(ctx context.Context, e Entity, opts ...WriteOption) (Entity, error)
	GetEntity(ctx context.Context, id string) (Entity, error)
	UpdateEntity(ctx context.Context, e Entity, opts ...WriteOption) (Entity, error)
	DeleteEntity(ctx context.Context, id string, opts ...WriteOption) error
	Children(ctx context.Context, id string) ([]Entity, error)
	ListEntities(ctx context.Context, after string, limit int) ([]Entity, error)

	// Stored limits, at the system, resource and entity scopes.
	SetLimits(ctx context.Context, scope Scope, cfg Config, opts ...WriteOption) error
	GetLimits(ctx context.Context, scope Scope) (Config, error)
	DeleteLimits(ctx context.Context, scope Scope, opts ...WriteOption) error
	ListLimits(ctx context.Context, after *Scope, limit int) ([]ScopedConfig, error)

	// API keys of the namespace: CreateKey returns the secret, once.
	CreateKey(ctx context.Context, spec KeySpec, opts ...WriteOption) (secret string, k Key, err error)
	Keys(ctx context.Context, after string, limit int) ([]Key, error)
	RevokeKey(ctx context.Context, name string, opts ...WriteOption) error

	// Namespaces, by name: not bound to the one the others work in.
	RegisterNamespace(ctx context.Context, name string) (Namespace, error)
	GetNamespace(ctx context.Context, name string) (Namespace, error)
	ListNamespaces(ctx context.Context) ([]Namespace, error)
	DeleteNamespace(ctx context.Context, name string) error
	RecoverNamespace(ctx context.Context, name string) error
	PurgeNamespace(ctx context.Context, name string, progress func(deleted int)) error
	// SetAuditRetention sets how long a namespace keeps its audit events
	// (0: forever; else ValidateAuditRetention).
	SetAuditRetention(ctx context.Context, name string, d time.Duration) error

	// What limits did and hold.
	AuditEvents(ctx context.Context, entity, after string, limit int) ([]AuditEvent, error)
	// AuditLog lists the namespace's whole audit log by time, for export.
	AuditLog(ctx context.Context, q AuditQuery) ([]AuditEvent, error)
	Usage(ctx context.Context, q UsageQuery) (usage []Usage, next string, err error)
	UsageSummary(ctx context.Context, q UsageQuery) (UsageSummary, error)
	Capacity(ctx context.Context, resource string) (ResourceCapacity, error)
	Leases(ctx context.Context, entity, resource, after string, limit int) ([]LeaseInfo, string, error)
	Reservation(ctx context.Context, id string) (Reservation, error)
	Reservations(ctx context.Context, entity, resource, after string, limit int) ([]Reservation, string, error)

	// Reset refills limits of a bucket: an operator's undo of penalties,
	// debt and consumption.
	Reset(ctx context.Context, entity, resource, reason string, limits []string, opts ...WriteOption) error
}
