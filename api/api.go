// Package api defines the wire format of Tollgate's HTTP/JSON API (version
// 1): the request and response bodies, the error codes, and conversions
// between them and the library's types. The server (package server) and
// the Go client (package client) share it, so both sides agree by
// construction; docs/http-api.md describes the endpoints.
//
// Token amounts are whole tokens; durations are milliseconds.
package api

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-rl/tollgate/model"
)

// Version is the path prefix of every endpoint.
const Version = "/v1"

// NamespaceHeader names the namespace of a request; absent means "default"
// (or, with an API key bound to a namespace, the key's).
const NamespaceHeader = "X-Tollgate-Namespace"

// IdempotencyKeyHeader carries an acquire's idempotency key: the same key
// within the lease's memory answers the first grant again, debiting once
// (model.WithIdempotencyKey).
const IdempotencyKeyHeader = "Idempotency-Key"

// ReplayedHeader is set ("true") on the answer to an acquire that replays
// an earlier grant of the same idempotency key.
const ReplayedHeader = "Idempotent-Replayed"

// PrincipalHeader names who makes a change, for the audit log, when the
// server has no API keys (with keys, the key's name is the principal).
const PrincipalHeader = "X-Tollgate-Principal"

// Limits on what the server accepts.
const (
	// MaxBodyBytes bounds every request body.
	MaxBodyBytes = 64 << 10
	// MaxLimits bounds the limits of one request or config.
	MaxLimits = 32
)

// Error codes: the stable "error" field of every error body.
const (
	CodeInvalidArgument  = "invalid_argument"   // 400
	CodeUnauthenticated  = "unauthenticated"    // 401
	CodePermissionDenied = "permission_denied"  // 403
	CodeNotFound         = "not_found"          // 404
	CodeMethodNotAllowed = "method_not_allowed" // 405
	CodeConflict         = "conflict"           // 409
	CodeRateLimited      = "rate_limited"       // 429
	CodeUnavailable      = "unavailable"        // 503
	CodeInternal         = "internal"           // 500
	CodeUnimplemented    = "unimplemented"      // 501
)

// AcquireRequest is the body of POST /v1/acquire.
type AcquireRequest struct {
	Entity   string           `json:"entity"`
	Resource string           `json:"resource,omitempty"`
	Consume  map[string]int64 `json:"consume"`
	// Limits, in the limit syntax ("rpm:100/min"), replace the stored ones.
	Limits []string `json:"limits,omitempty"`
	// Commit acquires and commits in one call; no lease is kept.
	Commit bool `json:"commit,omitempty"`
	// LeaseTTLMS is how long the lease's record lives in the store unless
	// extended (default 5 min); once it has passed, the lease answers
	// lease_not_found and a reconciler commits it as it stands.
	LeaseTTLMS int64 `json:"lease_ttl_ms,omitempty"`
	// OnUnavailable overrides the stored mode: "block" or "allow".
	OnUnavailable string `json:"on_unavailable,omitempty"`
}

// AcquireResponse is the body of a granted acquire.
type AcquireResponse struct {
	LeaseID  string           `json:"lease_id,omitempty"`
	Consumed map[string]int64 `json:"consumed"`
	Limits   []LimitStatus    `json:"limits"`
	// Degraded is set when the store could not answer and mode "allow"
	// granted without counting.
	Degraded  bool  `json:"degraded,omitempty"`
	ExpiresMS int64 `json:"expires_at_ms,omitempty"` // Unix ms; 0 when committed
}

// AdjustRequest is the body of POST /v1/leases/{id}/adjust.
type AdjustRequest struct {
	Consume map[string]int64 `json:"consume"`
}

// ExtendRequest is the body of POST /v1/leases/{id}/extend.
type ExtendRequest struct {
	// TTLMS moves the lease's expiry to now + TTLMS, bounded as
	// AcquireRequest.LeaseTTLMS is (0 or absent: the server's default).
	TTLMS int64 `json:"ttl_ms,omitempty"`
}

// LeaseResponse answers the lease routes: GET, adjust, extend, commit and
// rollback.
type LeaseResponse struct {
	LeaseID  string           `json:"lease_id"`
	Consumed map[string]int64 `json:"consumed"`
	State    string           `json:"state"` // "open", "committed" or "rolled_back"
	// Entity and Resource are the lease's, when the server knows them
	// (every lease but a degraded one).
	Entity   string `json:"entity,omitempty"`
	Resource string `json:"resource,omitempty"`
	// ExpiresMS is when an open lease expires (Unix ms); absent once it
	// has ended, and for a degraded lease, which never expires.
	ExpiresMS int64 `json:"expires_at_ms,omitempty"`
}

// AvailableResponse answers GET /v1/available.
type AvailableResponse struct {
	Limits []LimitStatus `json:"limits"`
	// RetryAfterMS, when the request named what it would consume
	// (?consume=rpm:1), is how long before an acquire of it could succeed
	// (0: it could now), exact however long: Limiter.TimeUntilAvailable.
	RetryAfterMS *int64 `json:"retry_after_ms,omitempty"`
	// Waits says what that acquire's refusal would wait for, as the
	// error body's waits does; absent when it could succeed now or waits
	// for refill.
	Waits string `json:"waits,omitempty"`
}

// Entity is an entity on the wire.
type Entity struct {
	ID          string            `json:"id"`
	Name        string            `json:"name,omitempty"`
	ParentID    string            `json:"parent_id,omitempty"`
	Cascade     bool              `json:"cascade,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	CreatedAtMS int64             `json:"created_at_ms,omitempty"`
	// Version counts the entity's changes (model.Entity.Version); the
	// server ignores it in a request (If-Match is the condition on it).
	Version int64 `json:"version,omitempty"`
}

// EntitiesResponse answers GET /v1/entities and GET
// /v1/entities/{id}/children.
type EntitiesResponse struct {
	Entities []Entity `json:"entities"`
	// Next is set by GET /v1/entities when the page is full: the after of
	// the following page.
	Next string `json:"next,omitempty"`
}

// EntityPatch is the body of PATCH /v1/entities/{id}: the fields present
// replace the entity's, those absent keep their values (the server refuses
// null, as it does in every body). An
// empty parent_id removes the parent and, unless cascade is given, the
// cascade flag with it; an empty metadata object removes the metadata.
type EntityPatch struct {
	Name     *string            `json:"name,omitempty"`
	ParentID *string            `json:"parent_id,omitempty"`
	Cascade  *bool              `json:"cascade,omitempty"`
	Metadata *map[string]string `json:"metadata,omitempty"`
}

// PatchOf is the patch that gives an entity every field of e: what a
// client sends to replace an entity whole.
func PatchOf(e model.Entity) EntityPatch {
	md := e.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return EntityPatch{Name: &e.Name, ParentID: &e.ParentID, Cascade: &e.Cascade, Metadata: &md}
}

// Apply returns e with the patch's fields.
func (p EntityPatch) Apply(e model.Entity) model.Entity {
	if p.Name != nil {
		e.Name = *p.Name
	}
	if p.ParentID != nil {
		e.ParentID = *p.ParentID
		if e.ParentID == "" {
			e.Cascade = false
		}
	}
	if p.Cascade != nil {
		e.Cascade = *p.Cascade
	}
	if p.Metadata != nil {
		e.Metadata = *p.Metadata
	}
	return e
}

// Limits is the body of PUT and GET /v1/limits/...
type Limits struct {
	Limits []string `json:"limits"`
	// Shadow names the limits of Limits enforced in shadow: debited, never
	// denying (model.Config.Shadow).
	Shadow []string `json:"shadow,omitempty"`
	// AlertAt are the fractions of capacity (ascending, each in (0, 1])
	// whose upward crossing by an entity's use of a limit raises an alert
	// (model.Config.AlertAt).
	AlertAt []float64 `json:"alert_at,omitempty"`
	// OnUnavailable ("block" or "allow") is meaningful at system level only.
	OnUnavailable string `json:"on_unavailable,omitempty"`
	// Version counts the puts of the config (model.Config.Version); the
	// server ignores it in a request (If-Match is the condition on it).
	Version int64 `json:"version,omitempty"`
}

// AuditEvent is an audit event on the wire.
type AuditEvent struct {
	ID        string            `json:"id"`
	TimeMS    int64             `json:"time_ms"`
	Action    string            `json:"action"`
	Entity    string            `json:"entity,omitempty"`
	Resource  string            `json:"resource,omitempty"`
	Principal string            `json:"principal,omitempty"`
	Details   map[string]string `json:"details,omitempty"`
}

// AuditResponse answers GET /v1/audit. Next, when set, is the "after"
// parameter of the following page.
type AuditResponse struct {
	Events []AuditEvent `json:"events"`
	Next   string       `json:"next,omitempty"`
}

// Namespace is a namespace on the wire.
type Namespace struct {
	Name        string `json:"name"`
	ID          string `json:"id,omitempty"`
	CreatedAtMS int64  `json:"created_at_ms,omitempty"`
	DeletedAtMS int64  `json:"deleted_at_ms,omitempty"` // set while soft-deleted
	// AuditRetentionS is how long its audit events are kept, in seconds
	// (absent: forever).
	AuditRetentionS int64 `json:"audit_retention_s,omitempty"`
}

// AuditRetention is the body of PUT /v1/namespaces/{name}/audit-retention:
// seconds, 0 for forever.
type AuditRetention struct {
	AuditRetentionS int64 `json:"audit_retention_s"`
}

// NamespacesResponse answers GET /v1/namespaces.
type NamespacesResponse struct {
	Namespaces []Namespace `json:"namespaces"`
}

// PurgeResponse answers POST /v1/namespaces/{name}/purge.
type PurgeResponse struct {
	Deleted int `json:"deleted"`
}

// Error is the body of every error response.
type Error struct {
	Code    string `json:"error"`
	Message string `json:"message"`
	// Field, Value and Reason detail an invalid_argument; Reason also
	// names the kind of a not_found, conflict or unavailable.
	Field  string `json:"field,omitempty"`
	Value  string `json:"value,omitempty"`
	Reason string `json:"reason,omitempty"`
	// RetryAfterMS, Waits and Limits detail a rate_limited. RetryAfterMS
	// is exact however long, and absent when only reserved limits deny,
	// waiting for a release; Waits is what the primary violation waits
	// for ("expiry" or "release" for a concurrency or reserved limit,
	// absent for refill).
	RetryAfterMS int64         `json:"retry_after_ms,omitempty"`
	Waits        string        `json:"waits,omitempty"`
	Limits       []LimitStatus `json:"limits,omitempty"`
	// Ended details a conflict of reason lease_closed: how the lease
	// ended ("committed", "rolled_back" or "expired"), when known.
	Ended string `json:"ended,omitempty"`
}

// FromEntity converts an entity.
func FromEntity(e model.Entity) Entity {
	return Entity{ID: e.ID, Name: e.Name, ParentID: e.ParentID, Cascade: e.Cascade, Metadata: e.Metadata, CreatedAtMS: model.UnixMilli(e.CreatedAt), Version: e.Version}
}

// ToEntity converts an entity back.
func ToEntity(e Entity) model.Entity {
	return model.Entity{ID: e.ID, Name: e.Name, ParentID: e.ParentID, Cascade: e.Cascade, Metadata: e.Metadata, CreatedAt: model.FromUnixMilli(e.CreatedAtMS), Version: e.Version}
}

// FromConfig converts a config.
func FromConfig(c model.Config) Limits {
	out := Limits{Limits: make([]string, len(c.Limits)), Shadow: c.Shadow, AlertAt: c.AlertAt, OnUnavailable: string(c.OnUnavailable), Version: c.Version}
	for i, l := range c.Limits {
		out.Limits[i] = l.String()
	}
	return out
}

// ToConfig parses a config body; errors are *model.ValidationError.
func ToConfig(b Limits) (model.Config, error) {
	if len(b.Limits) > MaxLimits {
		return model.Config{}, model.Invalid("limits", "", "more than 32 limits")
	}
	ls, err := model.ParseLimits(b.Limits)
	if err != nil {
		return model.Config{}, err
	}
	if len(b.Shadow) > len(ls) {
		return model.Config{}, model.Invalid("shadow", "", "names more limits than the configuration has")
	}
	if len(b.AlertAt) > model.MaxAlertAt {
		return model.Config{}, model.ValidateAlertAt(b.AlertAt)
	}
	return model.Config{Limits: ls, Shadow: b.Shadow, AlertAt: b.AlertAt, OnUnavailable: model.OnUnavailable(b.OnUnavailable), Version: b.Version}, nil
}

// FromAuditEvent converts an audit event.
func FromAuditEvent(e model.AuditEvent) AuditEvent {
	return AuditEvent{ID: e.ID, TimeMS: model.UnixMilli(e.Time), Action: e.Action, Entity: e.Entity, Resource: e.Resource, Principal: e.Principal, Details: e.Details}
}

// ToAuditEvent converts an audit event back.
func ToAuditEvent(e AuditEvent) model.AuditEvent {
	return model.AuditEvent{ID: e.ID, Time: model.FromUnixMilli(e.TimeMS), Action: e.Action, Entity: e.Entity, Resource: e.Resource, Principal: e.Principal, Details: e.Details}
}

// FromNamespace converts a namespace.
func FromNamespace(n model.Namespace) Namespace {
	return Namespace{Name: n.Name, ID: n.ID, CreatedAtMS: model.UnixMilli(n.CreatedAt), DeletedAtMS: model.UnixMilli(n.DeletedAt),
		AuditRetentionS: int64(n.AuditRetention / time.Second)}
}

// ToNamespace converts a namespace back.
func ToNamespace(n Namespace) model.Namespace {
	return model.Namespace{Name: n.Name, ID: n.ID, CreatedAt: model.FromUnixMilli(n.CreatedAtMS), DeletedAt: model.FromUnixMilli(n.DeletedAtMS),
		AuditRetention: time.Duration(n.AuditRetentionS) * time.Second}
}

// Sentinel errors of the API that the library has no equivalent for.
var (
	// ErrUnauthenticated: no or an unknown API key.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrPermissionDenied: the key's role, namespace or scope does not
	// allow it. Every *PermissionError matches it.
	ErrPermissionDenied = errors.New("permission denied")
	// ErrLeaseNotFound: no such lease in the request's namespace: never
	// granted, ended (committed, rolled back, or reclaimed after its
	// expiry), expired, or of another namespace. It is the library's
	// model.ErrLeaseNotFound (model.ErrLeaseNotFound), so that a lease
	// ended elsewhere reads the same through the library and the server.
	ErrLeaseNotFound = model.ErrLeaseNotFound
	// ErrConflict: the request conflicts with the current state.
	ErrConflict = errors.New("conflict")
	// ErrTooManyLeases: the namespace has as many open leases as the
	// server allows; commit or roll back some, or acquire with commit. It
	// matches model.ErrUnavailable, so fail-open callers treat it alike.
	//
	// Deprecated: servers hold no leases any more (they live in the store)
	// and no longer answer it; it stays so that clients of older servers
	// still read the answer.
	ErrTooManyLeases = fmt.Errorf("%w: too many open leases in namespace", model.ErrUnavailable)
	// ErrNoRoute: no endpoint has this path.
	ErrNoRoute = errors.New("no such endpoint")
	// ErrMethodNotAllowed: the path is served, with other methods (the
	// answer's Allow header lists them).
	ErrMethodNotAllowed = errors.New("method not allowed")
	// ErrBackupUnsupported: the server's store takes no backup through it
	// (GET /v1/backup serves the embedded store's file only).
	ErrBackupUnsupported = errors.New("the server's store takes no backup through it: only an embedded store's file is served")
)

// BackupPath serves a consistent copy of an embedded store's file.
const BackupPath = Version + "/backup"

// Usage is one usage snapshot on the wire (GET /v1/usage).
type Usage struct {
	Entity   string           `json:"entity"`
	Resource string           `json:"resource"`
	Window   string           `json:"window"` // "hour" or "day"
	StartMS  int64            `json:"start_ms"`
	Consumed map[string]int64 `json:"consumed"`
	Events   int64            `json:"events"`
}

// UsageResponse answers GET /v1/usage; Next, when set, is the "after"
// parameter of the following page.
type UsageResponse struct {
	Usage []Usage `json:"usage"`
	Next  string  `json:"next,omitempty"`
}

// UsageSummary answers GET /v1/usage/summary.
type UsageSummary struct {
	Windows int64                 `json:"windows"`
	Events  int64                 `json:"events"`
	Limits  map[string]LimitUsage `json:"limits"`
}

// LimitUsage totals one limit in a usage summary.
type LimitUsage struct {
	Total       int64   `json:"total"`
	Average     float64 `json:"average_per_window"`
	Peak        int64   `json:"peak"`
	PeakStartMS int64   `json:"peak_start_ms"`
}

// Capacity answers GET /v1/capacity.
type Capacity struct {
	Resource string          `json:"resource"`
	Entities int             `json:"entities"`
	Limits   []LimitCapacity `json:"limits"`
}

// LimitCapacity is one limit summed over a resource's buckets.
type LimitCapacity struct {
	Limit       string  `json:"limit"`
	Kind        string  `json:"kind"`
	Capacity    int64   `json:"capacity"`
	Available   int64   `json:"available"`
	Utilisation float64 `json:"utilisation"`
}

// FromCapacity converts a capacity report.
func FromCapacity(rc model.ResourceCapacity) Capacity {
	out := Capacity{Resource: rc.Resource, Entities: rc.Entities, Limits: make([]LimitCapacity, len(rc.Limits))}
	for i, l := range rc.Limits {
		out.Limits[i] = LimitCapacity{Limit: l.Limit, Kind: l.Kind.String(), Capacity: l.Capacity, Available: l.Available, Utilisation: l.Utilisation}
	}
	return out
}

// ToCapacity converts a capacity report back.
func ToCapacity(c Capacity) model.ResourceCapacity {
	out := model.ResourceCapacity{Resource: c.Resource, Entities: c.Entities, Limits: make([]model.LimitCapacity, len(c.Limits))}
	for i, l := range c.Limits {
		kind, _ := model.ParseKind(l.Kind)
		out.Limits[i] = model.LimitCapacity{Limit: l.Limit, Kind: kind, Capacity: l.Capacity, Available: l.Available, Utilisation: l.Utilisation}
	}
	return out
}

// ScopedLimits is one stored config in a listing: its scope and its limits.
type ScopedLimits struct {
	// Entity and Resource name the scope: both empty for the system
	// config, Resource alone for a resource's, Entity with Resource
	// ("_default_" for the entity default) for an entity's.
	Entity   string `json:"entity,omitempty"`
	Resource string `json:"resource,omitempty"`
	Limits
}

// LimitsListResponse is the body of GET /v1/limits.
type LimitsListResponse struct {
	Configs []ScopedLimits `json:"configs"`
	// Next, when not empty, is the after of the next page.
	Next string `json:"next,omitempty"`
}

// ConfigCursor encodes the scope a listing of configs continues after, as
// GET /v1/limits's after parameter: "s" for the system scope, "r:" and the
// resource, or "e:" the entity, a NUL and the resource.
func ConfigCursor(s model.Scope) string {
	switch {
	case s.Entity != "":
		return "e:" + s.Entity + "\x00" + s.Resource
	case s.Resource != "":
		return "r:" + s.Resource
	}
	return "s"
}

// ParseConfigCursor decodes ConfigCursor; an error is a *model.ValidationError
// naming after.
func ParseConfigCursor(v string) (model.Scope, error) {
	switch {
	case v == "s":
		return model.Scope{}, nil
	case strings.HasPrefix(v, "r:") && len(v) > 2:
		return model.Scope{Resource: v[2:]}, nil
	case strings.HasPrefix(v, "e:"):
		if entity, resource, ok := strings.Cut(v[2:], "\x00"); ok && entity != "" {
			return model.Scope{Entity: entity, Resource: resource}, nil
		}
	}
	return model.Scope{}, model.Invalid("after", v, "not a cursor of this listing (pass the next of the previous page)")
}

// PermissionError is a 403 that names the field of the request the key may
// not send (e.g. "limits", "on_unavailable", "entity"). It matches
// ErrPermissionDenied.
type PermissionError struct {
	Field  string
	Reason string
}

// Error names the field and says why.
func (e *PermissionError) Error() string {
	return "permission denied: " + e.Field + ": " + e.Reason
}

// Is reports whether target is ErrPermissionDenied.
func (e *PermissionError) Is(target error) bool { return target == ErrPermissionDenied }
