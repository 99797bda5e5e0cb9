package dynamodb

import (
	"context"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// The single-bucket acquire: the request is planned against the bucket's
// shard count as cached, tried on up to shardTries shards (one, for a
// bucket that is not split), each through its item's lane (lane.go).

// consumeOne is the single-bucket path. It plans the request against the
// bucket's shard count as cached (see shards.go) and plans again whenever
// the stored layout turns out to differ, or a gathering transaction lost.
func (en *engine) consumeOne(ctx context.Context, b *budget, ns string, br *store.BucketRequest, now int64) (bool, error) {
	id := bucketID{ns, br.Key}
	for {
		n := en.shardCounts.load(id)
		var granted bool
		var err error
		if n > 1 && exceedsShard(br, n) {
			granted, err = en.gather(ctx, b, ns, br, n, now)
		} else {
			granted, err = en.tryShards(ctx, b, ns, br, n, now)
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
func (en *engine) consumeTarget(ctx context.Context, b *budget, ns string, t *target, now int64) (bool, error) {
	p := newPart(&t.req, now, t.shards, t.event, b)
	if err := en.submit(ctx, itemID{ns, t.key, t.shard}, p); err != nil {
		return false, err
	}
	t.pressured = p.pressured
	return p.granted, p.err
}

// tryShards tries user's request on up to shardTries shards of n. It
// reports the first grant, or the refusal with the shortest wait; where
// the tried shards suggest the whole bucket could cover the request, it
// gathers from every shard instead of refusing.
func (en *engine) tryShards(ctx context.Context, b *budget, ns string, user *store.BucketRequest, n int, now int64) (bool, error) {
	var best *target
	for _, shard := range en.pick(n) {
		t := en.newTarget(user, shard, n)
		granted, err := en.consumeTarget(ctx, b, ns, t, now)
		if err != nil {
			return false, err
		}
		if granted {
			t.report(user)
			if t.pressured {
				en.split(ctx, ns, user, n, now)
			}
			return true, nil
		}
		if best == nil || t.wait() < best.wait() {
			best = t
		}
	}
	if n > 1 && best.mightCover() {
		return en.gather(ctx, b, ns, user, n, now)
	}
	best.report(user)
	return false, nil
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
func (en *engine) newTarget(user *store.BucketRequest, shard, n int) *target {
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
	user.Placement, user.Estimated = t.shard, t.shards > 1
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
