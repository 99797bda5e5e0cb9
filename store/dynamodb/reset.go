package dynamodb

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Reset implements store.Buckets (docs/dynamodb.md 4.14). Every shard item
// is read (one consistent GetItem, or a BatchGetItem of a split bucket),
// then ONE transaction SETs, in each, the full tick of every checked
// refilling limit to the tick of req.Now (full at once, its debt and any
// penalty gone) under the requested parameters, on condition that the
// stored parameters are those the read found, and puts the audit event.
// The full tick is not in the condition: a debit that lands between the
// read and the transaction is simply undone by the reset, which comes
// after it; so only a change of parameters, a split or a deleted bucket
// fails the transaction, which is then planned again from a new read,
// within the store's retry budget. A bucket that is missing, or whose
// limits are all full already, changes nothing: only the event is put.
func (en *engine) Reset(ctx context.Context, ns string, req *store.ResetRequest) error {
	k := req.Bucket.Key
	b := en.newBudget()
	for {
		n := en.shardsOf(bucketID{ns, k})
		imgs, err := en.readShardsWithin(ctx, b, ns, k, n)
		if err == nil {
			err = en.resetShards(ctx, ns, req, imgs)
		}
		cause := retryCause(err)
		if cause == nil {
			return err
		}
		if rerr := b.retry(ctx, cause); rerr != nil {
			return b.giveUp(rerr, "reset bucket "+k.Entity+"/"+k.Resource)
		}
	}
}

// resetShards writes the reset of the shards whose images are imgs, as
// one transaction with the event. It returns a retry cause (retry.go) if
// the transaction lost to a change of the items.
func (en *engine) resetShards(ctx context.Context, ns string, req *store.ResetRequest, imgs []*image) error {
	var items []types.TransactWriteItem
	after := make([]*image, len(imgs))
	for shard, img := range imgs {
		e, next := en.resetExpr(img, req, len(imgs))
		if e == nil {
			continue
		}
		t := &target{key: req.Bucket.Key, shard: shard}
		items = append(items, transactUpdate(e.updateItem(&en.table, t.itemKey(ns), "")))
		after[shard] = next
	}
	if len(items) == 0 {
		return en.putEvent(ctx, ns, req.Event)
	}
	if req.Event != nil {
		audit, err := en.auditPut(ns, *req.Event)
		if err != nil {
			return err
		}
		items = append(items, audit)
	}
	_, err := en.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err != nil {
		if cause := txRetry(err); cause != nil {
			return cause
		}
		return fmt.Errorf("dynamodb: reset bucket %s/%s: %w", req.Bucket.Key.Entity, req.Bucket.Key.Resource, err)
	}
	// This process's next acquire plans from the reset items, not from
	// what it saw before (a write of its own under way keeps its own
	// outcome, and a plan from a stale image is conditioned, never wrong).
	for shard, img := range after {
		if img != nil {
			en.lanes.offer(itemID{ns, req.Bucket.Key, shard}, img)
		}
	}
	return nil
}

// putEvent puts ev, if not nil, on its own.
func (en *engine) putEvent(ctx context.Context, ns string, ev *model.AuditEvent) error {
	if ev == nil {
		return nil
	}
	it, err := encodeAudit(ns, *ev)
	if err != nil {
		return err
	}
	if _, err := en.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &en.table, Item: it}); err != nil {
		return fmt.Errorf("dynamodb: reset audit event: %w", err)
	}
	return nil
}

// resetExpr is the write that refills the checked refilling limits of one
// shard item (img, of a bucket of n shards) at req.Now, and the item's
// image after it; nil if the item is missing or every such limit is full
// already under the requested parameters. A limit the item lacks, or
// holds as a concurrency limit, is left to the next acquire, which adds
// it full or rebases it.
func (en *engine) resetExpr(img *image, req *store.ResetRequest, n int) (*expr, *image) {
	if !img.exists {
		return nil, nil
	}
	e, next := newExpr(), img.clone()
	full := img.rf
	for _, lr := range req.Bucket.Limits {
		j := img.find(lr.Name)
		if !lr.Check || !lr.Params.Refills() || hidden(lr.Name) || j < 0 || !img.limits[j].refills() {
			continue
		}
		l, p := &img.limits[j], shardParams(lr.Params, n)
		if p == l.params && img.fullTick(l).Cmp(bucket.TickAt(req.Now, p)) <= 0 {
			continue // full already
		}
		ft := limitAttr(l.name, fieldFullTick)
		if l.legacy {
			e.where("attribute_not_exists(%s)", ft, nil) // a schema 1 limit: convert it here
			removeLegacy(e, l.name)
		}
		whereParams(e, l.name, l.params)
		if p != l.params {
			setParams(e, l.name, p)
		}
		at := bucket.TickAt(req.Now, p)
		e.setV(ft, tickValue(at))
		next.limits[j] = imageLimit{name: l.name, params: p, ft: at}
		full = max(full, req.Now)
	}
	if len(e.set) == 0 {
		return nil, nil
	}
	// The ttl never decreases (ttl.go); a reset only brings full times
	// nearer, but a limit given larger parameters must still be covered.
	if ttl := en.ttlAfter(full); !img.hasTTL || img.ttl < ttl {
		name := e.name(attrTTL)
		e.cond = append(e.cond, "(attribute_not_exists("+name+") OR "+name+" <= "+e.value(num(ttl))+")")
		e.setN(attrTTL, ttl)
		next.ttl, next.hasTTL = ttl, true
	}
	return e, next
}
