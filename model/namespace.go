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
}

// Deleted reports whether the namespace is soft-deleted.
func (n Namespace) Deleted() bool { return !n.DeletedAt.IsZero() }

var namespaceChars = newCharset("_.-")

// ValidateNamespace checks ^[A-Za-z0-9][A-Za-z0-9_.-]*$, at most 64 bytes.
func ValidateNamespace(name string) error {
	return checkIdent("namespace", name, MaxNamespaceLen, alphanumerics, namespaceChars)
}
