package dynamodb

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tollgate-rl/tollgate/store"
)

// Consume implements store.Buckets.
func (s *Store) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	b := s.newBudget()
	if req.Lease != nil {
		return s.consumeLeased(ctx, b, ns, req)
	}
	if req.Event != nil {
		return false, store.CheckConsumeEvent(req)
	}
	if len(req.Buckets) == 1 {
		return s.consumeOne(ctx, b, ns, &req.Buckets[0], req.Now)
	}
	return s.consumeMany(ctx, b, ns, req)
}

// consumeOne is the single-bucket path. It plans the request against the
// bucket's shard count as cached (see shards.go) and plans again whenever
// the stored layout turns out to differ, or a gathering transaction lost.
func (s *Store) consumeOne(ctx context.Context, b *budget, ns string, br *store.BucketRequest, now int64) (bool, error) {
	id := bucketID{ns, br.Key}
	for {
		n := s.shardCounts.load(id)
		var granted bool
		var err error
		if n > 1 && exceedsShard(br, n) {
			granted, err = s.gather(ctx, b, ns, br, n, now)
		} else {
			granted, err = s.tryShards(ctx, b, ns, br, n, now)
		}
		cause := retryCause(err)
		if cause == nil {
			return granted, err
		}
		if err := b.retry(ctx, cause); err != nil {
			return false, b.giveUp(err, "bucket "+br.Key.Entity+"/"+br.Key.Resource)
		}
	}
}

// consumeTarget decides t's request on its bucket item, through the item's
// lane (lane.go): with the other requests of this process that wait for
// the item, in one write.
func (s *Store) consumeTarget(ctx context.Context, b *budget, ns string, t *target, now int64) (bool, error) {
	p := newPart(&t.req, now, t.shards, t.event, b)
	if err := s.submit(ctx, itemID{ns, t.key, t.shard}, p); err != nil {
		return false, err
	}
	t.pressured = p.pressured
	return p.granted, p.err
}

func debits(br *store.BucketRequest) bool {
	for i := range br.Limits {
		if br.Limits[i].Amount > 0 {
			return true
		}
	}
	return false
}

// getItem reads one bucket item consistently (nil: absent).
func (s *Store) getItem(ctx context.Context, ns string, t *target) (item, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: t.itemKey(ns), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("dynamodb: read bucket %s/%s: %w", t.key.Entity, t.key.Resource, err)
	}
	return out.Item, nil
}

// readImage reads one bucket item consistently, as an image.
func (s *Store) readImage(ctx context.Context, id itemID) (*image, error) {
	it, err := s.getItem(ctx, id.ns, &target{key: id.key, shard: id.shard})
	if err != nil {
		return nil, err
	}
	return itemImage(it)
}

// ReadBuckets implements store.Buckets.
func (s *Store) ReadBuckets(ctx context.Context, ns string, keys []store.BucketKey) ([]*store.Record, error) {
	ks := make([]item, len(keys))
	for i, k := range keys {
		ks[i] = shardKey(ns, k, 0)
	}
	its, err := s.batchGet(ctx, ks)
	if err != nil {
		return nil, err
	}
	out := make([]*store.Record, len(keys))
	for i, it := range its {
		if it != nil {
			if out[i], err = s.readBucket(ctx, ns, keys[i], it); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
