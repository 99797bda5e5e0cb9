package model

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"time"
)

// Role is what an API key may do within its namespace and scope.
type Role string

// Roles.
const (
	// RoleAcquire may acquire, use leases, reserve and release resource
	// ids, penalize (a vendor's 429), and read availability and
	// reservations.
	RoleAcquire Role = "acquire"
	// RoleRead may read availability, reservations, entities, limits,
	// usage and the audit log.
	RoleRead Role = "read"
	// RoleAdmin may do everything in its namespace (and scope).
	RoleAdmin Role = "admin"
)

// Validate checks that r is one of the roles.
func (r Role) Validate() error {
	switch r {
	case RoleAcquire, RoleRead, RoleAdmin:
		return nil
	}
	return invalid("role", string(r), "want acquire, read or admin")
}

// Key errors, matched with errors.Is. They are domain errors.
var (
	// ErrKeyNotFound reports a stored API key that does not exist (never
	// created, or revoked).
	ErrKeyNotFound = NewDomainError("API key not found")
	// ErrKeyExists reports creating a key whose name the namespace uses
	// already.
	ErrKeyExists = NewDomainError("API key already exists")
)

// Key bounds.
const (
	// MaxKeyNameLen bounds a key's name.
	MaxKeyNameLen = 64
	// MaxKeyPage is the most keys one listing returns.
	MaxKeyPage = 1000
	// MaxKeyExpiry is the longest lifetime a key may be given.
	MaxKeyExpiry = 10 * 365 * 24 * time.Hour
)

// A Key is an API key of the server as stored: never the secret, only its
// hash. It acts in one namespace, with a role, and when Entity is set only
// on that entity and its descendants (docs/security.md).
type Key struct {
	// Name is unique in its namespace; it is the principal recorded for
	// the key's changes.
	Name      string
	Namespace string // the namespace's name
	Role      Role
	// Entity, if set, confines the key to that entity and its
	// descendants.
	Entity string
	// AllowLimits lets the key send its own limits with a request, and a
	// looser unavailable mode than the stored one (admins may anyway).
	AllowLimits bool
	// Hash is HashKey of the secret.
	Hash      string
	CreatedAt time.Time
	// ExpiresAt, if not zero, is when the key stops working.
	ExpiresAt time.Time
}

// KeySpec describes an API key to create.
type KeySpec struct {
	// Name is unique in the namespace; it is the principal recorded for
	// what the key changes.
	Name string
	Role Role
	// Entity, if set, confines the key to that entity and its
	// descendants.
	Entity string
	// AllowLimits lets the key send its own limits, and a looser
	// unavailable mode than the stored one (admins may anyway).
	AllowLimits bool
	// ExpiresIn, if positive, is how long the key works: at most
	// MaxKeyExpiry.
	ExpiresIn time.Duration
}

// Expired reports whether k has stopped working at now.
func (k Key) Expired(now time.Time) bool { return !k.ExpiresAt.IsZero() && !now.Before(k.ExpiresAt) }

// Scoped reports whether k is confined to an entity's subtree.
func (k Key) Scoped() bool { return k.Entity != "" }

var keyNameChars = newCharset("_.:@-")

// ValidateKeyName checks ^[A-Za-z0-9][A-Za-z0-9_.:@-]*$, at most 64 bytes.
func ValidateKeyName(name string) error {
	return checkIdent("name", name, MaxKeyNameLen, alphanumerics, keyNameChars)
}

// ValidateKey checks what a stored key must hold: a name, a namespace, a
// role, an entity id if scoped, and a well-formed hash.
func ValidateKey(k Key) error {
	if err := ValidateKeyName(k.Name); err != nil {
		return err
	}
	if err := ValidateNamespace(k.Namespace); err != nil {
		return err
	}
	if err := k.Role.Validate(); err != nil {
		return err
	}
	if k.Entity != "" {
		if err := ValidateEntityID(k.Entity); err != nil {
			return err
		}
	}
	return ValidateKeyHash(k.Hash)
}

// KeyPrefix starts every secret GenerateKey makes.
const KeyPrefix = "tg_"

// HashKey returns the hash under which a key's secret is stored:
// "sha256:" and the hex of its SHA-256. A secret is 256 random bits, so
// an unsalted fast hash is enough: nothing can be guessed from it.
func HashKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// GenerateKey returns a new random secret ("tg_" and 43 URL-safe
// characters) and its hash.
func GenerateKey() (secret, hash string) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	secret = KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return secret, HashKey(secret)
}

// ValidateKeyHash checks "sha256:" and 64 lowercase hex digits.
func ValidateKeyHash(hash string) error {
	h, ok := strings.CutPrefix(hash, "sha256:")
	if !ok || len(h) != 64 {
		return invalid("hash", hash, "want sha256: and 64 hex digits")
	}
	for i := range len(h) {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return invalid("hash", hash, "want sha256: and 64 lowercase hex digits")
		}
	}
	return nil
}
