package dynamodb

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// Lanes.
//
// Each bucket item this process writes has a lane: the item's image as
// last seen (image.go), and a queue of parts, requests waiting for a write
// to the item. One write per item is in flight from this process at a
// time; the parts that arrive meanwhile go out together in the next one,
// simulated in their order (plan.go). So the writes of one process never
// race each other on an item (each is planned from the image the previous
// one returned, and takes the path it assumed), and a hot item takes one
// write per round trip however many goroutines acquire from it: a batch of
// n parts costs one write. Writes of other processes can still make a
// write's condition fail; the failed write returns the item, and the batch
// is planned again from it.

// part is one request for one bucket item. The lane reads req while the
// part is queued or written, and writes the outcome (and req's Observed)
// only once it has claimed the part, which a caller that gave up first
// prevents by abandoning it.
type part struct {
	req    *store.BucketRequest // the limits at the item's parameters
	now    int64
	shards int  // the layout it was planned for
	event  bool // a debit counts one acquire (ev)
	budget *budget

	// Set by the lane, once claimed, before done is closed.
	granted   bool
	pressured bool // the write drove the item's write-pressure meter into debt
	err       error

	state atomic.Int32 // partWaiting, partClaimed or partAbandoned
	done  chan struct{}
}

const (
	partWaiting int32 = iota
	partClaimed
	partAbandoned
)

// outcome is what the lane decided for a part.
type outcome struct {
	granted   bool
	pressured bool
	observed  []bucket.State // per limit of req
	err       error
}

func newPart(req *store.BucketRequest, now int64, shards int, event bool, b *budget) *part {
	return &part{req: req, now: now, shards: shards, event: event, budget: b, done: make(chan struct{})}
}

// compatible reports whether p can share a write with q: the same layout,
// and the same limits with the same parameters (amounts and checks may
// differ).
func (p *part) compatible(q *part) bool {
	if p.shards != q.shards || len(p.req.Limits) != len(q.req.Limits) {
		return false
	}
	for i := range p.req.Limits {
		if p.req.Limits[i].Name != q.req.Limits[i].Name || p.req.Limits[i].Params != q.req.Limits[i].Params {
			return false
		}
	}
	return true
}

// batch is the parts one write serves, in order.
type batch struct {
	id    itemID
	parts []*part
}

// maxBatch bounds the parts of one write.
const maxBatch = 64

// lane is one bucket item's image and queue.
type lane struct {
	mu      sync.Mutex
	img     *image // nil: not known
	running bool   // a goroutine serves the queue, or a holder holds the lane
	queue   []*part
	gone    bool          // dropped from the table: look it up again
	handoff chan struct{} // closed when the goroutine serving the queue hands the lane to a holder
}

// take removes the next batch from the queue: the first waiting part and
// the waiting parts compatible with it, in order. Abandoned parts are
// dropped. It returns nil when nothing waits.
func (l *lane) take(id itemID) *batch {
	var b *batch
	kept := l.queue[:0]
	for _, p := range l.queue {
		switch {
		case p.state.Load() != partWaiting:
			// abandoned before its write: nothing to undo
		case b == nil:
			b = &batch{id: id, parts: []*part{p}}
		case len(b.parts) < maxBatch && b.parts[0].compatible(p):
			b.parts = append(b.parts, p)
		default:
			kept = append(kept, p)
		}
	}
	clear(l.queue[len(kept):])
	l.queue = kept
	return b
}

// submit queues p on the lane of id and waits for its outcome.
//
// On an idle lane, the caller writes p itself, at once and with its own
// context (the common case: no goroutine in between); requests that
// arrive meanwhile queue, and a goroutine serves them once the write has
// returned. If the caller's context ends during that write, the write's
// outcome is not known (as with any call the context cuts short): the
// caller gets the context's error, and the debit may have been applied.
//
// A queued part is served by that goroutine, with the others queued, with
// no caller's context (each of its calls is bounded by the call timeout,
// timeout.go). If ctx ends first, p is abandoned and submit returns ctx's
// error: a write under way still completes, and the lane gives back what
// it debited for p.
//
// A queued part waits no longer than the call timeout (timeout.go) for
// its outcome, whatever its context: the writes before it are bounded by
// it too, but a part can wait behind one and then be written in the next,
// and a caller must not wait twice the timeout behind a stalled store. It
// is then abandoned as when ctx ends, and submit returns ErrTimeout.
//
// A caller told that its request failed, by an error or by its context
// ending, was therefore never debited, or was given back what was debited
// (finish: the part's state decides, once, between its outcome and its
// refund), or its write's outcome is not known (a write whose answer never
// came, the caller's or its batch's): then the debit may stand, and it is
// accounted as any debit (the bucket's balance and its consumed counter
// hold it; the item's image is dropped, and the next write, planned from a
// guess, meets the stored item). Such a debit, and a refund that fails,
// cost the caller tokens it did not use: under-admission, never
// over-admission.
func (en *engine) submit(ctx context.Context, id itemID, p *part) error {
	for {
		l := en.lanes.get(id)
		l.mu.Lock()
		if l.gone {
			l.mu.Unlock()
			continue
		}
		l.queue = append(l.queue, p)
		if !l.running {
			l.running = true
			b, img := l.take(id), l.img
			l.mu.Unlock()
			en.served(l, id, en.serve(ctx, b, img))
			return nil
		}
		l.mu.Unlock()
		break
	}
	var expired <-chan time.Time
	if en.callTimeout > 0 {
		t := time.NewTimer(en.callTimeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		if p.state.CompareAndSwap(partWaiting, partAbandoned) {
			return ctx.Err()
		}
		<-p.done
	case <-expired:
		if p.state.CompareAndSwap(partWaiting, partAbandoned) {
			return fmt.Errorf("%w (%v): bucket %s/%s: waiting for this process's writes before it",
				ErrTimeout, en.callTimeout, id.key.Entity, id.key.Resource)
		}
		<-p.done
	}
	return nil
}

// served records the image a batch's write left (nil: not known) and
// decides what the lane does next: a holder waiting for it takes it
// (hold), requests queued meanwhile are served by a goroutine (run), or it
// falls idle.
func (en *engine) served(l *lane, id itemID, img *image) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.img = img
	switch {
	case l.handoff != nil:
		close(l.handoff)
		l.handoff = nil
	case len(l.queue) > 0:
		go en.run(l, id)
	default:
		l.running = false
	}
}

// run serves a lane's queue, batch after batch, until served lets go.
func (en *engine) run(l *lane, id itemID) {
	l.mu.Lock()
	b, img := l.take(id), l.img
	l.mu.Unlock()
	if b == nil {
		en.served(l, id, img) // every queued part was abandoned
		return
	}
	en.served(l, id, en.serve(context.Background(), b, img))
}

// hold takes the lane of id for a write of its own (a split): it waits
// until this process's write under way there has returned, and keeps the
// queued ones waiting until release. Holders of one lane must not overlap
// (splits of one bucket run one at a time).
func (en *engine) hold(id itemID) *lane {
	for {
		l := en.lanes.get(id)
		l.mu.Lock()
		switch {
		case l.gone:
			l.mu.Unlock()
			continue
		case !l.running:
			l.running = true
			l.mu.Unlock()
			return l
		}
		if l.handoff == nil {
			l.handoff = make(chan struct{})
		}
		wait := l.handoff
		l.mu.Unlock()
		<-wait
		return l
	}
}

// release gives a held lane back, with img as what the holder's write left
// (nil: not known), and serves what queued meanwhile.
func (en *engine) release(l *lane, id itemID, img *image) { en.served(l, id, img) }

// finish hands p its outcome. A part abandoned meanwhile (its caller's
// context ended) that was granted is given back.
func (en *engine) finish(id itemID, p *part, o outcome) {
	if p.state.CompareAndSwap(partWaiting, partClaimed) {
		p.granted, p.pressured, p.err = o.granted, o.pressured, o.err
		for j := range o.observed {
			p.req.Limits[j].Observed = o.observed[j]
		}
		close(p.done)
		return
	}
	if o.granted && o.err == nil {
		_ = en.applyDeltas(context.Background(), id.ns, undoDeltas(p.req, id.shard), -1)
	}
}

// undoDeltas returns the refunds of what br debited on shard.
func undoDeltas(br *store.BucketRequest, shard int) []store.Delta {
	var undo []store.Delta
	for _, lr := range br.Limits {
		if lr.Amount > 0 {
			undo = append(undo, store.Delta{Key: br.Key, Limit: lr.Name, Amount: -lr.Amount, Placement: shard, Params: lr.Params})
		}
	}
	return undo
}
