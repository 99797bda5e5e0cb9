package model

import "fmt"

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
