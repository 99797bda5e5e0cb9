package tollgate

import (
	"github.com/tollgate-rl/tollgate/model"
)

// Lease handles and their batches, and the recycling of a lease's state
// behind them (see Lease and leaseData in lease.go).

// leaseKey is the state, entity and resource of leases, never changed
// once made: the handles of one state's leases of one pair share it. ent
// is the entity as the acquire found it (the config cache's entry, which
// never changes once cached).
type leaseKey struct {
	d        *leaseData
	ent      *model.Entity
	resource string
}

// getLeaseData takes recycled lease state from the limiter's pool.
func (l *Limiter) getLeaseData() *leaseData { return l.leases.Get().(*leaseData) }

// handleBatch is how many lease handles newLease allocates at once. The
// bytes per acquire are a handle's 8 whatever the batch; a larger batch
// makes fewer allocations and fewer passes filling a new batch, and a
// handle kept long after its lease ended keeps its batch in memory. 64
// handles fill the 512-byte size class exactly (a batch with pointers
// over 512 bytes would carry an 8-byte header).
const handleBatch = 64

// newLease returns a handle to d's current lease: handles[next], which
// recycle (or newLeaseData) picked, so that an acquire writes nothing
// that a handle reads unlocked. Handles are allocated handleBatch at a
// time, and each is given out once, ever: d hands out the slots of its
// batch in order and then allocates a new batch, never going back. A
// handle therefore never aliases another lease's, however long its
// holder keeps it; after its lease ended it still points at its own
// memory, which is no longer d's current handle, and answers closed. (A
// pooled handle could not do that: a holder of an ended lease would see
// the next lease through it.) A handle kept after its lease ended keeps
// its batch in memory, handleBatch handles' worth at most.
//
// ent is the lease's entity, whose ID is the one acquired for; it must
// never change (the config cache's entries do not). A new batch comes
// filled with the key (d, entity and resource) of the lease before,
// which the next leases of a recycled state usually share: comparing
// costs less than storing a pointer, which takes a write barrier while
// the collector marks.
func (d *leaseData) newLease(ent *model.Entity, resource string) *Lease {
	le := &d.handles[d.next] // never given out: nobody else reads it
	d.issued = true
	if k := le.key; k == nil || k.ent != ent || k.resource != resource {
		le.key = d.keyOf(ent, resource)
	}
	return le
}

// keyOf returns a leaseKey of d, ent and resource: the one the config
// cache's entry of ent (the entry plan found, d.entities[0]) keeps for
// d's stripe and its last resource if it is d's and that resource, or a
// new one, which the entry then keeps. An entity used with one resource,
// as most are, allocates a key once per cache entry and stripe (states
// on different processors mostly have different stripes) rather than
// once per lease.
func (d *leaseData) keyOf(ent *model.Entity, resource string) *leaseKey {
	e := d.entities[0].e
	if e == nil || &e.entity != ent {
		return &leaseKey{d: d, ent: ent, resource: resource}
	}
	slot := &e.keys[d.stripe%counterStripes]
	if k := slot.Load(); k != nil && k.d == d && k.resource == resource {
		return k
	}
	k := &leaseKey{d: d, ent: ent, resource: resource}
	slot.Store(k)
	return k
}

// nextHandle moves the current handle to a slot never given out, the
// next of the batch or the first of a new one, once the current one was
// given out (or for fresh state). The caller holds d.mu, or no handle to
// d exists.
func (d *leaseData) nextHandle() {
	if d.handles != nil && !d.issued {
		return
	}
	d.issued = false
	if d.next+1 < len(d.handles) {
		d.next++
		return
	}
	var last *leaseKey
	if d.handles != nil {
		last = d.handles[d.next].key
	}
	h := make([]Lease, handleBatch)
	for i := range h {
		h[i] = Lease{key: last}
	}
	d.handles, d.next = h, 0
}

// release is recycle for a caller that does not hold d.mu: handles to
// earlier leases of d may be looking at its current handle.
func (d *leaseData) release() {
	d.mu.Lock()
	d.recycle()
	d.mu.Unlock()
}

// recycle invalidates every handle to d and puts it back in the pool. The
// caller holds d.mu.
//
// It resets what the next call relies on and no more: pointers (the
// namespace, the request's keys, an option's limits) stay for plan to
// overwrite, or to find already in place, rather than be stored twice (see
// plan). They are meaningless until then.
func (d *leaseData) recycle() {
	if d.cause != nil {
		d.handles = nil // no current handle
		return          // a degraded lease's state: never recycled (see cause)
	}
	d.nextHandle()
	d.resetOptions()
	d.req.Buckets = d.req.Buckets[:0]
	d.holds, d.shadow = false, false
	d.kinds = d.kinds[:0]
	if d.rec != nil {
		d.rec, d.resumed, d.replayed = nil, false, false
	}
	d.committing = false
	d.lim.countMemoHits(d) // none left, but for a path that did not count them
	d.pending = d.pending[:0]
	d.deltas = d.deltas[:0]
	d.applied = d.applied[:0]
	d.lim.leases.Put(d)
}

// open locks the lease's state if the lease has not ended.
func (le *Lease) open() (*leaseData, bool) {
	d := le.key.d
	d.mu.Lock()
	if d.next >= len(d.handles) || le != &d.handles[d.next] {
		d.mu.Unlock()
		return nil, false
	}
	return d, true
}
