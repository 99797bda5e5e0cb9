// Package buckettable is the in-memory bucket table of the memory and
// embedded backends: token-bucket records in 256 maps, each behind its own
// mutex, so that acquires on different keys run in parallel, changed under
// those locks by the shared helpers of package store.
//
// A cascade (one consume over several buckets) locks its shards in index
// order, which makes it atomic and deadlock-free. Every shard forgets its
// full buckets from time to time (see store.IsFull), so memory follows the
// buckets in use.
//
// The embedded backend also writes the table to a file. A table made with
// Options.Track lists, per shard, the buckets changed and forgotten since
// the last Drain, so that a flush costs what changed rather than what
// exists, and keeps cascades out while Drain runs, so that Drain hands over
// a consistent cut. Without it (the memory backend) a consume pays only for
// testing the option.
package buckettable

import (
	"errors"
	"hash/maphash"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

const shardCount = 256

// minSweep keeps small shards from sweeping on every creation.
const minSweep = 64

// ErrClosed is returned by Consume and ApplyDeltas once the table is closed.
var ErrClosed = errors.New("buckettable: closed")

// ID names a bucket: a namespace id, an entity and a resource.
type ID struct{ NS, Entity, Resource string }

// Options configures New.
type Options struct {
	// Track lists the buckets changed and forgotten since the last Drain,
	// for a backend that keeps a durable copy of the table. Without it
	// Drain hands over nothing.
	Track bool
}

// Table is a sharded bucket table, safe for concurrent use. Create it with
// New.
type Table struct {
	seed  maphash.Seed
	track bool
	// closed makes changes fail; it is read under the shard lock (see
	// Close).
	closed atomic.Bool
	shards [shardCount]shard
	leases leaseTable
	// cut is held, in a tracking table only, for reading by cascades and
	// for writing by Drain. It sits after the shards so that cascades
	// taking it do not bounce the cache line every consume reads.
	cut sync.RWMutex
}

type shard struct {
	mu    sync.Mutex
	table *Table // the table that holds the shard
	// buckets holds the shard's entries by the hash of their ID (see
	// Table.hash), which also picked the shard; entries whose IDs share a
	// hash are chained through entry.next. Hashing the ID once costs less
	// than a map keyed by ID, which would hash its three strings again.
	buckets map[uint64]*entry
	// n counts the entries, chained ones included.
	n int
	// created counts buckets created since the last sweep (see
	// maybeSweep).
	created int
	// dirty lists, in a tracking table, the buckets changed since the last
	// Drain (each once: see entry.listed); gone the buckets forgotten by a
	// sweep since then.
	dirty []Change
	gone  []ID
	_     [32]byte // keep neighbouring shards' locks off one cache line
}

// entry is one bucket; its shard's lock guards it. The record is held by
// value, so that a bucket costs one allocation.
type entry struct {
	id ID
	// table and h are the table that holds the entry and the hash of id,
	// which picks its shard: a request's Hint leads Consume to both.
	table *Table
	h     uint64
	// next is another entry of the shard whose ID has the same hash.
	next *entry
	rec  store.Record
	// listed is set while the entry is in its shard's dirty list.
	listed bool
	// removed is set, in a tracking table, once the entry left its shard's
	// map (forgotten or deleted): Drain must never hand it over again.
	removed bool
	// unlinked is set once the entry left its shard's map, in any table:
	// a Hint to it is stale.
	unlinked bool
}

// Change is a changed bucket handed over by Drain. It is kept only to give
// back to Requeue.
type Change struct {
	ID ID
	e  *entry
}

// New returns an empty table.
func New(o Options) *Table {
	t := &Table{seed: maphash.MakeSeed(), track: o.Track}
	t.leases.init()
	for i := range t.shards {
		t.shards[i].buckets = make(map[uint64]*entry)
		t.shards[i].table = t
	}
	return t
}

// hash is the hash of id under which its shard files it; its low bits pick
// the shard (see shardOf). The three strings are hashed independently, so
// the processor overlaps the three hashes: about half the latency of
// maphash.Comparable on the struct, or of a map keyed by ID.
func (t *Table) hash(id ID) uint64 {
	return maphash.String(t.seed, id.NS) ^
		bits.RotateLeft64(maphash.String(t.seed, id.Entity), 21) ^
		bits.RotateLeft64(maphash.String(t.seed, id.Resource), 42)
}

// shardOf returns the index of the shard of the bucket whose hash is h.
func shardOf(h uint64) int { return int(h % shardCount) }

// locate returns the hash of id and its shard.
func (t *Table) locate(id ID) (uint64, *shard) {
	h := t.hash(id)
	return h, &t.shards[shardOf(h)]
}

// Consume applies req to namespace ns as store.Buckets.Consume says: all
// or nothing, missing buckets created full, every Observed set, and
// req.Lease created with the grant. It fails only with ErrClosed, or with
// model.ErrLeaseExists, having changed nothing.
func (t *Table) Consume(ns string, req *store.ConsumeRequest) (bool, error) {
	if len(req.Buckets) != 1 || req.Lease != nil {
		return t.consumeCascade(ns, req)
	}
	br := &req.Buckets[0]
	id := ID{ns, br.Key.Entity, br.Key.Resource}
	// The entry this request left in Hint, if it is still id's in this
	// table, spares hashing id and the map lookup. Whether it is still
	// linked is read under its shard's lock, which unlinking holds.
	var sh *shard
	e, _ := br.Hint.(*entry)
	if e != nil && e.table == t {
		sh = &t.shards[shardOf(e.h)]
		sh.mu.Lock()
		if e.unlinked || e.id != id {
			sh.mu.Unlock()
			e = nil
		}
	} else {
		e = nil
	}
	var h uint64
	if e == nil {
		h, sh = t.locate(id)
		sh.mu.Lock()
	}
	if t.closed.Load() {
		sh.mu.Unlock()
		return false, ErrClosed
	}
	if e == nil {
		e = sh.entry(h, id, req.Now)
		br.Hint = e
	}
	ok := store.PrepareDebit(&e.rec, br, req.Now)
	if t.track {
		sh.markDirty(id, e)
	}
	t.maybeSweep(sh, req.Now)
	sh.mu.Unlock()
	return ok, nil
}

// consumeCascade is Consume over several buckets, or with a lease record.
// It locks their shards in index order (each once), so that two cascades
// sharing shards never wait for each other in a cycle, and holds them all
// (and the lease table, after them) while it prepares and debits, so that
// no other call sees it half-applied. A tracking table also holds cut, so
// that a debit and its lease record reach the same Drain.
func (t *Table) consumeCascade(ns string, req *store.ConsumeRequest) (bool, error) {
	var hashBuf [model.MaxCascadeDepth]uint64
	var buf [model.MaxCascadeDepth]int
	hashes, idx := hashBuf[:0], buf[:0]
	for i := range req.Buckets {
		k := req.Buckets[i].Key
		h := t.hash(ID{ns, k.Entity, k.Resource})
		hashes, idx = append(hashes, h), append(idx, shardOf(h))
	}
	var lockBuf [model.MaxCascadeDepth]int
	locked := append(lockBuf[:0], idx...)
	slices.Sort(locked)
	locked = slices.Compact(locked)
	// Drain takes cut for writing, then the shards one at a time: taking
	// cut first keeps the order the same everywhere.
	if t.track {
		t.cut.RLock()
	}
	for _, i := range locked {
		t.shards[i].mu.Lock()
	}
	defer func() {
		for _, i := range locked {
			t.maybeSweep(&t.shards[i], req.Now)
			t.shards[i].mu.Unlock()
		}
		if t.track {
			t.cut.RUnlock()
		}
	}()
	if t.closed.Load() {
		return false, ErrClosed
	}
	if req.Lease != nil {
		t.leases.mu.Lock()
		defer t.leases.mu.Unlock()
		if err := t.leaseExists(ns, req.Lease.ID, req.Now); err != nil {
			return false, err
		}
	}
	var entBuf [model.MaxCascadeDepth]*entry
	ents := entBuf[:0]
	ok := true
	for i := range req.Buckets {
		br := &req.Buckets[i]
		sh := &t.shards[idx[i]]
		id := ID{ns, br.Key.Entity, br.Key.Resource}
		e := sh.entry(hashes[i], id, req.Now)
		ents = append(ents, e)
		if t.track {
			sh.markDirty(id, e)
		}
		if !store.Prepare(&e.rec, br, req.Now) {
			ok = false
		}
	}
	if ok {
		for i := range req.Buckets {
			store.Debit(&ents[i].rec, &req.Buckets[i])
		}
		if req.Lease != nil {
			t.createLease(ns, req.Lease, req.Now)
		}
	}
	return ok, nil
}

// entry returns the bucket id, whose hash is h, creating an empty one; the
// caller holds sh.mu.
func (sh *shard) entry(h uint64, id ID, now int64) *entry {
	e := sh.find(h, id)
	if e == nil {
		e = &entry{id: id, rec: store.Record{Refilled: now}} // store.NewRecord, held by value
		sh.insert(h, e)
		sh.created++
	}
	return e
}

// find returns the bucket id, whose hash is h, or nil; the caller holds
// sh.mu.
func (sh *shard) find(h uint64, id ID) *entry {
	for e := sh.buckets[h]; e != nil; e = e.next {
		if e.id == id {
			return e
		}
	}
	return nil
}

// insert adds e, whose ID hashes to h and is not in sh; the caller holds
// sh.mu.
func (sh *shard) insert(h uint64, e *entry) {
	e.table, e.h = sh.table, h
	e.next = sh.buckets[h]
	sh.buckets[h] = e
	sh.n++
}

// unlink takes e, whose ID hashes to h, out of sh; the caller holds sh.mu.
func (sh *shard) unlink(h uint64, e *entry) {
	if head := sh.buckets[h]; head == e {
		if e.next == nil {
			delete(sh.buckets, h)
		} else {
			sh.buckets[h] = e.next
		}
	} else {
		for head.next != e {
			head = head.next
		}
		head.next = e.next
	}
	e.next = nil
	e.unlinked = true
	sh.n--
}

// each calls f for every entry of sh with its hash; f may unlink the entry
// it is given. The caller holds sh.mu.
func (sh *shard) each(f func(h uint64, e *entry)) {
	for h, e := range sh.buckets {
		for e != nil {
			next := e.next
			f(h, e)
			e = next
		}
	}
}

// markDirty lists e for the next Drain; the caller holds sh.mu.
func (sh *shard) markDirty(id ID, e *entry) {
	if !e.listed {
		e.listed = true
		sh.dirty = append(sh.dirty, Change{id, e})
	}
}

// remove takes e, whose ID hashes to h, out of sh; the caller holds sh.mu.
// In a tracking table, forget lists it for Drain as forgotten.
func (t *Table) remove(sh *shard, h uint64, e *entry, forget bool) {
	sh.unlink(h, e)
	if t.track {
		e.removed = true
		if forget {
			sh.gone = append(sh.gone, e.id)
		}
	}
}

// maybeSweep forgets idle buckets; the caller holds sh.mu and has finished
// the operation. A bucket that is full in every limit behaves exactly like
// one that does not exist (a missing bucket is created full), so it can be
// deleted without changing any answer. Once a shard has created as many
// buckets as it held at its last sweep, it deletes those full by now:
// memory stays proportional to the buckets in use, at an amortised
// constant cost per creation.
func (t *Table) maybeSweep(sh *shard, now int64) {
	if sh.created > max(sh.n/2, minSweep) {
		t.sweep(sh, now)
	}
}

// sweep forgets the buckets of sh that are full at now; the caller holds
// sh.mu.
func (t *Table) sweep(sh *shard, now int64) {
	sh.each(func(h uint64, e *entry) {
		if store.IsFull(&e.rec, now) {
			t.remove(sh, h, e, true)
		}
	})
	sh.created = 0
}

// Sweep forgets at once every bucket full at now, in every shard, as each
// shard does by itself once it has created enough buckets. The backends
// leave sweeping to the shards; tests call Sweep to forget a bucket at a
// known moment.
func (t *Table) Sweep(now int64) {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		t.sweep(sh, now)
		sh.mu.Unlock()
	}
}

// ApplyDeltas adds each delta to its limit's balance unconditionally, as
// store.Buckets.ApplyDeltas says; deltas for missing buckets or limits are
// dropped. It fails only with ErrClosed, which stops it before the next
// bucket.
func (t *Table) ApplyDeltas(ns string, deltas []store.Delta) error {
	// Deltas of one bucket are consecutive (a lease lists its limits
	// bucket by bucket): look each bucket up once.
	for i := 0; i < len(deltas); {
		k := deltas[i].Key
		id := ID{ns, k.Entity, k.Resource}
		h, sh := t.locate(id)
		sh.mu.Lock()
		if t.closed.Load() {
			sh.mu.Unlock()
			return ErrClosed
		}
		e := sh.find(h, id)
		for ; i < len(deltas) && deltas[i].Key == k; i++ {
			if e != nil && store.ApplyDelta(&e.rec, deltas[i]) && t.track {
				sh.markDirty(id, e)
			}
		}
		sh.mu.Unlock()
	}
	return nil
}

// Read returns a copy of the record of each key in namespace ns, nil where
// there is none, without refilling.
func (t *Table) Read(ns string, keys []store.BucketKey) []*store.Record {
	out := make([]*store.Record, len(keys))
	for i, k := range keys {
		id := ID{ns, k.Entity, k.Resource}
		h, sh := t.locate(id)
		sh.mu.Lock()
		if e := sh.find(h, id); e != nil {
			out[i] = e.rec.Clone()
		}
		sh.mu.Unlock()
	}
	return out
}

// List returns copies of the buckets of resource in namespace ns whose
// entity is greater than after, sorted by entity, at most limit: a page of
// store.BucketLister.ListBuckets. It scans every shard, one at a time.
func (t *Table) List(ns, resource, after string, limit int) []store.ListedBucket {
	var out []store.ListedBucket
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		sh.each(func(_ uint64, e *entry) {
			if id := e.id; id.NS == ns && id.Resource == resource && id.Entity > after {
				out = append(out, store.ListedBucket{Entity: id.Entity, Record: e.rec.Clone()})
			}
		})
		sh.mu.Unlock()
	}
	return store.FirstBuckets(out, limit)
}

// Len returns how many buckets the table holds. It locks every shard in
// turn: it is for tests and reports, not for the hot path.
func (t *Table) Len() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n += sh.n
		sh.mu.Unlock()
	}
	return n
}

// Put stores rec as bucket id, replacing any, without listing it as
// changed: it loads a bucket whose durable copy is rec. The table keeps
// rec.Limits, which the caller must not use again.
func (t *Table) Put(id ID, rec store.Record) {
	h, sh := t.locate(id)
	sh.mu.Lock()
	if old := sh.find(h, id); old != nil {
		sh.unlink(h, old)
	}
	sh.insert(h, &entry{id: id, rec: rec})
	sh.mu.Unlock()
}

// Delete removes every bucket match selects and returns how many, for a
// backend deleting an entity or a namespace. A tracking table does not
// list them for Drain: the caller deletes their durable copies itself, and
// must keep the writes of a Drain from landing after that deletion (the
// embedded backend runs both under one lock); changes of them listed
// before are never handed over.
func (t *Table) Delete(match func(ID) bool) int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		sh.each(func(h uint64, e *entry) {
			if match(e.id) {
				t.remove(sh, h, e, false)
				n++
			}
		})
		sh.mu.Unlock()
	}
	return n
}

// Drain hands over, and clears, what a tracking table listed since the
// last Drain: each bucket forgotten by a sweep to gone, each bucket
// changed (once, however often it changed) to put with its record as it
// is now, and each lease record created, changed or deleted to lease (rec
// nil: deleted). rec is valid only during the call; put and lease copy
// what they need.
//
// Drain keeps cascades out (they hold cut for reading) while it visits the
// shards one at a time, each under its lock, so what it hands over is a
// consistent cut: every cascade is wholly in it or wholly out, every
// single-bucket change (atomic under its shard lock alone) in it or not.
// A single-bucket consume waits for Drain only while Drain holds its
// shard.
func (t *Table) Drain(put func(c Change, rec *store.Record), gone func(ID), lease func(ns, id string, rec *store.LeaseRecord)) {
	t.cut.Lock()
	defer t.cut.Unlock()
	for i := range t.shards {
		t.shards[i].drain(put, gone)
	}
	t.drainLeases(lease)
}

// drain is Drain for one shard.
func (sh *shard) drain(put func(c Change, rec *store.Record), gone func(ID)) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, id := range sh.gone {
		gone(id)
	}
	clear(sh.gone)
	sh.gone = sh.gone[:0]
	for _, c := range sh.dirty {
		c.e.listed = false
		if !c.e.removed {
			put(c, &c.e.rec)
		}
	}
	clear(sh.dirty) // drop the entries, so forgotten ones can be collected
	sh.dirty = sh.dirty[:0]
}

// Requeue lists c again for the next Drain, which hands it over with its
// state as it is by then, unless the bucket was removed in between: for a
// caller whose write of a drained change failed.
func (t *Table) Requeue(c Change) {
	_, sh := t.locate(c.ID)
	sh.mu.Lock()
	if !c.e.removed {
		sh.markDirty(c.ID, c.e)
	}
	sh.mu.Unlock()
}

// RequeueGone lists id again as forgotten for the next Drain: for a caller
// whose deletion of a drained forgotten bucket failed.
func (t *Table) RequeueGone(id ID) {
	_, sh := t.locate(id)
	sh.mu.Lock()
	sh.gone = append(sh.gone, id)
	sh.mu.Unlock()
}

// Close makes every later Consume and ApplyDeltas fail with ErrClosed.
// Both check it under the lock of the shard they change, so a change that
// passed the check is complete by the time Drain visits that shard: a
// Drain started after Close returns hands over every change they made.
func (t *Table) Close() {
	t.closed.Store(true)
}

// Penalize applies req to namespace ns as store.Buckets.Penalize says
// (see store.Penalize), under the bucket's shard lock. It fails only with
// ErrClosed, having changed nothing.
func (t *Table) Penalize(ns string, req *store.PenaltyRequest) error {
	return t.update(ns, req.Bucket.Key, req.Now, func(r *store.Record) { store.Penalize(r, req) })
}

// Reset applies req to namespace ns as store.Buckets.Reset says (see
// store.Reset), under the bucket's shard lock. It fails only with
// ErrClosed, having changed nothing.
func (t *Table) Reset(ns string, req *store.ResetRequest) error {
	return t.update(ns, req.Bucket.Key, req.Now, func(r *store.Record) { store.Reset(r, req) })
}

// update runs f on the record of bucket k of ns (created at now if
// missing) under its shard lock, and marks it dirty.
func (t *Table) update(ns string, k store.BucketKey, now int64, f func(*store.Record)) error {
	id := ID{ns, k.Entity, k.Resource}
	h, sh := t.locate(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if t.closed.Load() {
		return ErrClosed
	}
	e := sh.entry(h, id, now)
	f(&e.rec)
	if t.track {
		sh.markDirty(id, e)
	}
	return nil
}
