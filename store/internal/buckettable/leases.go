package buckettable

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// leaseKey names a durable lease record: a namespace id and a lease id.
type leaseKey struct{ ns, id string }

// leaseTable holds the table's durable lease records (store.Leases). A
// record is created while its debit's shards are locked, and deleted while
// its ending's shards are locked, so that no reader sees a debit without its
// record or a record without its debit; the lock order is the shards (and
// cut, in a tracking table), then mu. Stored records are never changed in
// place: an update replaces the pointer, so a pointer read under mu says
// which version it was.
type leaseTable struct {
	mu      sync.Mutex
	records map[leaseKey]*store.LeaseRecord
	// dirty lists, in a tracking table, the records created, changed or
	// deleted since the last Drain.
	dirty map[leaseKey]struct{}
	// ended holds the tombstones by KeepUntil, so that those past it are
	// deleted as time goes (see sweepEnded). An entry whose record has
	// been replaced or deleted since is skipped.
	ended tombstones
}

// tombstone is an entry of leaseTable.ended.
type tombstone struct {
	k   leaseKey
	rec *store.LeaseRecord
}

// tombstones is a min-heap of tombstones by KeepUntil. It is written out
// rather than through container/heap, whose Push boxes every entry: an
// allocation on every durable lease's ending.
type tombstones []tombstone

// push adds ts.
func (h *tombstones) push(ts tombstone) {
	*h = append(*h, ts)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p].rec.KeepUntil <= s[i].rec.KeepUntil {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

// pop removes and returns the entry of the least KeepUntil; h is not
// empty.
func (h *tombstones) pop() tombstone {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0], s[n] = s[n], tombstone{}
	s = s[:n]
	for i := 0; ; {
		l, least := 2*i+1, i
		if l < n && s[l].rec.KeepUntil < s[least].rec.KeepUntil {
			least = l
		}
		if r := l + 1; r < n && s[r].rec.KeepUntil < s[least].rec.KeepUntil {
			least = r
		}
		if least == i {
			break
		}
		s[i], s[least] = s[least], s[i]
		i = least
	}
	*h = s
	return top
}

func (lt *leaseTable) init() {
	lt.records = make(map[leaseKey]*store.LeaseRecord)
	lt.dirty = make(map[leaseKey]struct{})
}

// setLease stores rec (nil: deletes) under k; the caller holds
// t.leases.mu. A tombstone is queued for its deletion.
func (t *Table) setLease(k leaseKey, rec *store.LeaseRecord) {
	lt := &t.leases
	if rec == nil {
		delete(lt.records, k)
	} else {
		lt.records[k] = rec
		if rec.Ended() {
			lt.ended.push(tombstone{k, rec})
		}
	}
	if t.track {
		lt.dirty[k] = struct{}{}
	}
}

// sweepEnded deletes the tombstones past their KeepUntil at now; the
// caller holds t.leases.mu.
func (t *Table) sweepEnded(now int64) {
	lt := &t.leases
	for len(lt.ended) > 0 && lt.ended[0].rec.KeepUntil <= now {
		ts := lt.ended.pop()
		if lt.records[ts.k] == ts.rec {
			t.setLease(ts.k, nil)
		}
	}
}

// createLease stores rec for a granted consume (the caller hands it over:
// store.ConsumeRequest.Lease); the caller holds lt.mu and the consume's
// locks.
func (t *Table) createLease(ns string, rec *store.LeaseRecord, now int64) {
	t.sweepEnded(now)
	t.setLease(leaseKey{ns, rec.ID}, rec)
}

// leaseExists reports an existing record of id, a tombstone included
// unless it is gone by now; the caller holds lt.mu.
func (t *Table) leaseExists(ns, id string, now int64) error {
	if rec := t.leases.records[leaseKey{ns, id}]; rec != nil && !rec.Gone(now) {
		return fmt.Errorf("lease %q: %w", id, model.ErrLeaseExists)
	}
	return nil
}

// GetLease returns a copy of the record of lease id, or false.
func (t *Table) GetLease(ns, id string) (store.LeaseRecord, bool) {
	lt := &t.leases
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if rec := lt.records[leaseKey{ns, id}]; rec != nil {
		return rec.Clone(), true
	}
	return store.LeaseRecord{}, false
}

// UpdateLease replaces the record rec.ID as store.Leases.UpdateLease says.
func (t *Table) UpdateLease(ns string, rec store.LeaseRecord) error {
	lt := &t.leases
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if t.closed.Load() {
		return ErrClosed
	}
	k := leaseKey{ns, rec.ID}
	switch old := lt.records[k]; {
	case old == nil:
		return fmt.Errorf("lease %q: %w", rec.ID, model.ErrLeaseNotFound)
	case old.Ended():
		return fmt.Errorf("lease %q: ended: %w", rec.ID, model.ErrLeaseConflict)
	case old.Version != rec.Version-1:
		return fmt.Errorf("lease %q: version %d, not %d: %w", rec.ID, old.Version, rec.Version-1, model.ErrLeaseConflict)
	}
	t.setLease(k, &rec) // its slices are handed over (store.Leases.UpdateLease)
	return nil
}

// EndLease deletes the record e.ID (or leaves its tombstone) and applies
// e.Deltas, atomically, as store.Leases.EndLease says (without the audit
// event, which the backend keeps).
func (t *Table) EndLease(ns string, e store.LeaseEnding) error {
	k := leaseKey{ns, e.ID}
	lt := &t.leases
	lt.mu.Lock()
	rec := lt.records[k]
	lt.mu.Unlock()
	if err := checkEnding(rec, &e); err != nil {
		return err
	}
	var buf [2 * model.MaxCascadeDepth]int
	locked := t.lockDeltas(ns, e.Deltas, buf[:0])
	defer t.unlockShards(locked)
	if t.closed.Load() {
		return ErrClosed
	}
	lt.mu.Lock()
	defer lt.mu.Unlock()
	rec = lt.records[k]
	if err := checkEnding(rec, &e); err != nil {
		return err // ended or changed since it was read
	}
	t.sweepEnded(e.At)
	if e.KeepUntil > 0 {
		tomb := e.Tombstone(rec)
		t.setLease(k, &tomb)
	} else {
		t.setLease(k, nil)
	}
	for _, d := range e.Deltas {
		id := ID{ns, d.Key.Entity, d.Key.Resource}
		h, sh := t.locate(id)
		if en := sh.find(h, id); en != nil && store.ApplyDelta(&en.rec, d) && t.track {
			sh.markDirty(id, en)
		}
	}
	return nil
}

func checkEnding(rec *store.LeaseRecord, e *store.LeaseEnding) error {
	switch {
	case rec == nil:
		return fmt.Errorf("lease %q: %w", e.ID, model.ErrLeaseNotFound)
	case rec.Ended():
		return fmt.Errorf("lease %q: ended: %w", e.ID, model.ErrLeaseConflict)
	case rec.Version != e.Version:
		return fmt.Errorf("lease %q: version %d, not %d: %w", e.ID, rec.Version, e.Version, model.ErrLeaseConflict)
	case !e.Ends(rec):
		return fmt.Errorf("lease %q: expires at %d, not by %d: %w", e.ID, rec.Expires, e.ExpiredBy, model.ErrLeaseConflict)
	}
	return nil
}

// lockDeltas locks, in index order, the shards of the buckets deltas
// change (and cut, in a tracking table, as a cascade does), and returns
// their indexes, appended to locked, for unlockShards.
func (t *Table) lockDeltas(ns string, deltas []store.Delta, locked []int) []int {
	for _, d := range deltas {
		locked = append(locked, shardOf(t.hash(ID{ns, d.Key.Entity, d.Key.Resource})))
	}
	slices.Sort(locked)
	locked = slices.Compact(locked)
	if t.track {
		t.cut.RLock()
	}
	for _, i := range locked {
		t.shards[i].mu.Lock()
	}
	return locked
}

// unlockShards undoes lockDeltas.
func (t *Table) unlockShards(locked []int) {
	for _, i := range locked {
		t.shards[i].mu.Unlock()
	}
	if t.track {
		t.cut.RUnlock()
	}
}

// ListLeases returns copies of up to q.Limit records of namespace ns that
// q selects, sorted by id, and the id after which the next page starts ("":
// none).
func (t *Table) ListLeases(ns string, q store.LeaseQuery) ([]store.LeaseRecord, string) {
	lt := &t.leases
	lt.mu.Lock()
	var sel []*store.LeaseRecord
	for k, rec := range lt.records {
		if k.ns == ns && q.Selects(rec) {
			sel = append(sel, rec)
		}
	}
	lt.mu.Unlock()
	slices.SortFunc(sel, func(a, b *store.LeaseRecord) int { return strings.Compare(a.ID, b.ID) })
	next := ""
	if len(sel) > q.Limit {
		sel = sel[:q.Limit]
		next = sel[q.Limit-1].ID
	}
	out := make([]store.LeaseRecord, len(sel))
	for i, rec := range sel {
		out[i] = rec.Clone()
	}
	return out, next
}

// DeleteLeases removes every record of namespace ns (a purge) and returns
// how many. Like Delete, it lists nothing for Drain: the caller deletes the
// durable copies itself.
func (t *Table) DeleteLeases(ns string) int {
	lt := &t.leases
	lt.mu.Lock()
	defer lt.mu.Unlock()
	n := 0
	for k := range lt.records {
		if k.ns == ns {
			delete(lt.records, k)
			delete(lt.dirty, k)
			n++
		}
	}
	return n // their tombstones' entries in ended are skipped when popped
}

// PutLease stores rec without listing it as changed: it loads a record
// whose durable copy is rec.
func (t *Table) PutLease(ns string, rec store.LeaseRecord) {
	lt := &t.leases
	lt.mu.Lock()
	k := leaseKey{ns, rec.ID}
	lt.records[k] = &rec
	if rec.Ended() {
		lt.ended.push(tombstone{k, &rec})
	}
	lt.mu.Unlock()
}

// drainLeases hands over the records listed since the last Drain: lease is
// called with each created or changed record, or nil for a deleted one. The
// caller holds cut for writing.
func (t *Table) drainLeases(lease func(ns, id string, rec *store.LeaseRecord)) {
	lt := &t.leases
	lt.mu.Lock()
	defer lt.mu.Unlock()
	for k := range lt.dirty {
		lease(k.ns, k.id, lt.records[k])
	}
	clear(lt.dirty)
}

// RequeueLease lists a record again for the next Drain, for a caller whose
// write of a drained record failed.
func (t *Table) RequeueLease(ns, id string) {
	lt := &t.leases
	lt.mu.Lock()
	lt.dirty[leaseKey{ns, id}] = struct{}{}
	lt.mu.Unlock()
}
