package model

import "unicode/utf8"

// Identifier bounds (docs/semantics.md 9).
const (
	MaxEntityIDLen     = 256
	MaxResourceLen     = 64
	MaxLimitNameLen    = 64
	MaxDisplayNameLen  = 256
	MaxMetadataEntries = 32
	MaxMetadataKeyLen  = 64
	MaxMetadataValLen  = 1024
	MaxPrincipalLen    = 256
	// MaxReasonLen bounds the reason of a penalty, kept in its audit event.
	MaxReasonLen = 1024
	// MaxHolderLen bounds a durable lease's holder (a host and process,
	// a server id).
	MaxHolderLen = 256
)

// DefaultResource names an entity's default configuration, used for every
// resource that has no entity+resource configuration of its own.
const DefaultResource = "_default_"

// charset is a set of bytes; identifiers are checked with table lookups so
// that the acquire path validates them quickly and without allocating.
type charset [256]bool

func newCharset(extra string) *charset {
	var c charset
	for b := 'a'; b <= 'z'; b++ {
		c[b], c[b-'a'+'A'] = true, true
	}
	for b := '0'; b <= '9'; b++ {
		c[b] = true
	}
	for i := 0; i < len(extra); i++ {
		c[extra[i]] = true
	}
	return &c
}

var (
	letters        = func() *charset { c := newCharset(""); clear(c['0' : '9'+1]); return c }()
	alphanumerics  = newCharset("")
	entityChars    = newCharset("_.:@-")
	resourceChars  = newCharset("_./-")
	limitNameChars = newCharset("_.-")
)

// ValidateEntityID checks ^[A-Za-z0-9][A-Za-z0-9_.:@-]*$, at most 256 bytes.
func ValidateEntityID(id string) error {
	return checkIdent("entity", id, MaxEntityIDLen, alphanumerics, entityChars)
}

// ValidateResource checks ^[A-Za-z][A-Za-z0-9_./-]*$, at most 64 bytes
// ("openai/gpt-4o" is a valid resource).
func ValidateResource(r string) error {
	return checkIdent("resource", r, MaxResourceLen, letters, resourceChars)
}

// ValidateLimitName checks ^[A-Za-z][A-Za-z0-9_.-]*$, at most 64 bytes. Names
// the system uses internally begin with an underscore, which the syntax
// reserves by refusing it as a first character.
func ValidateLimitName(name string) error {
	return checkIdent("limit.name", name, MaxLimitNameLen, letters, limitNameChars)
}

func checkIdent(field, s string, max int, first, rest *charset) error {
	switch {
	case s == "":
		return invalid(field, s, "must not be empty")
	case len(s) > max:
		return invalid(field, s, "longer than "+itoa(max)+" bytes")
	case !first[s[0]]:
		return invalid(field, s, "must start with "+describeFirst(field))
	}
	for i := 1; i < len(s); i++ {
		if !rest[s[i]] {
			return invalid(field, s, "contains "+quoteRune(s[i:])+" at byte "+itoa(i))
		}
	}
	return nil
}

func describeFirst(field string) string {
	if field == "entity" || field == "namespace" || field == "lease_id" || field == "reservation_id" {
		return "a letter or digit"
	}
	return "a letter"
}

func quoteRune(s string) string {
	r, _ := utf8.DecodeRuneInString(s)
	return "character " + quote(string(r))
}
