package embedded

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/internal/buckettable"
)

// A flush writes bucket state to the file in three steps:
//
//  1. snapshot: the bucket table's Drain keeps cascades out and visits
//     the shards one at a time; it hands over each shard's changed and
//     forgotten buckets, and the changed records are encoded under the
//     shard's lock. Every cascade is wholly in or wholly out of the
//     snapshot; every single-bucket change is in it or not;
//  2. write: one bbolt transaction deletes the forgotten records and puts
//     the encoded ones, and commits (fsync). bbolt's commit is atomic, so
//     the file holds the whole cut or the previous one;
//  3. on failure, requeue: list the entries again (with their state as it
//     is by then) and the forgotten ids, for the next flush to retry.
//
// Each shard is locked only while step 1 encodes what changed in it
// (microseconds), and cascades wait only for step 1; every acquire proceeds
// during the fsync.

// flushBatch is one snapshot. The encoded keys and records share one slab.
type flushBatch struct {
	slab []byte
	puts []pendingPut
	dels []buckettable.ID
	// leases are the lease records created, changed (val set) or deleted
	// (val nil) since the last snapshot; events the audit events of lease
	// endings (EndLease), written with the deletions they describe.
	leases []leasePut
	events []nsEvent
}

// leasePut is a lease record to write, encoded, or to delete (val nil).
type leasePut struct {
	ns, id string
	val    []byte
}

// nsEvent is an audit event of namespace ns.
type nsEvent struct {
	ns string
	ev model.AuditEvent
}

// pendingPut is a record to write: key slab[start:mid], value slab[mid:end].
type pendingPut struct {
	c               buckettable.Change
	start, mid, end int
}

// flusher writes bucket state every flush interval until Close.
func (s *Store) flusher() {
	defer close(s.done)
	t := time.NewTicker(s.opts.flushInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			// A failure reaches the observer; the changes stay queued
			// and the next tick retries them.
			_ = s.flush()
		}
	}
}

// flush writes every change made before it started and returns once it is
// committed.
func (s *Store) flush() error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	return s.flushLocked()
}

// flushLocked is flush for a caller holding flushMu.
func (s *Store) flushLocked() error {
	b := &s.batch
	start := time.Now()
	s.snapshot(b)
	b.events = append(b.events, s.unwritten...)
	s.unwritten = s.unwritten[:0]
	pause := time.Since(start)
	if len(b.puts) == 0 && len(b.dels) == 0 && len(b.leases) == 0 && len(b.events) == 0 {
		return nil
	}
	err := s.write(b)
	if err != nil {
		s.requeue(b)
		err = fmt.Errorf("embedded: flush: %w", s.mapErr(err))
	}
	if s.opts.observer != nil {
		s.opts.observer(FlushInfo{Written: len(b.puts), Deleted: len(b.dels), Pause: pause, Duration: time.Since(start), Err: err})
	}
	b.reset()
	return err
}

// reset empties b, keeping its memory, and drops its entry pointers so that
// forgotten entries can be collected.
func (b *flushBatch) reset() {
	b.slab = b.slab[:0]
	clear(b.puts)
	b.puts = b.puts[:0]
	clear(b.dels)
	b.dels = b.dels[:0]
	clear(b.leases)
	b.leases = b.leases[:0]
	clear(b.events)
	b.events = b.events[:0]
}

// snapshot fills b with every change listed in the bucket table and clears
// the table's lists.
func (s *Store) snapshot(b *flushBatch) {
	s.buckets.Drain(b.put, b.forgotten, b.lease)
}

// lease encodes a changed lease record (nil: deleted) into b; Drain calls
// it under the lease table's lock.
func (b *flushBatch) lease(ns, id string, rec *store.LeaseRecord) {
	p := leasePut{ns: ns, id: id}
	if rec != nil {
		p.val = encodeLease(rec)
	}
	b.leases = append(b.leases, p)
}

// put encodes a changed bucket into b; Drain calls it under the bucket's
// shard lock.
func (b *flushBatch) put(c buckettable.Change, rec *store.Record) {
	p := pendingPut{c: c, start: len(b.slab)}
	b.slab = append(appendLP(b.slab, c.ID.Entity), c.ID.Resource...)
	p.mid = len(b.slab)
	b.slab = appendRecord(b.slab, rec)
	p.end = len(b.slab)
	b.puts = append(b.puts, p)
}

// forgotten lists a forgotten bucket for deletion from the file.
func (b *flushBatch) forgotten(id buckettable.ID) {
	b.dels = append(b.dels, id)
}

// write applies b in one transaction: deletions first, so that a bucket
// forgotten and then created again within one interval ends up written.
func (s *Store) write(b *flushBatch) error {
	// bbolt fills pages better with keys in order.
	slices.SortFunc(b.puts, func(x, y pendingPut) int {
		return cmp.Or(cmp.Compare(x.c.ID.NS, y.c.ID.NS), bytes.Compare(b.slab[x.start:x.mid], b.slab[y.start:y.mid]))
	})
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, id := range b.dels {
			if bk := sub(nsBucket(tx, id.NS), bktBuckets); bk != nil {
				if err := bk.Delete(pairKey(id.Entity, id.Resource)); err != nil {
					return err
				}
			}
		}
		var bk *bolt.Bucket
		for i, p := range b.puts {
			if i == 0 || p.c.ID.NS != b.puts[i-1].c.ID.NS {
				nsb, err := nsBucketForWrite(tx, p.c.ID.NS)
				if err != nil {
					return err
				}
				bk = nsb.Bucket(bktBuckets)
			}
			if err := bk.Put(b.slab[p.start:p.mid], b.slab[p.mid:p.end]); err != nil {
				return err
			}
		}
		if err := writeLeases(tx, b.leases, b.events); err != nil {
			return err
		}
		if s.opts.beforeCommit != nil {
			return s.opts.beforeCommit(tx)
		}
		return nil
	})
}

// requeue lists b's changes again after a failed write. The caller holds
// flushMu, so no other flush or deletion ran since the snapshot.
func (s *Store) requeue(b *flushBatch) {
	for _, p := range b.puts {
		s.buckets.Requeue(p.c)
	}
	for _, id := range b.dels {
		s.buckets.RequeueGone(id)
	}
	for _, p := range b.leases {
		s.buckets.RequeueLease(p.ns, p.id)
	}
	s.unwritten = append(s.unwritten, b.events...)
}

// load reads every bucket and lease record of the file into memory (Open).
func (s *Store) load(tx *bolt.Tx) error {
	return readRecords(tx, s.buckets.Put, s.buckets.PutLease)
}

// readRecords decodes every bucket record and lease record of the file,
// handing each to put and putLease unless they are nil (Check only
// decodes). A record that does not decode is an error wrapping errCorrupt.
func readRecords(tx *bolt.Tx, put func(buckettable.ID, store.Record), putLease func(string, store.LeaseRecord)) error {
	root := tx.Bucket(bktNS)
	if root == nil {
		return nil
	}
	return root.ForEachBucket(func(name []byte) error {
		bk := root.Bucket(name).Bucket(bktBuckets)
		if bk == nil {
			return nil
		}
		ns := string(name)
		if err := readLeases(ns, root.Bucket(name), putLease); err != nil {
			return err
		}
		return bk.ForEach(func(k, v []byte) error {
			entity, resource, ok := splitPair(k)
			rec, err := decodeRecord(v)
			if !ok || err != nil {
				return fmt.Errorf("namespace %q, bucket key %q: %w", ns, k, errCorrupt)
			}
			if put != nil {
				put(buckettable.ID{NS: ns, Entity: entity, Resource: resource}, *rec)
			}
			return nil
		})
	})
}

// splitPair decodes a pairKey.
func splitPair(k []byte) (a, b string, ok bool) {
	n, w := binary.Uvarint(k)
	if w <= 0 || n > uint64(len(k)-w) {
		return "", "", false
	}
	return string(k[w : w+int(n)]), string(k[w+int(n):]), true
}
