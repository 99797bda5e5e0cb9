package dynamodb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// newOpID returns a random id for one delta write.
func newOpID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// deltaExpr is the write of deltas ds in their forms, events acquires
// and the operation id op, on condition that the item does not hold op
// already (see addDeltas).
func deltaExpr(op string, events int64, ds []store.Delta, forms []deltaForm) *expr {
	e := newExpr()
	e.where("(attribute_not_exists(%s) OR "+e.name(attrOp)+" <> %v)", attrOp, str(op))
	e.set = append(e.set, e.name(attrOp)+" = "+e.value(str(op)))
	if events != 0 {
		e.addN(attrEvents, events)
	}
	for i, d := range ds {
		forms[i].express(e, d)
	}
	deltaExpiry(e, ds, forms)
	return e
}

// mergeDeltas sums deltas of the same limit (one update cannot name an
// attribute twice) and drops zeros.
func mergeDeltas(ds []store.Delta) []store.Delta {
	out := make([]store.Delta, 0, len(ds))
	for _, d := range ds {
		i := 0
		for i < len(out) && out[i].Limit != d.Limit {
			i++
		}
		if i == len(out) {
			out = append(out, d)
		} else {
			out[i].Amount += d.Amount
		}
	}
	kept := out[:0]
	for _, d := range out {
		if d.Amount != 0 {
			kept = append(kept, d)
		}
	}
	return kept
}

// ApplyDeltas implements store.Buckets: one unconditional-ADD UpdateItem per
// bucket item (guarded only so that a missing bucket or limit is not
// created half-formed), items in parallel. A delta goes to the shard its
// debit came from (its Placement; shard 0 for a gathered debit).
func (en *engine) ApplyDeltas(ctx context.Context, ns string, deltas []store.Delta) error {
	return en.applyDeltas(ctx, ns, deltas, 0)
}

// applyDeltas applies deltas, and adds events to the acquire counter of
// each bucket they touch (a compensation takes back the acquire it undoes).
func (en *engine) applyDeltas(ctx context.Context, ns string, deltas []store.Delta, events int64) error {
	type dest struct {
		k     store.BucketKey
		shard int
	}
	groups := map[dest][]store.Delta{}
	var order []dest
	for _, d := range deltas {
		to := dest{d.Key, max(d.Placement, 0)}
		if _, ok := groups[to]; !ok {
			order = append(order, to)
		}
		groups[to] = append(groups[to], d)
	}
	apply := func(i int) error {
		return en.addDeltas(ctx, ns, &target{key: order[i].k, shard: order[i].shard}, groups[order[i]], events)
	}
	if len(order) == 1 {
		return apply(0)
	}
	errs := make([]error, len(order))
	parallel(len(order), func(i int) { errs[i] = apply(i) })
	return errors.Join(errs...)
}

// addDeltas applies deltas to one bucket item with one UpdateItem:
//
//	SET  op = :id
//	ADD  b_L_ft :d·rp             -- each refilling limit L (a full tick moves by d·Period, at any time)
//	ADD  b_L_tk :−d               -- each concurrency limit
//	ADD  b_L_tc :d, ev :events
//	CONDITION (attribute_not_exists(op) OR op <> :id)
//	      AND b_L_ra = :ra AND b_L_rp = :rp AND attribute_exists(b_L_ft)  -- b_L_ra = 0 for a concurrency limit
//
// The rate comes from the item's image in this process's lane (it was
// just written), else from the delta's parameters at the shard count
// cached, else from a read; the condition pins it (the period sizes the
// addition, the rate times a debt's expiry, ttl.go), and a failed write
// returns the item to compute it again from. A limit still in the schema 1
// form takes the schema 1 delta (ADD tk, and for a refund SET fa = 0 and
// ADD v 1, which stop that schema's speculative debits).
//
// The ADDs are not idempotent, and the SDK retries a request whose
// response was lost after DynamoDB applied it; so the write also records a
// random operation id (attribute "op"), on condition that the item does
// not hold it already. A retry that finds its own id knows the first
// attempt was applied. (Another write landing between the attempts would
// overwrite the id; that window is one retry delay wide.)
func (en *engine) addDeltas(ctx context.Context, ns string, t *target, ds []store.Delta, events int64) error {
	k := t.key
	id := itemID{ns, k, t.shard}
	ds = mergeDeltas(ds)
	op := newOpID()
	img := en.lanes.image(id)
	b := en.newBudget()
	for len(ds) > 0 {
		forms, ok := en.deltaForms(id, img, ds)
		if !ok {
			var err error
			if img, err = en.readImage(ctx, id); err != nil {
				return err
			}
			if ds = keepPresent(ds, img); len(ds) == 0 {
				return nil
			}
			continue
		}
		out, err := en.db.UpdateItem(ctx, deltaExpr(op, events, ds, forms).updateItem(&en.table, t.itemKey(ns), types.ReturnValueAllNew))
		var cond *types.ConditionalCheckFailedException
		if !errors.As(err, &cond) {
			if err != nil {
				return fmt.Errorf("dynamodb: adjust bucket %s/%s: %w", k.Entity, k.Resource, err)
			}
			if after, err := itemImage(out.Attributes); err == nil {
				en.lanes.offer(id, after)
			}
			return nil
		}
		if getS(cond.Item, attrOp) == op {
			return nil // an earlier attempt of this call was applied
		}
		// The item differs from what was assumed: a limit is gone (its
		// deltas are dropped, as the contract says), or has other
		// parameters or form. Plan again from the item returned.
		if img, err = itemImage(cond.Item); err != nil {
			return err
		}
		if ds = keepPresent(ds, img); len(ds) == 0 {
			return nil
		}
		if err := b.retry(ctx, errLostRace); err != nil {
			return b.giveUp(err, "adjust bucket "+k.Entity+"/"+k.Resource)
		}
	}
	return nil
}

// keepPresent returns the deltas of limits img holds.
func keepPresent(ds []store.Delta, img *image) []store.Delta {
	var kept []store.Delta
	for _, d := range ds {
		if img.find(d.Limit) >= 0 {
			kept = append(kept, d)
		}
	}
	return kept
}

// deltaForm is how one delta is written: as its limit is stored, with the
// item's parameters.
type deltaForm struct {
	params bucket.Params
	legacy bool
}

// deltaForms returns each delta's form, from img (nil: not known) or the
// delta's parameters; ok is false if some form is not known.
func (en *engine) deltaForms(id itemID, img *image, ds []store.Delta) ([]deltaForm, bool) {
	forms := make([]deltaForm, len(ds))
	for i, d := range ds {
		if img != nil {
			j := img.find(d.Limit)
			if j < 0 {
				return nil, false
			}
			l := &img.limits[j]
			forms[i] = deltaForm{params: l.params, legacy: l.legacy}
			continue
		}
		if d.Params.Capacity <= 0 {
			return nil, false
		}
		forms[i] = deltaForm{params: shardParams(d.Params, en.shardCounts.load(bucketID{id.ns, id.key}))}
	}
	return forms, true
}

// express adds delta d to e, in form f.
func (f deltaForm) express(e *expr, d store.Delta) {
	switch {
	case f.legacy:
		tk := limitAttr(d.Limit, fieldTokens)
		e.where("attribute_exists(%s)", tk, nil)
		e.where("attribute_not_exists(%s)", limitAttr(d.Limit, fieldFullTick), nil)
		e.addN(tk, -d.Amount)
		if d.Amount < 0 {
			e.setN(limitAttr(d.Limit, fieldFullAt), 0)
			e.addN(attrVersion, 1)
		}
	case f.params.Refills():
		ft := limitAttr(d.Limit, fieldFullTick)
		e.where("attribute_exists(%s)", ft, nil)
		e.where("%s = %v", limitAttr(d.Limit, fieldAmount), num(f.params.Amount))
		e.where("%s = %v", limitAttr(d.Limit, fieldPeriod), num(storedPeriod(f.params)))
		e.add = append(e.add, e.name(ft)+" "+e.value(tickValue(bucket.DebitTicks(d.Amount, f.params))))
	default:
		e.where("%s = %v", limitAttr(d.Limit, fieldAmount), num(0))
		e.addN(limitAttr(d.Limit, fieldTokens), -d.Amount)
	}
	e.addN(limitAttr(d.Limit, fieldConsumed), d.Amount)
}

// withDeltas returns img with deltas ds applied, as their write applies
// them: a refilling limit's full tick moves by the debit's ticks, a
// concurrency limit's balance by the amount.
func (img *image) withDeltas(ds []store.Delta) *image {
	out := img.clone()
	for _, d := range ds {
		i := out.find(d.Limit)
		if i < 0 {
			continue
		}
		l := &out.limits[i]
		switch {
		case l.legacy:
			return nil // schema 1 deltas change what the image cannot tell
		case l.refills():
			l.ft = l.ft.Add(bucket.DebitTicks(d.Amount, l.params))
		default:
			l.tk -= d.Amount
		}
	}
	return out
}
