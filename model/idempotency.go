package model

import (
	"crypto/sha256"
	"encoding/hex"

	"time"
)

// Retries are safe (docs/semantics.md, "Retries"): an acquire made with an
// idempotency key is granted once however often it is sent, and a lease
// that has ended says how, for a while (TombstoneKeep), to whoever asks.

// MaxIdempotencyKeyLen bounds an idempotency key.
const MaxIdempotencyKeyLen = 255

// TombstoneKeep is how long, at least, an ended lease is remembered (its
// record kept as a tombstone): a repeated commit, or the retry of an
// acquire made with an idempotency key, within it learns how the lease
// ended. An ended lease with a later expiry is remembered until then.
const TombstoneKeep = 10 * time.Minute

// ErrIdempotencyConflict reports an idempotency key sent again with
// another request (another entity, resource or consumption): a key names
// one request. It is a domain error.
var ErrIdempotencyConflict = NewDomainError("idempotency key used for another request")

// WithIdempotencyKey makes the acquire idempotent: the same key, in the
// same namespace, while the lease it granted is remembered (its expiry,
// and at least TombstoneKeep after it ended), returns that grant again and
// debits nothing more. The lease is durable (a record in the store), its
// id derived from the key. A key is 1 to 255 printable ASCII characters;
// the Go client sends one with every acquire unless told otherwise.
func WithIdempotencyKey(key string) AcquireOption {
	err := ValidateIdempotencyKey(key)
	return func(s *AcquireSettings) {
		if err != nil {
			s.fail(err)
			return
		}
		s.IdempotencyKey = key
	}
}

// ValidateIdempotencyKey checks 1 to MaxIdempotencyKeyLen printable ASCII
// characters.
func ValidateIdempotencyKey(key string) error {
	if key == "" || len(key) > MaxIdempotencyKeyLen {
		return invalid("idempotency_key", key, "want 1 to "+itoa(MaxIdempotencyKeyLen)+" characters")
	}
	for i := range len(key) {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return invalid("idempotency_key", key, "want printable ASCII characters")
		}
	}
	return nil
}

// IdempotentLeaseID returns the lease id of an acquire made with key: a
// lease id like any other (LeaseIDLen hexadecimal characters), the first
// 128 bits of the key's SHA-256, so that every retry names the same lease
// and nobody learns the key from the id.
func IdempotentLeaseID(key string) string {
	sum := sha256.Sum256([]byte("tollgate idempotency key\x00" + key))
	return hex.EncodeToString(sum[:LeaseIDLen/2])
}

// How a lease ended, as LeaseEndedError.How says it (and the HTTP API's
// "ended" field).
const (
	EndedCommitted  = "committed"
	EndedRolledBack = "rolled_back"
	EndedExpired    = "expired"
)

// LeaseEndedError reports a lease that has ended, and how: committed,
// rolled back, or expired (ended by a reconciler). It matches
// ErrLeaseClosed, and ErrLeaseExpired when it expired.
type LeaseEndedError struct {
	ID  string
	How string // EndedCommitted, EndedRolledBack or EndedExpired
	At  time.Time
	// Consumed is what the lease consumed in the end (whole tokens): its
	// debit and adjustments when committed or expired, nothing when
	// rolled back.
	Consumed Consume
	// Entity and Resource are the lease's.
	Entity, Resource string
}

// Error says which lease ended, and how.
func (e *LeaseEndedError) Error() string {
	return "lease " + e.ID + " has ended: " + e.How
}

// Is reports whether target is ErrLeaseClosed, ErrDomain, or
// ErrLeaseExpired for a lease that expired.
func (e *LeaseEndedError) Is(target error) bool {
	switch target {
	case ErrLeaseClosed, ErrDomain:
		return true
	case ErrLeaseExpired:
		return e.How == EndedExpired
	}
	return false
}
