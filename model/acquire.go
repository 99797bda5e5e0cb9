package model

import (
	"context"
	"slices"
	"time"
)

// The API shared by the library (tollgate.Limiter and tollgate.Admin) and
// the Go client (client.Client): its types live here, below both, so that
// the client needs neither the store nor the bucket math to speak it.
// Package tollgate re-exports every name.

// Consume maps limit names to whole-token amounts, e.g.
// Consume{"rpm": 1, "tpm": 500}. In Acquire amounts are >= 0; in Adjust
// they may be negative (a refund).
type Consume map[string]int64

// Acquirer is the data plane, as Administrator is the control plane: the
// API that a tollgate.Limiter (limits in this process, over a store) and a
// client.Client (limits through a tollgate serve) share: the same method
// names, arguments, options and typed errors, so code written against it
// runs on either. L is the lease each hands out.
type Acquirer[L Held] interface {
	Acquire(ctx context.Context, entity, resource string, consume Consume, opts ...AcquireOption) (L, error)
	Wait(ctx context.Context, entity, resource string, consume Consume, opts ...AcquireOption) (L, error)
	Do(ctx context.Context, entity, resource string, consume Consume, fn func(context.Context, L) error, opts ...AcquireOption) error
	WithSlot(ctx context.Context, entity, resource string, consume Consume, wait time.Duration, fn func(context.Context) error, opts ...AcquireOption) error
	AcquireAndCommit(ctx context.Context, entity, resource string, consume Consume, opts ...AcquireOption) (Grant, error)
	Available(ctx context.Context, entity, resource string, opts ...AcquireOption) ([]Status, error)
	TimeUntilAvailable(ctx context.Context, entity, resource string, consume Consume, opts ...AcquireOption) (time.Duration, error)
	// ResumeLease takes up a durable lease by its id, in another process
	// or after a restart.
	ResumeLease(ctx context.Context, id string) (L, error)
	// Reserve holds a resource id until Release.
	Reserve(ctx context.Context, entity, resource, id string, consume Consume, opts ...AcquireOption) (ReservationGrant, error)
	Release(ctx context.Context, id string, opts ...WriteOption) error
	// Penalize empties rate limits until a time: what a caller does when
	// a vendor answers 429 with its own retry-after.
	Penalize(ctx context.Context, entity, resource string, until time.Time, reason string, limits []string, opts ...WriteOption) error
}

// Held is a granted lease, wherever it is held: tollgate's *Lease, or the Go
// client's *client.Lease.
type Held interface {
	ID() string
	Entity() string
	Resource() string
	Degraded() bool
	Consumed() Consume
	Statuses() []Status
	Adjust(ctx context.Context, delta Consume) error
	Extend(ctx context.Context, d time.Duration) error
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
	// Penalize empties limits the lease was acquired with until a time
	// (the vendor's retry-after), for every holder.
	Penalize(ctx context.Context, until time.Time, reason string, limits []string, opts ...WriteOption) error
}

// Grant is the outcome of AcquireAndCommit: what was consumed and every
// limit's state just after.
type Grant struct {
	Consumed Consume
	Statuses []Status
	// Degraded reports that the store could not answer and the Allow mode
	// granted without counting.
	Degraded bool
	// Replayed reports the grant of an earlier call with the same
	// idempotency key (WithIdempotencyKey), returned again: nothing was
	// debited this time, and Statuses is empty.
	Replayed bool
}

// Bounds of a durable lease's expiry: under a second a holder could hardly
// extend in time; a day is past any call a slot should cover.
const (
	MinLeaseTTL = time.Second
	MaxLeaseTTL = 24 * time.Hour
)

// CheckLeaseTTL reports a lease expiry outside [MinLeaseTTL,
// MaxLeaseTTL] as a *ValidationError naming lease_ttl.
func CheckLeaseTTL(d time.Duration) error {
	if d < MinLeaseTTL || d > MaxLeaseTTL {
		return Invalid("lease_ttl", d.String(), "must be "+MinLeaseTTL.String()+" to "+MaxLeaseTTL.String())
	}
	return nil
}

// AcquireOption configures one Acquire, Wait, Do, AcquireAndCommit,
// Available or TimeUntilAvailable call.
type AcquireOption func(*AcquireSettings)

// AcquireSettings is what a call's options say; SettingsOf reads them.
// The zero value is a call without options.
type AcquireSettings struct {
	// Limits are WithLimits' limits, checked when the option was made (a
	// copy: the option's caller may reuse its slice); empty: the stored
	// configuration (recycled settings may keep an earlier call's slice,
	// cut to length 0).
	Limits []Limit
	// OnUnavailable is WithOnUnavailable's mode; "": the stored setting.
	OnUnavailable OnUnavailable
	// Durable is set by WithDurableLease.
	Durable bool
	// LeaseTTL is WithLeaseTTL's expiry; 0: the default.
	LeaseTTL time.Duration
	// Reservation is WithReservation's id; "": none.
	Reservation string
	// Audit are WithAudit's write options, for the audit event of a
	// reservation; nil: none.
	Audit []WriteOption
	// IdempotencyKey is WithIdempotencyKey's key; "": none.
	IdempotencyKey string
	// Err is why an option is invalid (invalid limits, an expiry out of
	// range): a *ValidationError, which the call returns before doing
	// anything else.
	Err error
}

// SettingsOf returns what opts say, and their Err.
func SettingsOf(opts ...AcquireOption) (AcquireSettings, error) {
	var s AcquireSettings
	for _, opt := range opts {
		opt(&s)
	}
	return s, s.Err
}

// fail records the first invalid option's error.
func (s *AcquireSettings) fail(err error) {
	if s.Err == nil {
		s.Err = err
	}
}

// WithLimits makes the call use limits instead of the stored configuration,
// for the entity and for every cascade ancestor. The limits are validated
// once, when the option is made, so a hoisted option costs nothing per call.
func WithLimits(limits ...Limit) AcquireOption {
	err := ValidateLimits(limits)
	if err == nil && len(limits) == 0 {
		err = Invalid("limits", "", "WithLimits needs at least one limit")
	}
	if err != nil {
		return func(s *AcquireSettings) { s.fail(err) }
	}
	limits = slices.Clone(limits)
	return func(s *AcquireSettings) {
		// Settings recycled from a call with this same option (a hoisted
		// one) still hold limits, with its length cut to 0: only the
		// length is stored, which takes no write barrier.
		if cap(s.Limits) == cap(limits) && &s.Limits[:1][0] == &limits[:1][0] {
			s.Limits = s.Limits[:len(limits)]
			return
		}
		s.Limits = limits
	}
}

// WithOnUnavailable sets what this call does if the store cannot answer,
// overriding the stored system setting.
func WithOnUnavailable(mode OnUnavailable) AcquireOption {
	return func(s *AcquireSettings) { s.OnUnavailable = mode }
}

// WithDurableLease makes the acquire record its lease in the store, as an
// acquire that takes concurrency tokens always does: the lease then has an
// ID, which another process can resume, and an expiry, after which a
// reconciler commits it. Without it a rate-only lease is held in the
// acquiring process alone and costs no extra write.
func WithDurableLease() AcquireOption { return func(s *AcquireSettings) { s.Durable = true } }

// WithLeaseTTL sets how long this acquire's durable lease lives unless
// extended (default: the limiter's), from MinLeaseTTL to MaxLeaseTTL;
// outside that range the call is a *ValidationError naming lease_ttl. It
// does not make a lease durable: a lease without a record never expires.
func WithLeaseTTL(d time.Duration) AcquireOption {
	err := CheckLeaseTTL(d)
	return func(s *AcquireSettings) {
		if err != nil {
			s.fail(err)
			return
		}
		s.LeaseTTL = d
	}
}

// WithReservation makes the acquire a reservation of the resource id (an
// EMR cluster id, a GPU job, a sandbox): it takes one token of every
// reserved limit (ReservedLimit) that consume names, each named with
// exactly 1, at least one of them, together with the other limits of
// consume, all or nothing, as any acquire does.
//
// The lease is durable, with id "r:" + id, and it never expires unless
// WithLeaseTTL gives it an expiry, which a reconciler then enforces.
// It is meant to outlive the process: release it by id, from any process
// sharing the store, when the resource is gone; Rollback instead refunds
// its rate consumption too.
//
// An id is reserved once in a namespace. Reserving an id that the same
// entity and resource already hold debits nothing and returns the
// existing reservation's lease; an id that another entity or resource
// holds is an error matching ErrReservationConflict. An id that is not
// valid (ValidateReservationID) is a *ValidationError naming
// reservation_id.
func WithReservation(id string) AcquireOption {
	return func(s *AcquireSettings) { s.Reservation = id }
}

// WithLeaseExpiry is WithLeaseTTL, under its name of one release ago.
//
// Deprecated: use WithLeaseTTL.
func WithLeaseExpiry(d time.Duration) AcquireOption { return WithLeaseTTL(d) }

// The bounds of a lease's TTL under their names of one release ago.
//
// Deprecated: use MinLeaseTTL and MaxLeaseTTL.
const (
	MinLeaseExpiry = MinLeaseTTL
	MaxLeaseExpiry = MaxLeaseTTL
)
