package model

import (
	"strconv"
	"time"
)

// AuditQuery selects a page of a namespace's whole audit log (every
// entity's events, and the system's), in time order: for export.
type AuditQuery struct {
	// Since and Until bound the events' times: Since inclusive, Until
	// exclusive, each truncated to its millisecond. Zero: unbounded.
	Since, Until time.Time
	// After is the cursor: only events with ids greater than it (ids sort
	// in time order) are listed. Empty: from Since; pass the last id of a
	// page for the next.
	After string
	// Limit is at most this many events (0 means 100; at most
	// MaxAuditPage).
	Limit int
}

// Validate checks q: its limit, that its bounds are in order, and that its
// cursor is an event id (26 characters of Crockford's base 32) if set.
func (q AuditQuery) Validate() error {
	if q.Limit < 0 || q.Limit > MaxAuditPage {
		return Invalid("limit", strconv.Itoa(q.Limit), "must be between 0 and "+strconv.Itoa(MaxAuditPage))
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && q.Until.UnixMilli() <= q.Since.UnixMilli() {
		return Invalid("until", q.Until.Format(time.RFC3339Nano), "must be at least a millisecond after since")
	}
	if q.After != "" && !isEventID(q.After) {
		return Invalid("after", q.After, "must be an audit event id (26 characters of Crockford's base 32)")
	}
	return nil
}

// isEventID reports whether s has the form of an event id (a ULID in
// Crockford's base 32, upper case).
func isEventID(s string) bool {
	if len(s) != 26 || s[0] > '7' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' && c != 'I' && c != 'L' && c != 'O' && c != 'U') {
			return false
		}
	}
	return true
}
