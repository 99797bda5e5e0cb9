package dynamodb

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Bucket writes inside transactions.
//
// The paths that write several items at once (a cascade without
// speculation, cascade.go; a durable acquire, durable.go; a gather,
// shards.go) decide each item's request alone on its image and put its
// planned write in a TransactWriteItems, where a write that changes
// nothing is still a check of the conditions the grant depends on.

// planRead decides t's request alone on its item, read as old (nil:
// absent), and plans its write. The outcome (granted, Observed) is set on
// t: final, if the write is made. A layout other than t's is errReplan.
func (en *engine) planRead(ns string, t *target, now int64, old item) (*write, error) {
	img, err := itemImage(old)
	if err != nil {
		return nil, err
	}
	return en.planImage(ns, t, now, img)
}

// planImage is planRead from the item's image.
func (en *engine) planImage(ns string, t *target, now int64, img *image) (*write, error) {
	b := single(ns, t, now)
	if img.exists && img.shards != t.shards || !img.exists && (t.shard != 0 || t.shards != 1) {
		en.shardCounts.store(bucketID{ns, t.key}, img.shards)
		return nil, errReplan
	}
	sim := simulate(img, b, false)
	for j := range t.req.Limits {
		t.req.Limits[j].Observed = sim.observed[0][j]
	}
	return en.planWrite(b, img, sim), nil
}

// transactItem turns a write into a transaction item; a write that debits
// nothing becomes a check of its conditions, as a grant still depends on
// them.
func (w *write) transactItem() types.TransactWriteItem {
	if w.put != nil {
		return types.TransactWriteItem{Put: &types.Put{
			TableName: w.put.TableName, Item: w.put.Item, ConditionExpression: w.put.ConditionExpression,
		}}
	}
	return transactUpdate(w.update)
}

// single is a batch of t's request alone, at now.
func single(ns string, t *target, now int64) *batch {
	return &batch{id: itemID{ns, t.key, t.shard}, parts: []*part{newPart(&t.req, now, t.shards, t.event, nil)}}
}

// images returns the image of each target's item: this process's, where
// cached allows and it has one, else read consistently (one batch read for
// all missing). fromCache reports whether any came from this process.
func (en *engine) images(ctx context.Context, ns string, ts []*target, cached bool) ([]*image, bool, error) {
	imgs := make([]*image, len(ts))
	var keys []item
	var missing []int
	for i, t := range ts {
		if cached {
			imgs[i] = en.lanes.image(itemID{ns, t.key, t.shard})
		}
		if imgs[i] == nil {
			keys, missing = append(keys, t.itemKey(ns)), append(missing, i)
		}
	}
	if len(missing) == 0 {
		return imgs, true, nil
	}
	olds, err := en.readItems(ctx, en.newBudget(), keys)
	if err != nil {
		return nil, false, err
	}
	for j, i := range missing {
		if imgs[i], err = itemImage(olds[j]); err != nil {
			return nil, false, err
		}
	}
	return imgs, len(missing) < len(ts), nil
}

// afterWrite returns the item as the transaction left it, from the image
// it was planned on: exact when the image was, and otherwise a view whose
// next write fails its condition and returns the item (never a wrong
// grant).
func (en *engine) afterWrite(w *write, img *image, shards int) *image {
	after := w.sim.after(img)
	if !img.exists {
		after.shards = shards
	}
	w.meter.apply(after, w.meter.p)
	w.ttl.apply(after)
	return after
}
