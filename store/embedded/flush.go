package embedded

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A flush writes bucket state to the file in three steps:
//
//  1. snapshot: holding cut for writing (no cascade runs), visit the
//     shards one at a time: take each shard's dirty and forgotten lists and
//     encode the dirty records. Every cascade is wholly in or wholly out of
//     the snapshot; every single-bucket change is in it or not;
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
	dels []bucketID
}

// pendingPut is a record to write: key slab[start:mid], value slab[mid:end].
type pendingPut struct {
	e               *entry
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
	b := &s.batch
	start := time.Now()
	s.snapshot(b)
	pause := time.Since(start)
	if len(b.puts) == 0 && len(b.dels) == 0 {
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
}

// snapshot fills b with every shard's changes and clears the shards' lists.
func (s *Store) snapshot(b *flushBatch) {
	s.cut.Lock()
	defer s.cut.Unlock()
	for i := range s.shards {
		s.shards[i].take(b)
	}
}

// take moves the shard's changes into b.
func (sh *shard) take(b *flushBatch) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b.dels = append(b.dels, sh.gone...)
	clear(sh.gone)
	sh.gone = sh.gone[:0]
	for _, e := range sh.dirty {
		e.listed = false
		if e.removed {
			continue
		}
		p := pendingPut{e: e, start: len(b.slab)}
		b.slab = append(appendLP(b.slab, e.id.entity), e.id.resource...)
		p.mid = len(b.slab)
		b.slab = appendRecord(b.slab, e.rec)
		p.end = len(b.slab)
		b.puts = append(b.puts, p)
	}
	clear(sh.dirty)
	sh.dirty = sh.dirty[:0]
}

// write applies b in one transaction: deletions first, so that a bucket
// forgotten and then created again within one interval ends up written.
func (s *Store) write(b *flushBatch) error {
	// bbolt fills pages better with keys in order.
	slices.SortFunc(b.puts, func(x, y pendingPut) int {
		return cmp.Or(cmp.Compare(x.e.id.ns, y.e.id.ns), bytes.Compare(b.slab[x.start:x.mid], b.slab[y.start:y.mid]))
	})
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, id := range b.dels {
			if bk := sub(nsBucket(tx, id.ns), bktBuckets); bk != nil {
				if err := bk.Delete(pairKey(id.entity, id.resource)); err != nil {
					return err
				}
			}
		}
		var bk *bolt.Bucket
		for i, p := range b.puts {
			if i == 0 || p.e.id.ns != b.puts[i-1].e.id.ns {
				nsb, err := nsBucketForWrite(tx, p.e.id.ns)
				if err != nil {
					return err
				}
				bk = nsb.Bucket(bktBuckets)
			}
			if err := bk.Put(b.slab[p.start:p.mid], b.slab[p.mid:p.end]); err != nil {
				return err
			}
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
		sh := &s.shards[s.shardOf(p.e.id)]
		sh.mu.Lock()
		if !p.e.removed {
			sh.markDirty(p.e)
		}
		sh.mu.Unlock()
	}
	for _, id := range b.dels {
		sh := &s.shards[s.shardOf(id)]
		sh.mu.Lock()
		sh.gone = append(sh.gone, id)
		sh.mu.Unlock()
	}
}

// load reads every bucket record of the file into memory (Open).
func (s *Store) load(tx *bolt.Tx) error {
	root := tx.Bucket(bktNS)
	return root.ForEachBucket(func(name []byte) error {
		bk := root.Bucket(name).Bucket(bktBuckets)
		if bk == nil {
			return nil
		}
		ns := string(name)
		return bk.ForEach(func(k, v []byte) error {
			entity, resource, ok := splitPair(k)
			rec, err := decodeRecord(v)
			if !ok || err != nil {
				return fmt.Errorf("namespace %q, bucket key %q: %w", ns, k, errCorrupt)
			}
			id := bucketID{ns, entity, resource}
			s.shards[s.shardOf(id)].buckets[id] = &entry{rec: rec, id: id}
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
