package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/bucket"
)

// write is one planned write of a batch: an update of an existing item or
// the creation of a missing one, and what it does to the item's meter and
// ttl (applied to the stored item it meets, to know the item after it).
type write struct {
	sim    *simulation
	update *dynamodb.UpdateItemInput
	put    *dynamodb.PutItemInput
	meter  meterOp
	ttl    ttlOp
}

// planWrite builds the write of a simulated batch: an update, or the
// creation of a missing item. A batch that needs no write gets the
// condition alone (a transaction's condition check).
func (en *engine) planWrite(b *batch, img *image, sim *simulation) *write {
	update := sim.needsWrite()
	w := &write{sim: sim, meter: en.meterOp(img, sim.last, sim.debited())}
	if !img.exists {
		after := sim.after(img)
		after.shards = b.parts[0].shards
		w.meter.apply(after, w.meter.p)
		after.ttl, after.hasTTL = en.expiry(after), true
		w.ttl = ttlOp{set: true, v: after.ttl}
		it := encodeItem(b.id, after, sim)
		describeEntity(it, b.parts[0].req.Entity)
		w.put = &dynamodb.PutItemInput{
			TableName: &en.table, Item: it,
			ConditionExpression:                 aws.String("attribute_not_exists(PK)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}
		return w
	}
	e := newExpr()
	en.updateExpr(e, b, img, sim, w, update)
	w.update = e.updateItem(&en.table, shardKey(b.id.ns, b.id.key, b.id.shard), types.ReturnValueAllOld)
	return w
}

// serve decides and writes one batch, starting from img (the lane's image;
// nil: not known), hands every part its outcome, and returns the image the
// item has after it (nil when unknown).
//
// With speculation on, the first write is planned from img, or, for an
// item not known, from a guess that it exists and is full; a stale image
// costs one failed write, which returns the item to plan again from. With
// speculation off, every batch starts from a consistent read. A batch whose
// parts the image refuses is confirmed by a read, unless the image is
// fresh (a moment old: the item a failed write returned, or a read).
func (en *engine) serve(ctx context.Context, b *batch, img *image) *image {
	fresh := false
	if !en.speculative {
		img = nil
	}
	for {
		if img == nil && !en.speculative {
			var err error
			if img, err = en.readImage(ctx, b.id); err != nil {
				en.failAll(b, err)
				return nil
			}
			fresh = true
		}
		assumed := img
		if assumed == nil {
			assumed = guess(b)
		}
		if !en.layoutOK(b, assumed) {
			return img
		}
		sim := simulate(assumed, b, !fresh)
		if !sim.needsWrite() {
			if fresh || !sim.stateful {
				en.decide(b, sim, false)
				return img
			}
			var err error
			if img, err = en.readImage(ctx, b.id); err != nil {
				en.failAll(b, err)
				return nil
			}
			fresh = true
			continue
		}
		w := en.planWrite(b, assumed, sim)
		old, ok, err := en.send(ctx, b, w)
		switch {
		case err != nil:
			en.failAll(b, err)
			return nil
		case ok:
			return en.applied(b, w, old)
		}
		// The write lost: old is the item it met. Plan again from it.
		img, fresh = old, true
		if !en.retryBatch(ctx, b) {
			return img
		}
	}
}

// guess is the image assumed of an item not known: it exists, every
// limit of the batch with the batch's parameters, full since before the
// batch's first time.
func guess(b *batch) *image {
	first := b.parts[0].now
	for _, p := range b.parts {
		first = min(first, p.now)
	}
	img := &image{exists: true, guessed: true, shards: b.parts[0].shards, rf: first}
	for _, lr := range b.parts[0].req.Limits {
		l := imageLimit{name: lr.Name, params: lr.Params, tk: lr.Params.Capacity}
		if l.refills() {
			l.ft = bucket.TickAt(first, lr.Params)
		}
		img.limits = append(img.limits, l)
	}
	return img
}

// layoutOK checks that the batch was planned for the item's layout (its
// shard count, and a missing item only where a new bucket is created). If
// not, it corrects the cached shard count and hands every part errReplan.
func (en *engine) layoutOK(b *batch, img *image) bool {
	n := b.parts[0].shards
	bid := bucketID{b.id.ns, b.id.key}
	switch {
	case img.exists && img.shards != n:
		en.shardCounts.store(bid, img.shards)
	case !img.exists && (b.id.shard != 0 || n != 1):
		en.shardCounts.forget(bid)
	default:
		return true
	}
	en.failAll(b, errReplan)
	return false
}

// send makes the write. ok reports that it was applied, and old is then
// the item it met (absent for a creation); a failed condition returns the
// item that failed it (absent if there is none).
func (en *engine) send(ctx context.Context, b *batch, w *write) (old *image, ok bool, err error) {
	var attrs item
	if w.put != nil {
		_, err = en.db.PutItem(ctx, w.put)
	} else {
		var out *dynamodb.UpdateItemOutput
		if out, err = en.db.UpdateItem(ctx, w.update); err == nil {
			attrs = out.Attributes
		}
	}
	var cond *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &cond):
		attrs = cond.Item
	case err != nil:
		return nil, false, fmt.Errorf("dynamodb: write bucket %s/%s: %w", b.id.key.Entity, b.id.key.Resource, err)
	default:
		ok = true
	}
	old, err = itemImage(attrs)
	return old, ok, err
}

// applied finishes a batch whose write was applied to old: the outcomes
// are those of the simulation from old, which took the path the write was
// conditioned on (so it grants the same parts), and the item is old with
// the write applied.
func (en *engine) applied(b *batch, w *write, old *image) *image {
	sim := w.sim
	if old.exists {
		refused := make([]bool, len(b.parts))
		for i, g := range w.sim.granted {
			refused[i] = !g
		}
		sim = replay(old, b, false, refused, w.sim.at)
		for i := range sim.granted {
			if sim.granted[i] != w.sim.granted[i] {
				en.failAll(b, fmt.Errorf("dynamodb: bucket %s/%s: the write's outcome differs from its plan (a bug)", b.id.key.Entity, b.id.key.Resource))
				return nil
			}
			if !sim.granted[i] {
				sim.observed[i] = w.sim.observed[i] // what it was refused on
			}
		}
	}
	after := sim.after(old)
	if !old.exists {
		after.shards = b.parts[0].shards
	}
	w.meter.apply(after, w.meter.p)
	w.ttl.apply(after)
	en.decide(b, sim, en.pressured(after, sim.last))
	return after
}

// decide hands every part of b its outcome from sim.
func (en *engine) decide(b *batch, sim *simulation, pressured bool) {
	for i, p := range b.parts {
		en.finish(b.id, p, outcome{granted: sim.granted[i], pressured: pressured && sim.granted[i], observed: sim.observed[i]})
	}
}

// failAll hands every part of b the error err.
func (en *engine) failAll(b *batch, err error) {
	for _, p := range b.parts {
		en.finish(b.id, p, outcome{err: err})
	}
}

// retryBatch charges every part of b a retry after a lost race. Parts
// whose operation has spent its budget fail with ErrContention; the rest
// wait the longest backoff any of them asks for. It reports whether any
// part is left.
func (en *engine) retryBatch(ctx context.Context, b *batch) bool {
	kept := b.parts[:0]
	var wait time.Duration
	for _, p := range b.parts {
		d, err := p.budget.charge(errLostRace)
		if err != nil {
			en.finish(b.id, p, outcome{err: p.budget.giveUp(err, "bucket "+b.id.key.Entity+"/"+b.id.key.Resource)})
			continue
		}
		wait = max(wait, d)
		kept = append(kept, p)
	}
	b.parts = kept
	if len(kept) > 0 && wait > 0 {
		_ = en.sleep(ctx, wait)
	}
	return len(kept) > 0
}
