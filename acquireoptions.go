package tollgate

import (
	"time"

	"github.com/tollgate-rl/tollgate/model"
)

// AcquireOption configures one Acquire, Wait, Do, AcquireAndCommit,
// Available or TimeUntilAvailable call. The options are model's, shared
// with the Go client.
type AcquireOption = model.AcquireOption

// AcquireSettings is what a call's AcquireOptions say (SettingsOf).
type AcquireSettings = model.AcquireSettings

// SettingsOf returns what opts say. An invalid option (WithLimits of
// invalid limits, WithLeaseTTL out of range) is its error, a
// *ValidationError, as Acquire would return it.
func SettingsOf(opts ...AcquireOption) (AcquireSettings, error) { return model.SettingsOf(opts...) }

// WithLimits makes the call use limits instead of the stored configuration,
// for the entity and for every cascade ancestor. The limits are validated
// once, when the option is made, so a hoisted option costs nothing per call.
func WithLimits(limits ...Limit) AcquireOption { return model.WithLimits(limits...) }

// WithOnUnavailable sets what this call does if the store cannot answer,
// overriding the stored system setting.
func WithOnUnavailable(mode OnUnavailable) AcquireOption { return model.WithOnUnavailable(mode) }

// WithDurableLease makes the acquire record its lease in the store, as an
// acquire that takes concurrency tokens always does: the lease then has an
// ID, which another process can resume (Limiter.ResumeLease), and an
// expiry, after which a reconciler commits it. Without it a rate-only
// lease is held in this process alone and costs no extra write.
func WithDurableLease() AcquireOption { return model.WithDurableLease() }

// WithIdempotencyKey makes the acquire safe to retry: the same key, in
// the same namespace, while the lease it granted is remembered (its
// expiry, and at least model.TombstoneKeep after it ended), returns that
// grant again (Lease.Replayed, Grant.Replayed) and debits nothing more.
// The same key with another entity, resource or consumption is
// ErrIdempotencyConflict; a lease that has ended since is a
// *LeaseEndedError (but a repeated AcquireAndCommit replays its grant).
// The lease is durable, its id derived from the key.
func WithIdempotencyKey(key string) AcquireOption { return model.WithIdempotencyKey(key) }

// WithLeaseTTL sets how long this acquire's durable lease lives unless
// extended (default: the limiter's, see WithDefaultLeaseTTL), from
// MinLeaseTTL to MaxLeaseTTL; outside that range the call is a
// *ValidationError naming lease_ttl. It does not make a lease durable:
// a lease without a record never expires.
func WithLeaseTTL(d time.Duration) AcquireOption { return model.WithLeaseTTL(d) }

// WithReservation makes the acquire a reservation of the resource id (an
// EMR cluster id, a GPU job, a sandbox): it takes one token of every
// reserved limit (ReservedLimit) that consume names, each named with
// exactly 1, at least one of them, together with the other limits of
// consume, all or nothing, as any acquire does.
//
// The lease is durable, with id "r:" + id, and it never expires unless
// WithLeaseTTL gives it an expiry, which a reconciler then enforces.
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
func WithReservation(id string) AcquireOption { return model.WithReservation(id) }

// explicitLimits returns the call's WithLimits limits with their bucket
// parameters. The state keeps them prepared for the slice they came from:
// a hoisted option, whose slice is the same at every call, is prepared
// once per recycled state.
func (d *leaseData) explicitLimits() []prepared {
	if !sameSlice(d.explicitOf, d.opts.Limits) {
		d.explicit = prepareInto(d.explicit[:0], d.opts.Limits)
		for i := range d.explicit {
			d.explicit[i].source = sourceCall
		}
		d.explicitOf = d.opts.Limits
	}
	return d.explicit
}

// resetOptions clears what the options of d's last call set, storing only
// the fields that changed (see plan on write barriers).
func (d *leaseData) resetOptions() {
	o := &d.opts
	// Only the length: the slice stays for WithLimits to find in place
	// when the next call passes the same (hoisted) option, and neither
	// store takes a write barrier; no limits are set while it is empty
	// (WithLimits never sets an empty one).
	o.Limits = o.Limits[:0]
	if o.OnUnavailable != "" {
		o.OnUnavailable = ""
	}
	o.Durable, o.LeaseTTL = false, 0
	if o.Reservation != "" {
		o.Reservation = ""
	}
	if o.Audit != nil {
		o.Audit = nil
	}
	if o.IdempotencyKey != "" {
		o.IdempotencyKey = ""
	}
	if o.Err != nil {
		o.Err = nil
	}
}
