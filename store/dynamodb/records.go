package dynamodb

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// Reading buckets: the records a bucket's items hold, a sharded bucket's
// summed over its shards, for ReadBuckets and ListBuckets. A read warms
// this process's images of the items, as a write does.

// ReadBuckets implements store.Buckets: shard 0 of every bucket in one
// batch read, then the other shards of each split one (readBucket). It
// serves ListBuckets too, with the keys GSI2 listed.
func (en *engine) ReadBuckets(ctx context.Context, ns string, keys []store.BucketKey) ([]*store.Record, error) {
	ks := make([]item, len(keys))
	for i, k := range keys {
		ks[i] = shardKey(ns, k, 0)
	}
	its, err := en.batchGet(ctx, ks)
	if err != nil {
		return nil, err
	}
	out := make([]*store.Record, len(keys))
	for i, it := range its {
		if it != nil {
			if out[i], err = en.readBucket(ctx, ns, keys[i], it); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// getItem reads one bucket item consistently (nil: absent).
func (en *engine) getItem(ctx context.Context, ns string, t *target) (item, error) {
	out, err := en.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &en.table, Key: t.itemKey(ns), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("dynamodb: read bucket %s/%s: %w", t.key.Entity, t.key.Resource, err)
	}
	return out.Item, nil
}

// readImage reads one bucket item consistently, as an image.
func (en *engine) readImage(ctx context.Context, id itemID) (*image, error) {
	it, err := en.getItem(ctx, id.ns, &target{key: id.key, shard: id.shard})
	if err != nil {
		return nil, err
	}
	return itemImage(it)
}

// readBucket returns the bucket-level record of a bucket whose shard 0 is
// it: for a sharded bucket, every shard brought to the latest refill time
// and summed (the remainders of refill dropped). Hidden limits are left out.
func (en *engine) readBucket(ctx context.Context, ns string, k store.BucketKey, it item) (*store.Record, error) {
	n := shardCount(it)
	its := []item{it}
	if n > 1 {
		en.shardCounts.store(bucketID{ns, k}, n)
		rest, err := en.batchGet(ctx, shardKeys(ns, k, n)[1:])
		if err != nil {
			return nil, err
		}
		its = append(its, rest...)
	}
	var recs []*store.Record
	var latest int64
	for shard, it := range its {
		if it == nil {
			continue // a shard deleted with its bucket, mid-read
		}
		img, err := itemImage(it)
		if err != nil {
			return nil, err
		}
		// A read warms this process's image of the item, as a write does.
		en.lanes.remember(itemID{ns, k, shard}, img)
		rec := img.record(img.rf)
		recs = append(recs, rec)
		latest = max(latest, rec.Refilled)
	}
	if n == 1 {
		return visible(recs[0]), nil
	}
	sum := &store.Record{Refilled: latest}
	for _, rec := range recs {
		store.Prepare(rec, &store.BucketRequest{}, latest)
		for _, l := range visible(rec).Limits {
			j := sum.Find(l.Name)
			if j < 0 {
				sum.Limits = append(sum.Limits, store.LimitState{Name: l.Name, Params: bucketParams(l.Params, n)})
				j = len(sum.Limits) - 1
			}
			sum.Limits[j].State.Tokens = bucket.ForceConsume(sum.Limits[j].State, -l.State.Tokens).Tokens
		}
	}
	return sum, nil
}

// bucketParams is the inverse of shardParams, as far as rounding allows:
// the capacity and rate of n shards together (the rate may come back in
// another form: 2 per 2 s rather than 1 per s).
func bucketParams(p bucket.Params, n int) bucket.Params {
	m := int64(n)
	q := p
	q.Capacity, q.Amount = p.Capacity*m, p.Amount*m
	if p.Window.IsZero() && p.Amount > bucket.MaxTokens/m && p.Period%m == 0 {
		q.Amount, q.Period = p.Amount, p.Period/m
	}
	return q
}

// visible returns rec without its hidden limits.
func visible(rec *store.Record) *store.Record {
	kept := rec.Limits[:0]
	for _, l := range rec.Limits {
		if !hidden(l.Name) {
			kept = append(kept, l)
		}
	}
	rec.Limits = kept
	return rec
}

// shardCount reads a bucket item's shard count (1 when absent).
func shardCount(it item) int {
	n, err := getN(it, attrShardCount)
	if err != nil || n < 1 {
		return 1
	}
	return int(n)
}
