package tollgate

import (
	"time"

	"github.com/tollgate-rl/tollgate/calendar"
	"github.com/tollgate-rl/tollgate/model"
)

// The vocabulary of package model, re-exported so that applications need to
// import only tollgate and a backend.

// Limit is one named token bucket or concurrency cap. See model.Limit.
type Limit = model.Limit

// Kind distinguishes rate limits from concurrency and reserved limits.
type Kind = model.Kind

// Limit kinds.
const (
	Rate        = model.Rate
	Concurrency = model.Concurrency
	// Reserved limits hold resources by id: see WithReservation.
	Reserved = model.Reserved
)

// Entity is something limits apply to, in a tree. See model.Entity.
type Entity = model.Entity

// Config is the limits stored at one scope. See model.Config.
type Config = model.Config

// Scope names where a Config is stored. See model.Scope.
type Scope = model.Scope

// OnUnavailable says what an acquire does when the store cannot answer.
type OnUnavailable = model.OnUnavailable

// Unavailable modes.
const (
	Block = model.Block
	Allow = model.Allow
)

// DefaultResource names an entity's default configuration.
const DefaultResource = model.DefaultResource

// Status is one limit's verdict or current state. See model.Status.
type Status = model.Status

// AuditEvent records one change of configuration or entities.
type AuditEvent = model.AuditEvent

// AuditQuery selects a page of a namespace's whole audit log by time
// (Admin.AuditLog). See model.AuditQuery.
type AuditQuery = model.AuditQuery

// RateLimitExceeded is the error of a denied acquire. See
// model.RateLimitExceeded.
type RateLimitExceeded = model.RateLimitExceeded

// UnavailableError is the error of an acquire the store could not answer.
type UnavailableError = model.UnavailableError

// ValidationError reports bad input; nothing was written.
type ValidationError = model.ValidationError

// LeaseEndedError reports a durable lease that has ended, and how. See
// model.LeaseEndedError.
type LeaseEndedError = model.LeaseEndedError

// Errors to match with errors.Is.
var (
	ErrRateLimited    = model.ErrRateLimited
	ErrUnavailable    = model.ErrUnavailable
	ErrInvalid        = model.ErrInvalid
	ErrEntityNotFound = model.ErrEntityNotFound
	ErrEntityExists   = model.ErrEntityExists
	ErrNotFound       = model.ErrNotFound
	// ErrPreconditionFailed reports a change conditional on a version
	// (IfVersion, IfAbsent) that no longer holds; nothing was written.
	ErrPreconditionFailed = model.ErrPreconditionFailed
	ErrLeaseClosed        = model.ErrLeaseClosed
	// ErrLeaseExpired matches ErrLeaseClosed: a durable lease that a
	// reconciler ended after its expiry, or that another process ended.
	ErrLeaseExpired = model.ErrLeaseExpired
	// ErrLeaseNotFound reports a durable lease id with no record
	// (ResumeLease): never granted, ended, or of another namespace.
	ErrLeaseNotFound = model.ErrLeaseNotFound
	// ErrReservationConflict reports a reservation of an id that another
	// entity or resource holds.
	ErrReservationConflict = model.ErrReservationConflict

	ErrNamespaceNotFound = model.ErrNamespaceNotFound
	ErrNamespaceExists   = model.ErrNamespaceExists
	ErrNamespaceDeleted  = model.ErrNamespaceDeleted

	// ErrIdempotencyConflict reports an idempotency key sent again with
	// another request.
	ErrIdempotencyConflict = model.ErrIdempotencyConflict

	// ErrKeyNotFound reports a stored API key that does not exist.
	ErrKeyNotFound = model.ErrKeyNotFound
	// ErrKeyExists reports creating a key whose name is taken.
	ErrKeyExists = model.ErrKeyExists
)

// Errors of waiting and of held slots.
var (
	// ErrWaitDeadline is matched by the error of Wait when the caller's
	// deadline falls before the time its request could next be tried.
	ErrWaitDeadline = model.ErrWaitDeadline
	// ErrSlotLost is the cause of the context WithSlot hands its function
	// when the lease was ended elsewhere while the function ran.
	ErrSlotLost = model.ErrSlotLost
)

// Namespace is a tenant's partition of a shared store. See model.Namespace.
type Namespace = model.Namespace

// PerSecond returns a limit of n tokens per second.
func PerSecond(name string, n int64) Limit { return model.PerSecond(name, n) }

// PerMinute returns a limit of n tokens per minute.
func PerMinute(name string, n int64) Limit { return model.PerMinute(name, n) }

// PerHour returns a limit of n tokens per hour.
func PerHour(name string, n int64) Limit { return model.PerHour(name, n) }

// PerDay returns a limit of n tokens per day.
func PerDay(name string, n int64) Limit { return model.PerDay(name, n) }

// RateLimit returns a limit of amount tokens per period, capacity amount.
func RateLimit(name string, amount int64, period time.Duration) Limit {
	return model.RateLimit(name, amount, period)
}

// ConcurrencyLimit returns a limit of at most n operations in flight.
func ConcurrencyLimit(name string, n int64) Limit { return model.ConcurrencyLimit(name, n) }

// ReservedLimit returns a limit of at most n resources reserved at once,
// each by its id (WithReservation).
func ReservedLimit(name string, n int64) Limit { return model.ReservedLimit(name, n) }

// ParseLimit reads the text syntax, e.g. "tpm:10000/min:15000". See
// model.ParseLimit.
func ParseLimit(s string) (Limit, error) { return model.ParseLimit(s) }

// ParseLimits parses several limits and rejects duplicate names.
func ParseLimits(texts []string) ([]Limit, error) { return model.ParseLimits(texts) }

// SystemScope is the scope of the system-wide defaults.
func SystemScope() Scope { return model.SystemScope() }

// ResourceScope is the scope of one resource's defaults.
func ResourceScope(resource string) Scope { return model.ResourceScope(resource) }

// EntityScope is the scope of an entity's limits for resource, or for every
// resource when resource is empty.
func EntityScope(entity, resource string) Scope { return model.EntityScope(entity, resource) }

// Consume maps limit names to whole-token amounts. See model.Consume.
type Consume = model.Consume

// Acquirer is the API that a Limiter (limits in this process, over a
// store) and a client.Client (limits through a tollgate serve) share: the
// same method names, arguments, options and typed errors, so code written
// against it runs on either. L is the lease each hands out: *Lease or
// *client.Lease. See model.Acquirer.
//
//	func charge[L tollgate.Held](ctx context.Context, a tollgate.Acquirer[L], key string) error {
//		return a.Do(ctx, key, "openai/gpt-4o", tollgate.Consume{"rpm": 1}, func(ctx context.Context, l L) error {
//			return l.Adjust(ctx, tollgate.Consume{"tpm": 500})
//		})
//	}
type Acquirer[L Held] = model.Acquirer[L]

// Administrator is the control plane that Admin and the Go client share.
// See model.Administrator.
type Administrator = model.Administrator

// Held is a granted lease, wherever it is held: *Lease, or the Go client's
// *client.Lease.
type Held = model.Held

// Grant is the outcome of AcquireAndCommit. See model.Grant.
type Grant = model.Grant

// Reservation is a reserved resource id and who holds it. See
// model.Reservation.
type Reservation = model.Reservation

// ReservationGrant is the outcome of Limiter.Reserve. See
// model.ReservationGrant.
type ReservationGrant = model.ReservationGrant

// Window is the length of a usage snapshot: Hourly or Daily.
type Window = model.Window

// Usage windows.
const (
	Hourly = model.Hourly
	Daily  = model.Daily
)

// Usage is what one entity consumed of one resource in one window.
type Usage = model.Usage

// UsageQuery selects usage snapshots. See model.UsageQuery.
type UsageQuery = model.UsageQuery

// UsageSummary totals the snapshots of a query.
type UsageSummary = model.UsageSummary

// LimitUsage totals one limit's net consumption.
type LimitUsage = model.LimitUsage

// ResourceCapacity is how much of a resource's limits is in use across its
// entities, now.
type ResourceCapacity = model.ResourceCapacity

// LimitCapacity sums one limit over a resource's buckets.
type LimitCapacity = model.LimitCapacity

// Bounds of the calls.
const (
	// MaxEntityPage is the most entities one ListEntities call returns.
	MaxEntityPage = model.MaxEntityPage
	// MaxAuditPage is the most audit events one AuditEvents call returns.
	MaxAuditPage = model.MaxAuditPage
	// MinAuditRetention and MaxAuditRetention bound a namespace's audit
	// retention (Admin.SetAuditRetention; 0 is forever).
	MinAuditRetention = model.MinAuditRetention
	MaxAuditRetention = model.MaxAuditRetention
	// MaxPenalty bounds how far ahead a penalty may end.
	MaxPenalty = model.MaxPenalty
	// MinLeaseTTL and MaxLeaseTTL bound a durable lease's expiry.
	MinLeaseTTL = model.MinLeaseTTL
	MaxLeaseTTL = model.MaxLeaseTTL
	// MaxKeyPage is the most keys one Keys call returns.
	MaxKeyPage = model.MaxKeyPage
	// MaxKeyExpiry bounds KeySpec.ExpiresIn.
	MaxKeyExpiry = model.MaxKeyExpiry
	// MaxTokens is the largest amount, capacity or refill a limit takes.
	MaxTokens = model.MaxTokens
	// TombstoneKeep is how long an ended lease is remembered: a retry of
	// its acquire (WithIdempotencyKey) or of its ending within it is
	// answered as the first call was.
	TombstoneKeep = model.TombstoneKeep
)

// How a lease ended, as LeaseEndedError.How says it.
const (
	EndedCommitted  = model.EndedCommitted
	EndedRolledBack = model.EndedRolledBack
	EndedExpired    = model.EndedExpired
)

// Role is what an API key may do within its namespace and scope. See
// model.Role.
type Role = model.Role

// Roles of API keys.
const (
	RoleAcquire = model.RoleAcquire
	RoleRead    = model.RoleRead
	RoleAdmin   = model.RoleAdmin
)

// The actions of audit events (AuditEvent.Action).
const (
	ActionEntityCreate       = model.ActionEntityCreate
	ActionEntityDelete       = model.ActionEntityDelete
	ActionEntityUpdate       = model.ActionEntityUpdate
	ActionConfigSet          = model.ActionConfigSet
	ActionConfigDelete       = model.ActionConfigDelete
	ActionLeaseExpired       = model.ActionLeaseExpired
	ActionLimitPenalize      = model.ActionLimitPenalize
	ActionLimitReset         = model.ActionLimitReset
	ActionReservationReserve = model.ActionReservationReserve
	ActionReservationRelease = model.ActionReservationRelease
	ActionKeyCreate          = model.ActionKeyCreate
	ActionKeyRevoke          = model.ActionKeyRevoke
)

// Waits, in time and in what a refusal waits for (see model).
const (
	// MaxWait is the longest wait a time.Duration holds (about 292 years):
	// a RetryAfter of MaxWait means at least that long, and RetryAfterMS
	// says how long.
	MaxWait = model.MaxWait
	// MaxWaitMS is the longest wait in milliseconds; longer refills
	// saturate there.
	MaxWaitMS = model.MaxWaitMS
	// WaitsExpiry and WaitsRelease say what an exceeded concurrency or
	// reserved limit waits for (Status.Waits): the earliest expiry among
	// its holders, or a release at no known time.
	WaitsExpiry  = model.WaitsExpiry
	WaitsRelease = model.WaitsRelease
	// SourceCall is the Status.Source of a limit the request passed itself.
	SourceCall = model.SourceCall
	// SlotPoll is how often Wait looks again at a concurrency or reserved
	// limit, unless a holder's expiry comes sooner.
	SlotPoll = model.SlotPoll
)

// CalendarQuota returns a quota of n tokens per window of a time zone's
// calendar, refilled to n at each boundary: see model.CalendarQuota. Its
// text form is "name:N/month@UTC" (ParseLimit).
func CalendarQuota(name string, n int64, w calendar.Window) Limit {
	return model.CalendarQuota(name, n, w)
}
