package dynamodb

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// Hot buckets.
//
// One DynamoDB item takes about 1,000 writes per second (the per-partition
// limit). A bucket busier than that is split into shards: items 0..n-1, n a
// power of two, each holding every limit at 1/n of its capacity and rate.
// An acquire goes to one random shard and, if that shard refuses, to up to
// two others; a request larger than one shard's capacity, or one the tried
// shards together suggest the bucket could still cover, gathers from every
// shard in one transaction.
//
// Every item carries a write-pressure meter (meter.go), whose debt splits
// the bucket (split.go).

// maxShards bounds shard counts: a split of n shards is one transaction of
// 2n items, and a transaction holds at most 100.
const maxShards = 64

// shardTries is how many shards a single-bucket acquire tries before it
// refuses (or gathers).
const shardTries = 3

// shardParams returns the parameters of one of n shards of a limit: the
// capacity divided (rounded down, so the shards never hold more than the
// bucket) and the rate divided exactly where it can be (a longer period),
// else rounded down.
func shardParams(p bucket.Params, n int) bucket.Params {
	if n <= 1 {
		return p
	}
	m := int64(n)
	q := p
	q.Capacity = p.Capacity / m
	switch {
	case !p.Window.IsZero():
		// A quota's period is one window: its amount is divided, as its
		// capacity is.
		q.Amount = p.Amount / m
	case p.Amount%m == 0:
		q.Amount = p.Amount / m
	case p.Period <= bucket.MaxPeriod/m:
		q.Period = p.Period * m
	default:
		q.Amount = p.Amount / m
	}
	return q
}

func scaleTokens(v, n int64) int64 {
	switch {
	case v > bucket.MaxTokens/n:
		return bucket.MaxTokens
	case v < -bucket.MaxTokens/n:
		return -bucket.MaxTokens
	}
	return v * n
}

// exceedsShard reports whether some checked amount is more than one of n
// shards can ever hold.
func exceedsShard(br *store.BucketRequest, n int) bool {
	for _, lr := range br.Limits {
		if lr.Check && lr.Amount > shardParams(lr.Params, n).Capacity {
			return true
		}
	}
	return false
}

// pickShards returns the shards to try, in order: up to shardTries distinct
// random shards of n.
func pickShards(n int) []int {
	if n == 1 {
		return []int{0}
	}
	tries := min(n, shardTries)
	out := make([]int, 0, tries)
	for len(out) < tries {
		c := rand.IntN(n)
		dup := false
		for _, o := range out {
			dup = dup || o == c
		}
		if !dup {
			out = append(out, c)
		}
	}
	return out
}

// checkLayout checks the item img (perhaps absent) a target was planned
// against. If the bucket has another shard count, or the target's shard is
// missing where it should exist (the bucket was deleted), it updates the
// cache and returns errReplan.
func (en *engine) checkLayout(ns string, t *target, img *image) error {
	switch {
	case !img.exists && t.shard == 0 && t.shards == 1:
		return nil // a new bucket, to create
	case !img.exists:
		en.shardCounts.forget(t.id(ns))
		return errReplan
	case img.shards != t.shards:
		en.shardCounts.store(t.id(ns), img.shards)
		return errReplan
	}
	return nil
}

// readShards reads every shard of a bucket of n shards. It returns
// errReplan (after updating the cache) if the layout is not n shards.
func (en *engine) readShards(ctx context.Context, ns string, k store.BucketKey, n int) ([]*image, error) {
	return en.readShardsWithin(ctx, en.newBudget(), ns, k, n)
}

// readShardsWithin is readShards retrying unprocessed keys within b.
func (en *engine) readShardsWithin(ctx context.Context, b *budget, ns string, k store.BucketKey, n int) ([]*image, error) {
	its, err := en.readItems(ctx, b, shardKeys(ns, k, n))
	if err != nil {
		return nil, err
	}
	imgs := make([]*image, len(its))
	for i, it := range its {
		if imgs[i], err = itemImage(it); err != nil {
			return nil, err
		}
		if err := en.checkLayout(ns, &target{key: k, shard: i, shards: n}, imgs[i]); err != nil {
			return nil, err
		}
	}
	return imgs, nil
}

// gather serves user's request from every shard of n in one transaction:
// the request is granted if the shards' balances together cover it, and
// each shard is debited what it holds, in shard order, until the amount is
// met. The observation reported is the exact sum over the shards.
//
// Deltas for a gathered debit (Placement -1) go to shard 0.
func (en *engine) gather(ctx context.Context, b *budget, ns string, user *store.BucketRequest, n int, now int64) (bool, error) {
	imgs, err := en.readShardsWithin(ctx, b, ns, user.Key, n)
	if err != nil {
		return false, err
	}
	ts := make([]*target, n)
	sums := make([]int64, len(user.Limits))
	for i, img := range imgs {
		ts[i] = en.newTarget(user, i, n)
		for j := range ts[i].req.Limits {
			ts[i].req.Limits[j].Check, ts[i].req.Limits[j].Amount = false, 0
		}
		obs := simulate(img, single(ns, ts[i], now), false).observed[0]
		for j := range user.Limits {
			ts[i].req.Limits[j].Observed = obs[j]
			sums[j] = bucket.ForceConsume(bucket.State{Tokens: sums[j]}, -obs[j].Tokens).Tokens
		}
	}
	// Exact in tokens, but each shard's remainder is dropped from the
	// sum: an estimate all the same.
	user.Placement, user.Estimated = -1, true
	ok := true
	for j := range user.Limits {
		user.Limits[j].Observed, user.Limits[j].Wait = bucket.State{Tokens: sums[j]}, 0
		ok = ok && (!user.Limits[j].Check || sums[j] >= user.Limits[j].Amount)
	}
	if !ok {
		return false, nil
	}
	remaining := make([]int64, len(user.Limits))
	for j, lr := range user.Limits {
		remaining[j] = lr.Amount
	}
	var items []types.TransactWriteItem
	for i, t := range ts {
		if t.takeShare(remaining) {
			t.event = len(items) == 0
			one := single(ns, t, now)
			items = append(items, en.planWrite(one, imgs[i], simulate(imgs[i], one, false)).transactItem())
		}
	}
	_, err = en.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err != nil {
		if cause := txRetry(err); cause != nil {
			return false, cause // read the shards again and plan anew
		}
		return false, fmt.Errorf("dynamodb: gather bucket %s/%s: %w", user.Key.Entity, user.Key.Resource, err)
	}
	return true, nil
}

// takeShare debits this shard as much of each remaining amount as its
// observed balance holds, and reports whether it debits anything.
func (t *target) takeShare(remaining []int64) bool {
	taken := false
	for j := range remaining {
		tl := &t.req.Limits[j]
		if take := min(max(tl.Observed.Tokens, 0), remaining[j]); take > 0 {
			tl.Check, tl.Amount = true, take
			remaining[j] -= take
			taken = true
		}
	}
	return taken
}
