package model

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors of durable leases (docs/design/quota-broker.md), all domain errors
// (ErrDomain). ErrLeaseExpired matches ErrLeaseClosed too: an expired lease
// is one that has ended.
var (
	// ErrLeaseNotFound reports a lease id with no record: never granted,
	// already ended, or of another namespace.
	ErrLeaseNotFound = NewDomainError("lease not found")
	// ErrLeaseExists reports a lease record created with an id that is
	// taken; the acquire that carried it debited nothing.
	ErrLeaseExists = NewDomainError("lease already exists")
	// ErrLeaseConflict reports a change or an ending of a lease record that
	// is no longer as the caller read it (another process changed it, or
	// it has not expired when the ending required it to).
	ErrLeaseConflict = NewDomainError("lease changed concurrently")
	// ErrLeaseExpired reports use of a lease that the reconciler ended
	// because its expiry passed.
	ErrLeaseExpired = fmt.Errorf("lease expired: %w", ErrLeaseClosed)
	// ErrReservationConflict reports a reservation of an id that another
	// entity or resource holds: ids are unique in a namespace.
	ErrReservationConflict = NewDomainError("reservation id held by another entity or resource")
)

// LeaseIDLen is the length of a lease id the limiter makes: 32 hexadecimal
// characters, 128 random bits.
const LeaseIDLen = 32

// MaxLeaseIDLen bounds a lease id: a reservation's id (at most
// MaxEntityIDLen) behind a two-byte prefix.
const MaxLeaseIDLen = MaxEntityIDLen + 2

var leaseIDChars = newCharset("_.:@/-")

// ValidateLeaseID checks a lease id as a store receives it: 1 to
// MaxLeaseIDLen bytes of [A-Za-z0-9_.:@/-], starting with a letter or digit.
func ValidateLeaseID(id string) error {
	return checkIdent("lease_id", id, MaxLeaseIDLen, alphanumerics, leaseIDChars)
}

// MaxReservationIDLen bounds a reservation id, as an entity id is bounded.
const MaxReservationIDLen = MaxEntityIDLen

// ReservationPrefix begins the lease id of every reservation: the lease of
// reservation id is ReservationPrefix + id. The lease ids the limiter makes
// are hexadecimal, so they never begin with it.
const ReservationPrefix = "r:"

// ValidateReservationID checks a reservation id: 1 to MaxReservationIDLen
// bytes of [A-Za-z0-9_.:@/-], starting with a letter or digit. That covers
// EMR cluster ids, the resource part of ARNs and Kubernetes names.
func ValidateReservationID(id string) error {
	return checkIdent("reservation_id", id, MaxReservationIDLen, alphanumerics, leaseIDChars)
}

// ReservationLeaseID returns the lease id of reservation id.
func ReservationLeaseID(id string) string { return ReservationPrefix + id }

// ReservationOf returns the reservation id of a lease id, and whether the
// lease is a reservation's.
func ReservationOf(leaseID string) (string, bool) {
	return strings.CutPrefix(leaseID, ReservationPrefix)
}

// Reservation is a reserved resource id and who holds it.
type Reservation struct {
	// ID is the resource id reserved (WithReservation).
	ID       string
	Entity   string
	Resource string
	// Holder names the process that reserved it.
	Holder  string
	Created time.Time
	// Expires is when a reconciler releases the reservation; the zero time
	// if it never expires (no WithLeaseTTL).
	Expires time.Time
}

// ReservationGrant is the outcome of Reserve: the reservation as the
// store has it, and what its acquire did.
type ReservationGrant struct {
	Reservation
	// New is false when the same entity and resource held the id already:
	// the call debited nothing again, and Statuses is empty. (A degraded
	// grant is new: nothing was held.)
	New bool
	// Consumed is what the reservation's acquire consumed.
	Consumed Consume
	// Statuses are the limits debited, just after the grant.
	Statuses []Status
	// Degraded reports that the store could not answer and the Allow mode
	// granted without counting: nothing is reserved.
	Degraded bool
}

// MaxPenalty bounds how far ahead a penalty may end: a vendor's
// retry-after beyond a day is more likely a mistake than a wish.
const MaxPenalty = 24 * time.Hour

// Errors of waiting and of held slots; neither is a domain error of the
// store.
var (
	// ErrWaitDeadline is matched by the error of Wait when the caller's
	// deadline falls before the time its request could next be tried.
	ErrWaitDeadline = errors.New("the deadline falls before the next try")
	// ErrSlotLost is the cause of the context WithSlot hands its function
	// when the lease was ended elsewhere while the function ran (a
	// reconciler took it, its namespace was purged): the slot is no longer
	// held.
	ErrSlotLost = errors.New("tollgate: the slot's lease was ended elsewhere")
)

// LeaseInfo describes an open durable lease as its record has it, for
// listings (reservations are listed as Reservation).
type LeaseInfo struct {
	ID       string
	Entity   string
	Resource string
	// Holder names the process that acquired it.
	Holder  string
	Created time.Time
	// Expires is when a reconciler ends the lease unless it is extended;
	// the zero time if it never expires.
	Expires time.Time
	// Consumed is what the lease holds, whole tokens per limit, pending
	// adjustments included, as the lease's Consumed reports it.
	Consumed Consume
}
