package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate-rl/tollgate/model"
)

// UsageStore keeps usage snapshots: how much each entity consumed of each
// limit of a resource, per hour and per day. The aggregator writes them
// from the change feed; operators read them. It is a separate interface
// from Store while backends adopt it; package storetest's RunUsage is its
// conformance suite.
type UsageStore interface {
	// AddUsage adds each increment to its snapshot (created if missing),
	// each snapshot atomically and exactly once per (Source, Seq): an
	// increment whose Seq is not greater than the last one the snapshot
	// applied from the same Source is skipped, so a redelivered or replayed
	// batch changes nothing. Increments of one call may be applied
	// independently of each other, except that those of one snapshot and
	// Source are applied in the order given.
	AddUsage(ctx context.Context, ns string, incs []UsageIncrement) error
	// ListUsage returns the snapshots q selects: of an entity ordered by
	// resource, then window start; of a resource ordered by window start,
	// then entity. It returns at most q.Limit (0: MaxUsagePage), continuing
	// after q.After (the Cursor of the last snapshot of the previous page).
	// A query without an entity needs a resource, and a valid window.
	ListUsage(ctx context.Context, ns string, q UsageQuery) ([]UsageSnapshot, error)
}

// Change is one bucket change read from a store's change feed: what an
// entity's bucket consumed (net, per limit) and how many acquires it took,
// at one time.
type Change struct {
	NS       string // namespace id
	Key      BucketKey
	Time     int64            // Unix ms when the change happened
	Consumed map[string]int64 // net millitokens per limit
	Events   int64
	// Shard is the backend's part of the bucket the change wrote (a
	// DynamoDB shard), for the backend's own workers; 0 elsewhere.
	Shard int
	// Source and Seq place the change in its feed (see UsageIncrement).
	Source, Seq string
}

// ChangeFeeder is implemented by a backend whose writes reach a change
// feed of their own, outside any one process: the DynamoDB backend, whose
// table's stream the stream aggregator turns into usage. Such a store's
// usage comes from that feed, so a process must not record it as well (an
// aggregator.Recorder around it would count every write twice).
type ChangeFeeder interface {
	// FeedsChanges reports whether the store's writes reach a change feed
	// of its own.
	FeedsChanges() bool
}

// MaxUsagePage bounds one page of ListUsage.
const MaxUsagePage = model.MaxUsagePage

// Window is the length of a usage snapshot's window. See model.Window.
type Window = model.Window

// Windows.
const (
	Hourly = model.Hourly
	Daily  = model.Daily
)

// UsageKey names one snapshot.
type UsageKey struct {
	Entity   string
	Resource string
	Window   Window
	Start    int64 // Unix ms; a multiple of the window's length
}

// UsageIncrement is one change to a snapshot.
type UsageIncrement struct {
	Key UsageKey
	// Consumed is the net millitokens consumed per limit (negative for
	// refunds).
	Consumed map[string]int64
	// Events counts acquires: one per acquire, however many limits it
	// touched; adjustments and rollbacks count none.
	Events int64
	// Source names the feed the increment comes from (e.g. a stream shard)
	// and Seq orders the increments of one Source: later ones compare
	// greater as strings (fixed-width, e.g. zero-padded).
	Source string
	Seq    string
	// Expires is when the snapshot may be deleted (its retention), Unix ms;
	// the greatest value given wins (see UsageQuery.Now).
	Expires int64
}

// UsageSnapshot is a stored snapshot.
type UsageSnapshot struct {
	Key      UsageKey
	Consumed map[string]int64 // net millitokens per limit
	Events   int64
	Expires  int64
	// Cursor resumes a listing after this snapshot (UsageQuery.After).
	Cursor string
}

// UsageQuery selects snapshots of one entity, or of every entity of one
// resource (Entity empty), in one window type, with Start in [From, To).
type UsageQuery struct {
	Entity   string
	Resource string // with Entity: only this resource; empty: all
	Window   Window
	From, To int64 // Unix ms
	After    string
	Limit    int
	// Now, if not zero, hides snapshots that expired at or before it.
	Now int64
}

// Validate checks a usage key: a known window, a start on its boundary,
// and an entity and resource.
func (k UsageKey) Validate() error {
	switch {
	case !k.Window.Valid():
		return model.Invalid("window", string(k.Window), "want hour or day")
	case k.Window.Start(k.Start) != k.Start:
		return model.Invalid("start", strconv.FormatInt(k.Start, 10), "not the start of a "+string(k.Window))
	}
	if err := model.ValidateEntityID(k.Entity); err != nil {
		return err
	}
	return model.ValidateResource(k.Resource)
}

// Validate checks a query and returns its page size.
func (q UsageQuery) Validate() (int, error) {
	switch {
	case q.Entity == "" && q.Resource == "":
		return 0, model.Invalid("entity", "", "a usage query needs an entity or a resource")
	case !q.Window.Valid():
		return 0, model.Invalid("window", string(q.Window), "want hour or day")
	case q.Limit < 0 || q.Limit > MaxUsagePage:
		return 0, model.Invalid("limit", strconv.Itoa(q.Limit), "want 1 to "+strconv.Itoa(MaxUsagePage))
	}
	if q.After != "" {
		if _, _, err := splitCursor(q.After); err != nil {
			return 0, err
		}
	}
	if q.Limit == 0 {
		return MaxUsagePage, nil
	}
	return q.Limit, nil
}

// ByEntity reports whether q lists one entity's snapshots (else one
// resource's).
func (q UsageQuery) ByEntity() bool { return q.Entity != "" }

// Matches reports whether q selects snapshot k that expires at expires.
func (q UsageQuery) Matches(k UsageKey, expires int64) bool {
	switch {
	case k.Window != q.Window || k.Start < q.From || k.Start >= q.To:
		return false
	case q.Now != 0 && expires != 0 && expires <= q.Now:
		return false
	case q.ByEntity():
		return k.Entity == q.Entity && (q.Resource == "" || k.Resource == q.Resource)
	}
	return k.Resource == q.Resource
}

// UsageCursor is the cursor of a snapshot in the listing of q: its place
// in the listing's order. '#' is in neither entity ids nor resources and
// sorts before every character they use, so the cursors sort as the keys.
func (q UsageQuery) UsageCursor(k UsageKey) string {
	start := fmt.Sprintf("%020d", k.Start)
	if q.ByEntity() {
		return k.Resource + "#" + start
	}
	return start + "#" + k.Entity
}

// IsAfter reports whether snapshot k comes after q.After in the listing.
func (q UsageQuery) IsAfter(k UsageKey) bool {
	return q.After == "" || q.UsageCursor(k) > q.After
}

func splitCursor(c string) (string, string, error) {
	a, b, ok := strings.Cut(c, "#")
	if !ok || a == "" || b == "" || strings.ContainsAny(c, "\x00") {
		return "", "", model.Invalid("after", c, "not a cursor of this listing")
	}
	return a, b, nil
}

// SortUsage orders snapshots as q lists them.
func (q UsageQuery) SortUsage(snaps []UsageSnapshot) {
	slices.SortFunc(snaps, func(a, b UsageSnapshot) int {
		return strings.Compare(q.UsageCursor(a.Key), q.UsageCursor(b.Key))
	})
}
