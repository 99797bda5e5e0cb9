package model

import "time"

// DefaultNamespace is the namespace that exists from the start.
const DefaultNamespace = "default"

// MaxNamespaceLen bounds namespace names.
const MaxNamespaceLen = 64

// Namespace errors, matched with errors.Is. They are domain errors.
var (
	ErrNamespaceNotFound = NewDomainError("namespace not found")
	ErrNamespaceExists   = NewDomainError("namespace already exists")
	ErrNamespaceDeleted  = NewDomainError("namespace deleted")
)

// A Namespace keeps one tenant's data apart from every other's in a shared
// store. Its name is what people use; its ID, opaque and never reused, is
// what prefixes every stored key.
type Namespace struct {
	Name      string
	ID        string
	CreatedAt time.Time
	// DeletedAt is set while the namespace is soft-deleted: its data is kept
	// (and can be recovered) until it is purged.
	DeletedAt time.Time
	// AuditRetention is how long the namespace's audit events are kept:
	// an event older than this is hidden from every listing and swept
	// (docs/operations.md). Zero keeps them forever.
	AuditRetention time.Duration
}

// Deleted reports whether the namespace is soft-deleted.
func (n Namespace) Deleted() bool { return !n.DeletedAt.IsZero() }

var namespaceChars = newCharset("_.-")

// ValidateNamespace checks ^[A-Za-z0-9][A-Za-z0-9_.-]*$, at most 64 bytes.
func ValidateNamespace(name string) error {
	return checkIdent("namespace", name, MaxNamespaceLen, alphanumerics, namespaceChars)
}

// MinAuditRetention bounds AuditRetention from below (a retention
// shorter than this would drop events before anyone could export them),
// and MaxAuditRetention from above (about a hundred years).
const (
	MinAuditRetention = time.Hour
	MaxAuditRetention = 100 * 365 * 24 * time.Hour
)

// ValidateAuditRetention checks a namespace's audit retention: zero
// (forever), or a whole number of seconds from MinAuditRetention to
// MaxAuditRetention.
func ValidateAuditRetention(d time.Duration) error {
	switch {
	case d == 0:
		return nil
	case d < MinAuditRetention || d > MaxAuditRetention:
		return Invalid("audit_retention", d.String(), "must be 0 (forever) or from 1h to 100 years")
	case d%time.Second != 0:
		return Invalid("audit_retention", d.String(), "must be a whole number of seconds")
	}
	return nil
}
