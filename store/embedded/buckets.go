package embedded

import (
	"context"
	"hash/maphash"
	"slices"
	"sync"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Bucket state lives in memory, as in the memory backend: 256 shards, each
// with its own lock, so acquires on different keys run in parallel, and a
// cascade locks its shards in index order (atomic and deadlock-free). The
// memory copy is authoritative while the store is open (Open loads every
// record); the file catches up at each flush. Each shard lists the buckets
// changed since the last flush and those forgotten, so a flush costs what
// changed, not what exists.
//
// A cascade also holds Store.cut for reading while it runs. A flush
// snapshot holds it for writing while it visits the shards one at a time,
// so no cascade is half-applied in a snapshot, while single-bucket acquires
// (which are atomic under their shard lock alone) wait for the snapshot
// only while it holds their own shard.
const shardCount = 256

type shard struct {
	mu      sync.Mutex
	buckets map[bucketID]*entry
	// dirty lists the entries changed since the last flush snapshot
	// (each once: see entry.listed); gone the ids forgotten since then,
	// whose records the flush deletes from the file.
	dirty []*entry
	gone  []bucketID
	// created counts buckets created since the last sweep (see maybeSweep).
	created int
	_       [32]byte // keep neighbouring shards' locks off one cache line
}

type bucketID struct{ ns, entity, resource string }

// entry is one bucket in memory. Its fields are guarded by its shard's lock.
type entry struct {
	rec *store.Record
	id  bucketID
	// listed is set while the entry is in its shard's dirty list.
	listed bool
	// removed is set once the entry left its shard's map (forgotten,
	// deleted or purged): a flush must never write it again.
	removed bool
}

// shardOf spreads buckets by entity, as the memory backend does.
func (s *Store) shardOf(id bucketID) int {
	return int(maphash.String(s.seed, id.entity) % shardCount)
}

// checkRequest rejects ids the file cannot hold before anything changes in
// memory: a record a flush cannot write would block every later flush.
func checkRequest(ns string, req *store.ConsumeRequest) error {
	if err := checkNS(ns); err != nil {
		return err
	}
	for i := range req.Buckets {
		k := req.Buckets[i].Key
		if err := checkPair("bucket", k.Entity, k.Resource); err != nil {
			return err
		}
	}
	return nil
}

// Consume implements store.Buckets.
func (s *Store) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := checkRequest(ns, req); err != nil {
		return false, err
	}
	if len(req.Buckets) == 1 {
		return s.consumeOne(ns, req)
	}
	return s.consumeCascade(ns, req)
}

func (s *Store) consumeOne(ns string, req *store.ConsumeRequest) (bool, error) {
	br := &req.Buckets[0]
	id := bucketID{ns, br.Key.Entity, br.Key.Resource}
	sh := &s.shards[s.shardOf(id)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// Checked under the lock: Close's final snapshot visits every shard
	// after setting closed, so no change can slip in after it.
	if s.closed.Load() {
		return false, ErrClosed
	}
	e := sh.entry(id, req.Now)
	ok := store.Prepare(e.rec, br, req.Now)
	if ok {
		store.Debit(e.rec, br)
	}
	sh.markDirty(e)
	sh.maybeSweep(req.Now)
	return ok, nil
}

func (s *Store) consumeCascade(ns string, req *store.ConsumeRequest) (bool, error) {
	var buf [model.MaxCascadeDepth]int
	idx := buf[:0]
	for i := range req.Buckets {
		k := req.Buckets[i].Key
		idx = append(idx, s.shardOf(bucketID{ns, k.Entity, k.Resource}))
	}
	var lockBuf [model.MaxCascadeDepth]int
	locked := append(lockBuf[:0], idx...)
	slices.Sort(locked)
	locked = slices.Compact(locked)
	s.cut.RLock()
	for _, i := range locked {
		s.shards[i].mu.Lock()
	}
	defer func() {
		for _, i := range locked {
			s.shards[i].maybeSweep(req.Now)
			s.shards[i].mu.Unlock()
		}
		s.cut.RUnlock()
	}()
	if s.closed.Load() {
		return false, ErrClosed
	}
	var entBuf [model.MaxCascadeDepth]*entry
	ents := entBuf[:0]
	ok := true
	for i := range req.Buckets {
		br := &req.Buckets[i]
		sh := &s.shards[idx[i]]
		e := sh.entry(bucketID{ns, br.Key.Entity, br.Key.Resource}, req.Now)
		ents = append(ents, e)
		sh.markDirty(e)
		if !store.Prepare(e.rec, br, req.Now) {
			ok = false
		}
	}
	if ok {
		for i := range req.Buckets {
			store.Debit(ents[i].rec, &req.Buckets[i])
		}
	}
	return ok, nil
}

// entry returns the bucket, creating an empty one; the caller holds sh.mu.
func (sh *shard) entry(id bucketID, now int64) *entry {
	e := sh.buckets[id]
	if e == nil {
		e = &entry{rec: store.NewRecord(now), id: id}
		sh.buckets[id] = e
		sh.created++
	}
	return e
}

// markDirty lists e for the next flush; the caller holds sh.mu.
func (sh *shard) markDirty(e *entry) {
	if !e.listed {
		e.listed = true
		sh.dirty = append(sh.dirty, e)
	}
}

// remove takes e out of the shard; the caller holds sh.mu. forget asks the
// next flush to delete its record from the file.
func (sh *shard) remove(e *entry, forget bool) {
	delete(sh.buckets, e.id)
	e.removed = true
	if forget {
		sh.gone = append(sh.gone, e.id)
	}
}

// minSweep keeps small shards from sweeping on every creation.
const minSweep = 64

// maybeSweep forgets idle buckets, as the memory backend does: a bucket full
// in every limit answers exactly like a missing one, so it is deleted from
// memory and, at the next flush, from the file. The caller holds sh.mu.
func (sh *shard) maybeSweep(now int64) {
	if sh.created <= max(len(sh.buckets)/2, minSweep) {
		return
	}
	for _, e := range sh.buckets {
		if store.IsFull(e.rec, now) {
			sh.remove(e, true)
		}
	}
	sh.created = 0
}

// ApplyDeltas implements store.Buckets.
func (s *Store) ApplyDeltas(ctx context.Context, ns string, deltas []store.Delta) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	// Deltas of one bucket are consecutive (a lease lists its limits bucket
	// by bucket): look each bucket up once.
	for i := 0; i < len(deltas); {
		k := deltas[i].Key
		j := i + 1
		for j < len(deltas) && deltas[j].Key == k {
			j++
		}
		if err := s.applyBucketDeltas(bucketID{ns, k.Entity, k.Resource}, deltas[i:j]); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// applyBucketDeltas applies deltas, all of one bucket.
func (s *Store) applyBucketDeltas(id bucketID, deltas []store.Delta) error {
	sh := &s.shards[s.shardOf(id)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	e := sh.buckets[id]
	if e == nil {
		return nil // deltas for missing buckets are dropped
	}
	for _, d := range deltas {
		if store.ApplyDelta(e.rec, d) {
			sh.markDirty(e)
		}
	}
	return nil
}

// ReadBuckets implements store.Buckets.
func (s *Store) ReadBuckets(ctx context.Context, ns string, keys []store.BucketKey) ([]*store.Record, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	out := make([]*store.Record, len(keys))
	for i, k := range keys {
		id := bucketID{ns, k.Entity, k.Resource}
		sh := &s.shards[s.shardOf(id)]
		sh.mu.Lock()
		if e := sh.buckets[id]; e != nil {
			out[i] = e.rec.Clone()
		}
		sh.mu.Unlock()
	}
	return out, nil
}

// dropBuckets removes from memory every bucket match selects, and returns
// how many. The caller holds flushMu and has already deleted the records
// from the file.
func (s *Store) dropBuckets(match func(bucketID) bool) int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for id, e := range sh.buckets {
			if match(id) {
				sh.remove(e, false)
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}
