package memory

import (
	"context"
	"maps"
	"sync"

	"github.com/tollgate-rl/tollgate/store"
)

var _ store.UsageStore = (*Store)(nil)

// usageTable holds usage snapshots; one lock is enough for the
// aggregator's batched writes.
type usageTable struct {
	mu    sync.Mutex
	snaps map[usageID]*usageSnap
	// created counts snapshots made since the last sweep.
	created int
}

// minUsageSweep keeps a small table from sweeping on every creation.
const minUsageSweep = 64

type usageID struct {
	ns  string
	key store.UsageKey
}

type usageSnap struct {
	consumed map[string]int64
	events   int64
	expires  int64
	applied  map[string]string // source -> last Seq applied
}

// AddUsage implements store.UsageStore.
func (s *Store) AddUsage(ctx context.Context, ns string, incs []store.UsageIncrement) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, in := range incs {
		if err := in.Key.Validate(); err != nil {
			return err
		}
	}
	u := &s.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.snaps == nil {
		u.snaps = map[usageID]*usageSnap{}
	}
	for _, in := range incs {
		id := usageID{ns, in.Key}
		sn := u.snaps[id]
		if sn == nil {
			sn = &usageSnap{consumed: map[string]int64{}, applied: map[string]string{}}
			u.snaps[id] = sn
			u.created++
		}
		if last, ok := sn.applied[in.Source]; ok && in.Seq <= last {
			continue
		}
		sn.applied[in.Source] = in.Seq
		for limit, n := range in.Consumed {
			sn.consumed[limit] += n
		}
		sn.events += in.Events
		sn.expires = max(sn.expires, in.Expires)
	}
	if u.created > max(len(u.snaps)/2, minUsageSweep) {
		u.sweep(s.clock.Now().UnixMilli())
	}
	return nil
}

// sweep deletes the snapshots expired at now; the caller holds u.mu.
// AddUsage calls it once the table has created as many snapshots as half
// of what it holds, so that memory follows the retention at an amortised
// constant cost per snapshot. Queries hide expired snapshots in between
// (UsageQuery.Now).
func (u *usageTable) sweep(now int64) {
	for id, sn := range u.snaps {
		if sn.expires != 0 && sn.expires <= now {
			delete(u.snaps, id)
		}
	}
	u.created = 0
}

// ListUsage implements store.UsageStore.
func (s *Store) ListUsage(ctx context.Context, ns string, q store.UsageQuery) ([]store.UsageSnapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit, err := q.Validate()
	if err != nil {
		return nil, err
	}
	u := &s.usage
	u.mu.Lock()
	var out []store.UsageSnapshot
	for id, sn := range u.snaps {
		if id.ns == ns && q.Matches(id.key, sn.expires) && q.IsAfter(id.key) {
			out = append(out, store.UsageSnapshot{Key: id.key, Consumed: maps.Clone(sn.consumed), Events: sn.events,
				Expires: sn.expires, Cursor: q.UsageCursor(id.key)})
		}
	}
	u.mu.Unlock()
	q.SortUsage(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// drop deletes the snapshots that match, reporting how many.
func (u *usageTable) drop(match func(usageID) bool) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for id := range u.snaps {
		if match(id) {
			delete(u.snaps, id)
			n++
		}
	}
	return n
}
