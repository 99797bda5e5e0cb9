package dynamodb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
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
// Every item carries a hidden rate limit, the write-pressure meter: each
// write debits one token, and it refills at the partition limit. It never
// refuses anything; a writer that drives it into debt doubles the bucket's
// shard count (see split). It is named with a leading underscore, which user
// limit names cannot have, and is dropped from everything the backend
// reports.

// pressureLimit is the name of the hidden write-pressure limit, and
// writeCost what one write debits from it (internal/schema: the stream's
// upkeep reads the meter too).
const (
	pressureLimit = schema.PressureLimit
	writeCost     = schema.WriteCost
)

// maxShards bounds shard counts: a split of n shards is one transaction of
// 2n items, and a transaction holds at most 100.
const maxShards = 64

// shardTries is how many shards a single-bucket acquire tries before it
// refuses (or gathers).
const shardTries = 3

func hidden(limit string) bool { return strings.HasPrefix(limit, "_") }

// WithWritePressureLimit sets how many writes per second one bucket item
// takes before its bucket is split (default 1,000, DynamoDB's per-partition
// write limit; the burst is one second's worth). 0 turns sharding off;
// a negative value is invalid.
func WithWritePressureLimit(perSecond int) Option {
	return func(s *Store) {
		if perSecond < 0 {
			s.invalid("WithWritePressureLimit", perSecond, "must be 0 (no sharding) or more")
			return
		}
		s.writesPerSecond = int64(perSecond)
	}
}

// WithMaxShards caps how far a bucket is split: a power of two from 2 to
// 64 (the default; a split of n shards is one transaction of 2n items, and
// a transaction holds at most 100). To turn sharding off, use
// WithWritePressureLimit(0).
func WithMaxShards(n int) Option {
	return func(s *Store) {
		if n < 2 || n > maxShards || n&(n-1) != 0 {
			s.invalid("WithMaxShards", n, fmt.Sprintf("must be a power of two from 2 to %d", maxShards))
			return
		}
		s.maxShards = n
	}
}

func (s *Store) pressureParams() bucket.Params {
	return bucket.Params{Capacity: s.writesPerSecond * writeCost, Amount: s.writesPerSecond * writeCost, Period: 1000}
}

// shardParams returns the parameters of one of n shards of a limit: the
// capacity divided (rounded down, so the shards never hold more than the
// bucket) and the rate divided exactly where it can be (a longer period),
// else rounded down.
func shardParams(p bucket.Params, n int) bucket.Params {
	if n <= 1 {
		return p
	}
	m := int64(n)
	q := bucket.Params{Capacity: p.Capacity / m, Amount: p.Amount, Period: p.Period}
	switch {
	case p.Amount%m == 0:
		q.Amount = p.Amount / m
	case p.Period <= bucket.MaxPeriod/m:
		q.Period = p.Period * m
	default:
		q.Amount = p.Amount / m
	}
	return q
}

// target is one bucket item a write goes to: a shard of a bucket, with the
// request as that shard sees it: the caller's limits in order, at
// per-shard parameters.
type target struct {
	key           store.BucketKey
	shard, shards int
	req           store.BucketRequest
	// event makes a debiting write count one acquire in the item's ev
	// counter, which the stream aggregator turns into usage events: true
	// except on the second and later shards of a gathered acquire.
	event bool
	// pressured is set by a granted write that drove the item's
	// write-pressure meter into debt.
	pressured bool
}

// newTarget plans user's request against one shard of n.
func (s *Store) newTarget(user *store.BucketRequest, shard, n int) *target {
	t := &target{key: user.Key, shard: shard, shards: n, event: true}
	t.req.Key, t.req.Entity = user.Key, user.Entity
	t.req.Limits = make([]store.LimitRequest, len(user.Limits))
	for i, lr := range user.Limits {
		lr.Params = shardParams(lr.Params, n)
		lr.Observed, lr.Wait = bucket.State{}, 0
		t.req.Limits[i] = lr
	}
	return t
}

func (t *target) id(ns string) bucketID { return bucketID{ns, t.key} }

func (t *target) itemKey(ns string) item { return shardKey(ns, t.key, t.shard) }

func shardKey(ns string, k store.BucketKey, shard int) item {
	return item{attrPK: str(bucketPK(ns, k, shard)), attrSK: str(skState)}
}

// wait is how long this shard needs before it could grant the request.
func (t *target) wait() int64 {
	var w int64
	for _, lr := range t.req.Limits {
		if lr.Check && lr.Observed.Tokens < lr.Amount {
			w = max(w, bucket.RetryAfter(lr.Observed, lr.Params, lr.Amount))
		}
	}
	return w
}

// report copies what the shard observed into user at bucket scale: n times
// the shard's balance (an estimate; shards are used evenly). A refused limit
// shows less than it asked for, and the wait of this shard.
func (t *target) report(user *store.BucketRequest) {
	user.Placement = t.shard
	n := int64(t.shards)
	for i := range user.Limits {
		ul, tl := &user.Limits[i], &t.req.Limits[i]
		ul.Observed, ul.Wait = tl.Observed, 0
		if n == 1 {
			continue
		}
		ul.Observed = bucket.State{Tokens: scaleTokens(tl.Observed.Tokens, n)}
		if tl.Check && tl.Observed.Tokens < tl.Amount {
			ul.Observed.Tokens = min(ul.Observed.Tokens, ul.Amount-1)
			ul.Wait = max(bucket.RetryAfter(tl.Observed, tl.Params, tl.Amount), 1)
		}
	}
}

// mightCover reports whether the bucket as a whole, estimated from this
// shard, could cover every checked amount.
func (t *target) mightCover() bool {
	for _, lr := range t.req.Limits {
		if lr.Check && scaleTokens(lr.Observed.Tokens, int64(t.shards)) < lr.Amount {
			return false
		}
	}
	return true
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
func (s *Store) checkLayout(ns string, t *target, img *image) error {
	switch {
	case !img.exists && t.shard == 0 && t.shards == 1:
		return nil // a new bucket, to create
	case !img.exists:
		s.shardCounts.forget(t.id(ns))
		return errReplan
	case img.shards != t.shards:
		s.shardCounts.store(t.id(ns), img.shards)
		return errReplan
	}
	return nil
}

// tryShards tries user's request on up to shardTries shards of n. It
// reports the first grant, or the refusal with the shortest wait; where
// the tried shards suggest the whole bucket could cover the request, it
// gathers from every shard instead of refusing.
func (s *Store) tryShards(ctx context.Context, b *budget, ns string, user *store.BucketRequest, n int, now int64) (bool, error) {
	var best *target
	for _, shard := range s.pick(n) {
		t := s.newTarget(user, shard, n)
		granted, err := s.consumeTarget(ctx, b, ns, t, now)
		if err != nil {
			return false, err
		}
		if granted {
			t.report(user)
			if t.pressured {
				s.split(ctx, ns, user, n, now)
			}
			return true, nil
		}
		if best == nil || t.wait() < best.wait() {
			best = t
		}
	}
	if n > 1 && best.mightCover() {
		return s.gather(ctx, b, ns, user, n, now)
	}
	best.report(user)
	return false, nil
}

// shardKeys returns the item keys of shards 0..n-1 of a bucket.
func shardKeys(ns string, k store.BucketKey, n int) []item {
	keys := make([]item, n)
	for i := range keys {
		keys[i] = shardKey(ns, k, i)
	}
	return keys
}

// readShards reads every shard of a bucket of n shards. It returns
// errReplan (after updating the cache) if the layout is not n shards.
func (s *Store) readShards(ctx context.Context, ns string, k store.BucketKey, n int) ([]*image, error) {
	return s.readShardsWithin(ctx, s.newBudget(), ns, k, n)
}

// readShardsWithin is readShards retrying unprocessed keys within b.
func (s *Store) readShardsWithin(ctx context.Context, b *budget, ns string, k store.BucketKey, n int) ([]*image, error) {
	its, err := s.readItems(ctx, b, shardKeys(ns, k, n))
	if err != nil {
		return nil, err
	}
	imgs := make([]*image, len(its))
	for i, it := range its {
		if imgs[i], err = itemImage(it); err != nil {
			return nil, err
		}
		if err := s.checkLayout(ns, &target{key: k, shard: i, shards: n}, imgs[i]); err != nil {
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
func (s *Store) gather(ctx context.Context, b *budget, ns string, user *store.BucketRequest, n int, now int64) (bool, error) {
	imgs, err := s.readShardsWithin(ctx, b, ns, user.Key, n)
	if err != nil {
		return false, err
	}
	ts := make([]*target, n)
	sums := make([]int64, len(user.Limits))
	for i, img := range imgs {
		ts[i] = s.newTarget(user, i, n)
		for j := range ts[i].req.Limits {
			ts[i].req.Limits[j].Check, ts[i].req.Limits[j].Amount = false, 0
		}
		obs := simulate(img, single(ns, ts[i], now), false).observed[0]
		for j := range user.Limits {
			ts[i].req.Limits[j].Observed = obs[j]
			sums[j] = bucket.ForceConsume(bucket.State{Tokens: sums[j]}, -obs[j].Tokens).Tokens
		}
	}
	user.Placement = -1
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
			items = append(items, s.planWrite(one, imgs[i], simulate(imgs[i], one, false)).transactItem())
		}
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err != nil {
		if cause := txRetry(err); cause != nil {
			return false, cause // read the shards again and plan anew
		}
		return false, fmt.Errorf("dynamodb: gather bucket %s/%s: %w", user.Key.Entity, user.Key.Resource, err)
	}
	return true, nil
}

// single is a batch of t's request alone, at now.
func single(ns string, t *target, now int64) *batch {
	return &batch{id: itemID{ns, t.key, t.shard}, parts: []*part{newPart(&t.req, now, t.shards, t.event, nil)}}
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
