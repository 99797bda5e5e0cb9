package tollgate

import (
	"time"

	"github.com/tollgate-rl/tollgate/model"
)

// AcquireOption configures one Acquire, Wait, Do, Available or
// TimeUntilAvailable call.
type AcquireOption func(*acquireOptions)

// acquireOptions are the options of one call. They live in recycled lease
// state; see leaseData.release for what is reset between calls.
type acquireOptions struct {
	// explicit is set when WithLimits was given: ex holds its limits.
	// Otherwise ex is meaningless (it may hold an earlier call's).
	explicit bool
	ex       *explicitLimits
	mode     model.OnUnavailable
	// durable asks for a lease record even without concurrency tokens;
	// expiry (set when hasExpiry is) overrides the limiter's default.
	durable   bool
	hasExpiry bool
	expiry    time.Duration
	// reservation is the id of WithReservation ("": none).
	reservation string
}

// explicitLimits are the limits of one WithLimits option, prepared once.
type explicitLimits struct {
	limits []prepared
	err    error // why the limits are invalid, or nil
}

// WithLimits makes the call use limits instead of the stored configuration,
// for the entity and for every cascade ancestor. The limits are validated
// once, when the option is made, so a hoisted option costs nothing per call.
func WithLimits(limits ...Limit) AcquireOption {
	err := model.ValidateLimits(limits)
	if err == nil && len(limits) == 0 {
		err = model.Invalid("limits", "", "WithLimits needs at least one limit")
	}
	ex := &explicitLimits{limits: prepare(limits), err: err}
	return func(o *acquireOptions) {
		o.explicit = true
		// A hoisted option finds itself here from the call before: storing
		// the pointer again would only cost a write barrier (see
		// setIfChanged).
		setIfChanged(&o.ex, ex)
	}
}

// WithOnUnavailable sets what this call does if the store cannot answer,
// overriding the stored system setting.
func WithOnUnavailable(mode OnUnavailable) AcquireOption {
	return func(o *acquireOptions) { o.mode = mode }
}

// WithDurableLease makes the acquire record its lease in the store, as an
// acquire that takes concurrency tokens always does: the lease then has an
// ID, which another process can resume (Limiter.ResumeLease), and an
// expiry, after which a reconciler commits it. Without it a rate-only
// lease is held in this process alone and costs no extra write.
func WithDurableLease() AcquireOption { return func(o *acquireOptions) { o.durable = true } }

// WithLeaseExpiry sets how long this acquire's durable lease lives unless
// extended (default: the limiter's, see WithDefaultLeaseExpiry), from
// MinLeaseExpiry to MaxLeaseExpiry; outside that range the call is a
// *ValidationError naming lease_expiry. It does not make a lease durable:
// a lease without a record never expires.
func WithLeaseExpiry(d time.Duration) AcquireOption {
	return func(o *acquireOptions) { o.hasExpiry, o.expiry = true, d }
}

// WithReservation makes the acquire a reservation of the resource id (an
// EMR cluster id, a GPU job, a sandbox): it takes one token of every
// reserved limit (ReservedLimit) that consume names, each named with
// exactly 1, at least one of them, together with the other limits of
// consume, all or nothing, as any acquire does.
//
// The lease is durable, with id "r:" + id, and it never expires unless
// WithLeaseExpiry gives it an expiry, which a reconciler then enforces.
// It is meant to outlive the process: end it with Limiter.Release(ctx, id)
// (or Commit), from any process sharing the store, when the resource is
// gone; Rollback instead refunds its rate consumption too.
//
// An id is reserved once in a namespace. Reserving an id that the same
// entity and resource already hold debits nothing and returns the
// existing reservation's lease (as ResumeLease would); an id that another
// entity or resource holds is an error matching ErrReservationConflict.
// An id that is not valid (model.ValidateReservationID) is a
// *ValidationError naming reservation_id.
func WithReservation(id string) AcquireOption {
	return func(o *acquireOptions) { o.reservation = id }
}

// AcquireSettings is what a call's AcquireOptions say, for an Acquirer
// other than a Limiter (the Go client) to carry them to where they apply.
type AcquireSettings struct {
	Limits        []Limit       // WithLimits; nil: the stored limits
	OnUnavailable OnUnavailable // WithOnUnavailable; "": the stored setting
	Durable       bool          // WithDurableLease
	LeaseExpiry   time.Duration // WithLeaseExpiry; 0: the default
	Reservation   string        // WithReservation; "": none
}

// SettingsOf returns what opts say. Invalid WithLimits are its error (a
// *ValidationError), as Acquire would return it.
func SettingsOf(opts ...AcquireOption) (AcquireSettings, error) {
	var o acquireOptions
	for _, opt := range opts {
		opt(&o)
	}
	s := AcquireSettings{OnUnavailable: o.mode, Durable: o.durable, Reservation: o.reservation}
	if o.hasExpiry {
		s.LeaseExpiry = o.expiry
	}
	if o.explicit {
		if o.ex.err != nil {
			return AcquireSettings{}, o.ex.err
		}
		s.Limits = make([]Limit, len(o.ex.limits))
		for i, p := range o.ex.limits {
			s.Limits[i] = p.limit
		}
	}
	return s, nil
}
