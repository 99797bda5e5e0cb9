package dynamodb

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// Penalize implements store.Buckets (docs/dynamodb.md 4.14). A consume of
// nothing first makes sure the bucket exists with the request's
// parameters; then each shard item gets, for each penalized limit, the
// full tick of a limit empty at Until, by a SET on condition that the
// stored full tick is lower and the parameters are those it was computed
// for: a limit already emptier (a longer penalty, a debt) is left as it
// is. The ttl is raised to cover the new full time. A failed condition
// returns the item, and the shard is planned again from it. The audit
// event, if any, is put last: a penalty without its event (the put failed)
// is retried by the caller, which changes no shard a second time.
func (en *engine) Penalize(ctx context.Context, ns string, req *store.PenaltyRequest) error {
	br := &req.Bucket
	zero := store.BucketRequest{Key: br.Key, Entity: br.Entity, Limits: make([]store.LimitRequest, len(br.Limits))}
	for i, lr := range br.Limits {
		zero.Limits[i] = store.LimitRequest{Name: lr.Name, Params: lr.Params}
	}
	if _, err := en.Consume(ctx, ns, &store.ConsumeRequest{Now: req.Now, Buckets: []store.BucketRequest{zero}}); err != nil {
		return err
	}
	for shard := 0; shard < en.shardCounts.load(bucketID{ns, br.Key}); shard++ {
		if err := en.penalizeShard(ctx, itemID{ns, br.Key, shard}, req); err != nil {
			return err
		}
	}
	if req.Event == nil {
		return nil
	}
	it, err := encodeAudit(ns, *req.Event)
	if err != nil {
		return err
	}
	if _, err := en.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &en.table, Item: it}); err != nil {
		return fmt.Errorf("dynamodb: penalty audit event: %w", err)
	}
	return nil
}

// penalizeShard applies req to one shard item.
func (en *engine) penalizeShard(ctx context.Context, id itemID, req *store.PenaltyRequest) error {
	b := en.newBudget()
	img := en.lanes.image(id)
	for {
		if img == nil {
			var err error
			if img, err = en.readImage(ctx, id); err != nil {
				return err
			}
		}
		if !img.exists {
			return nil // a shard that is gone holds nothing to empty
		}
		if img.shards > 1 {
			en.shardCounts.store(bucketID{id.ns, id.key}, img.shards)
		}
		e, ok := en.penaltyExpr(img, req)
		if !ok {
			return nil // every limit is already empty until then
		}
		t := &target{key: id.key, shard: id.shard}
		out, err := en.db.UpdateItem(ctx, e.updateItem(&en.table, t.itemKey(id.ns), types.ReturnValueAllNew))
		var cond *types.ConditionalCheckFailedException
		if !errors.As(err, &cond) {
			if err != nil {
				return fmt.Errorf("dynamodb: penalize bucket %s/%s: %w", id.key.Entity, id.key.Resource, err)
			}
			if after, err := itemImage(out.Attributes); err == nil {
				en.lanes.offer(id, after)
			}
			return nil
		}
		if img, err = itemImage(cond.Item); err != nil {
			return err
		}
		if err := b.retry(ctx, errLostRace); err != nil {
			return b.giveUp(err, "penalize bucket "+id.key.Entity+"/"+id.key.Resource)
		}
	}
}

// penaltyExpr is the write that empties img's penalized limits until
// req.Until; ok is false if none needs it.
func (en *engine) penaltyExpr(img *image, req *store.PenaltyRequest) (*expr, bool) {
	e := newExpr()
	full := img.rf
	for _, lr := range req.Bucket.Limits {
		j := img.find(lr.Name)
		if !lr.Check || j < 0 || !img.limits[j].refills() {
			continue
		}
		l := &img.limits[j]
		empty := bucket.EmptyTick(req.Until, l.params)
		if img.fullTick(l).Cmp(empty) >= 0 {
			continue
		}
		ft := limitAttr(l.name, fieldFullTick)
		if l.legacy {
			e.where("attribute_not_exists(%s)", ft, nil) // a schema 1 limit: convert it here
			removeLegacy(e, l.name)
		} else {
			e.where("%s < %v", ft, tickValue(empty))
		}
		whereParams(e, l.name, l.params)
		e.setV(ft, tickValue(empty))
		full = max(full, bucket.FullAt(empty, l.params))
	}
	if len(e.set) == 0 {
		return nil, false
	}
	// The ttl never decreases (ttl.go): raise it to cover the new full
	// time, on condition that the stored one is not above it.
	if ttl := en.ttlAfter(full); !img.hasTTL || img.ttl < ttl {
		name := e.name(attrTTL)
		e.cond = append(e.cond, "(attribute_not_exists("+name+") OR "+name+" <= "+e.value(num(ttl))+")")
		e.setN(attrTTL, ttl)
	}
	return e, true
}
