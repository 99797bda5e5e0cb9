package store

import (
	"context"
	"strconv"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/tollgate-rl/tollgate/model"
)

// AuditLog is the namespace-wide view of the audit log, for export and
// retention: every event of a namespace (whatever its entity) by time, and
// the sweep that drops the oldest. Every backend of the module implements
// it; Admin.AuditRange, Admin.SetAuditRetention and the reconciler's
// sweep need it. It is optional, as BucketLister is, so that a wrapper of
// a store that does not forward it still compiles.
type AuditLog interface {
	// ListAuditRange returns up to q.Limit (1 to MaxAuditRangePage)
	// events of namespace ns, every entity's, in id order (which is time
	// order: ids are ULIDs, whose millisecond is the event's time), whose
	// ids lie in q's bounds (AuditRange.Bounds). A backend whose indexes
	// are eventually consistent may miss an event written a moment ago.
	ListAuditRange(ctx context.Context, ns string, q AuditRange) ([]model.AuditEvent, error)
	// SweepAudit deletes up to limit events of namespace ns whose time
	// (their id's millisecond) is before before, oldest first, from every
	// listing, and returns how many it deleted: fewer than limit when none
	// older is left (a backend with an eventually consistent index may
	// leave one written a moment before).
	SweepAudit(ctx context.Context, ns string, before time.Time, limit int) (int, error)
	// SetAuditRetention sets the AuditRetention of the namespace named
	// name. It fails with model.ErrNamespaceNotFound if there is none.
	SetAuditRetention(ctx context.Context, name string, d time.Duration) error
}

// MaxAuditRangePage bounds one page of ListAuditRange.
const MaxAuditRangePage = model.MaxAuditPage

// AuditRange selects a page of a namespace's audit log.
type AuditRange struct {
	// Since and Until bound the events' times: Since inclusive, Until
	// exclusive, each truncated to its millisecond (event times are whole
	// milliseconds). Zero: unbounded.
	Since, Until time.Time
	// After is the cursor: only events with ids greater than it are
	// listed (empty: from Since). Pass the last id of a page for the next.
	After string
	// Limit is at most this many events (1 to MaxAuditRangePage).
	Limit int
}

// Validate checks q's limit and that its bounds are in order.
func (q AuditRange) Validate() error {
	if q.Limit < 1 || q.Limit > MaxAuditRangePage {
		return model.Invalid("limit", strconv.Itoa(q.Limit), "must be 1 to "+strconv.Itoa(MaxAuditRangePage))
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return model.Invalid("until", q.Until.Format(time.RFC3339Nano), "must be after since")
	}
	return nil
}

// Bounds returns q as a range of ids: an event is in it if after < id <
// before. after is the greater of q.After and the greatest id of the
// millisecond before Since (empty when neither bounds); before is the
// least id of Until's millisecond, or "~" (above every id) for no bound.
func (q AuditRange) Bounds() (after, before string) {
	after = q.After
	if !q.Since.IsZero() {
		if s := AuditIDBefore(q.Since); s > after {
			after = s
		}
	}
	before = "~"
	if !q.Until.IsZero() {
		before = AuditIDAt(q.Until)
	}
	return after, before
}

// AuditIDAt returns the least event id (ULID) of t's millisecond: every
// event at t or later has an id at least this, every earlier one less.
// Times before 1970 give the least id, times beyond a ULID's range "~".
func AuditIDAt(t time.Time) string {
	ms := t.UnixMilli()
	switch {
	case ms <= 0:
		return ulid.ULID{}.String()
	case uint64(ms) > ulid.MaxTime():
		return "~"
	}
	var u ulid.ULID
	_ = u.SetTime(uint64(ms))
	return u.String()
}

// AuditIDBefore returns the greatest event id of the millisecond before t:
// an event's id is greater than it if and only if the event is at t or
// later. It is empty (below every id) for t at or before 1970.
func AuditIDBefore(t time.Time) string {
	ms := t.UnixMilli()
	switch {
	case ms <= 0:
		return ""
	case uint64(ms) > ulid.MaxTime()+1:
		return "~"
	}
	var u ulid.ULID
	_ = u.SetTime(uint64(ms - 1))
	for i := 6; i < len(u); i++ {
		u[i] = 0xff
	}
	return u.String()
}
