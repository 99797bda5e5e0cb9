package dynamodb

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// Split is Store.Split: the split a writer makes when it finds the
// bucket's write pressure too high (split), made for the stream's upkeep.
func (en *engine) Split(ctx context.Context, ns string, key store.BucketKey, shards int, at int64) bool {
	return en.split(ctx, ns, &store.BucketRequest{Key: key}, shards, at)
}

// split doubles the shard count of a bucket of n shards: in one
// transaction, each shard i hands half of every balance to a new shard
// i+n, and all 2n items take the per-shard parameters of 2n shards. The
// balances are conserved to the millitoken (less at most one millitoken per
// shard where halving an odd capacity rounds down), so a split never
// creates tokens.
//
// It is best effort, run by the writer whose write found the pressure, or
// by the aggregator's upkeep ahead of it: every shard is pinned to the
// full tick (or balance) it was read with, so if another write landed in
// between, or another writer split first, the transaction fails and the
// next pressured write tries again. This process's own writes to the
// shards wait meanwhile (their lanes are held), so that only other
// processes' writes can come in between. Buckets with a concurrency limit are
// not split: a slot taken on one shard and released on another would be
// lost. It reports whether it split.
func (en *engine) split(ctx context.Context, ns string, user *store.BucketRequest, n int, now int64) bool {
	if n*2 > en.maxShards || !rateOnly(user) || ctx.Err() != nil {
		return false
	}
	id := bucketID{ns, user.Key}
	if _, busy := en.splitting.LoadOrStore(id, struct{}{}); busy {
		return false
	}
	defer en.splitting.Delete(id)
	lanes := make([]*lane, n)
	after := make([]*image, 2*n)
	for i := range lanes {
		lanes[i] = en.hold(itemID{ns, user.Key, i})
	}
	defer func() {
		for i, l := range lanes {
			en.release(l, itemID{ns, user.Key, i}, after[i])
		}
	}()
	imgs, err := en.readShards(ctx, ns, user.Key, n)
	if err != nil {
		return false
	}
	items := make([]types.TransactWriteItem, 0, 2*n)
	for i, img := range imgs {
		keep, give, ok := en.splitShard(ns, user, i, n, img, now, after)
		if !ok {
			copy(after, imgs)
			return false
		}
		items = append(items, keep, give)
	}
	if _, err := en.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}); err != nil {
		copy(after, imgs) // as read: the freshest known
		return false
	}
	en.shardCounts.store(id, 2*n)
	// The transaction was pinned to every shard as read: the items are
	// now exactly as planned, and this process's next writes need no
	// failed write to learn them.
	for i := n; i < 2*n; i++ {
		en.lanes.offer(itemID{ns, user.Key, i}, after[i])
	}
	en.splits.Add(1)
	return true
}

func rateOnly(br *store.BucketRequest) bool {
	for _, lr := range br.Limits {
		if lr.Params.Amount == 0 {
			return false
		}
	}
	return true
}

// splitShard builds the two writes that split shard i of n (stored as
// img): an update of shard i, pinned to what was read, and the creation of
// shard i+n. It sets after[i] and after[i+n] to the images they leave.
func (en *engine) splitShard(ns string, user *store.BucketRequest, i, n int, img *image, now int64, after []*image) (keep, give types.TransactWriteItem, ok bool) {
	e := newExpr()
	kept, given, ok := halveShard(e, user, n, img, now)
	if !ok {
		return keep, give, false
	}
	en.splitExpiry(e, img, kept)
	kept.parent, kept.cascade, kept.hasCascade = img.parent, img.cascade, img.hasCascade
	given.parent, given.cascade, given.hasCascade = img.parent, img.cascade, img.hasCascade
	after[i], after[i+n] = kept, given
	given.ttl, given.hasTTL = en.expiry(given), true
	keep = transactUpdate(e.updateItem(&en.table, shardKey(ns, user.Key, i), ""))
	give = en.newShard(itemID{ns, user.Key, i + n}, given)
	return keep, give, true
}

// halveShard adds to e the update of a shard of n (stored as img) that
// keeps half of every balance, pinned to what was read, and returns the
// images of the half kept and the half given to a new shard; ok is false
// for a shard with a concurrency limit, which is not split.
func halveShard(e *expr, user *store.BucketRequest, n int, img *image, now int64) (kept, given *image, ok bool) {
	e.where("%s = %v", attrShardCount, num(int64(n)))
	e.setN(attrShardCount, int64(2*n))
	e.setN(attrRefilled, now)
	kept, given = &image{exists: true, shards: 2 * n, rf: now}, &image{exists: true, shards: 2 * n, rf: now}
	legacy := false
	for j := range img.limits {
		l := &img.limits[j]
		if !l.refills() {
			return nil, nil, false
		}
		np := shardParams(l.params, 2)
		if k := user.Find(l.name); k >= 0 {
			np = shardParams(user.Limits[k].Params, 2*n)
		}
		a, b := halve(img.stateAt(l, now).Tokens, np.Capacity)
		if hidden(l.name) {
			// The meter is per item, not shared: each shard keeps the
			// item's own limit (the writers' setting, which the upkeep's
			// store need not share), with a full allowance.
			np = l.params
			a, b = np.Capacity, np.Capacity
		}
		whereParams(e, l.name, l.params)
		if l.legacy {
			whereLegacy(e, l)
			removeLegacy(e, l.name)
			legacy = true
		} else {
			e.where("%s = %v", limitAttr(l.name, fieldFullTick), tickValue(l.ft))
		}
		ka := imageLimit{name: l.name, params: np, ft: bucket.FullTick(bucket.State{Tokens: a}, np, now)}
		kb := imageLimit{name: l.name, params: np, ft: bucket.FullTick(bucket.State{Tokens: b}, np, now)}
		e.setV(limitAttr(l.name, fieldFullTick), tickValue(ka.ft))
		setParams(e, l.name, np)
		kept.limits = append(kept.limits, ka)
		given.limits = append(given.limits, kb)
	}
	if legacy {
		e.where("%s = %v", attrRefilled, num(img.rf))
		e.remove = append(e.remove, e.name(attrVersion))
	}
	return kept, given, true
}

// splitExpiry adds to e the ttl the kept half of a split shard (stored as
// img) needs: the ttl never decreases (ttl.go), so it is raised to what the
// kept half needs, if it does not have it yet.
func (en *engine) splitExpiry(e *expr, img, kept *image) {
	need := en.expiry(kept)
	kept.ttl, kept.hasTTL = max(need, img.ttl), true
	switch {
	case !img.hasTTL:
		e.where("attribute_not_exists(%s)", attrTTL, nil)
		e.setN(attrTTL, need)
	case need > img.ttl:
		e.where("%s = %v", attrTTL, num(img.ttl))
		e.addN(attrTTL, need-img.ttl)
	}
}

// newShard is the creation of a split's new shard id, as given, with the
// entity's parent and cascade flag it inherits.
func (en *engine) newShard(id itemID, given *image) types.TransactWriteItem {
	created := encodeItem(id, given, nil)
	if given.hasCascade {
		created[attrCascade] = boolean(given.cascade)
	}
	if given.parent != "" {
		created[attrParent] = str(given.parent)
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName: &en.table, Item: created,
		ConditionExpression: aws.String("attribute_not_exists(PK)"),
	}}
}

// halve splits a balance between two shards of capacity c each: the
// kept half rounds up, and neither exceeds c. Debt stays where it is.
func halve(tokens, c int64) (kept, given int64) {
	if tokens <= 0 {
		return tokens, 0
	}
	kept = min(tokens-tokens/2, c)
	return kept, min(tokens-kept, c)
}

// SplitDue is Store.SplitDue: whether the bucket whose shard 0 img shows,
// taking writesPerSecond writes a second, can double and is at splitAt or
// more of its write-pressure limit.
func (en *engine) SplitDue(img Image, writesPerSecond float64) bool {
	d, err := decodeImage(img)
	if err != nil || img.N(attrRefilled) == "" {
		return false
	}
	return 2*d.shards <= en.maxShards && splitDue(d.record(d.rf), writesPerSecond)
}

// splitAt is the share of the write-pressure limit at which the upkeep
// splits a bucket ahead of its writers (who split it themselves at 100%).
const splitAt = 0.8

// splitDue reports whether a bucket whose shard 0 is rec (its image, hidden
// meter included) and takes writes writes a second is at splitAt or more
// of its write-pressure limit. An item without a meter (its writers do not
// shard) never is.
func splitDue(rec *store.Record, writes float64) bool {
	j := rec.Find(pressureLimit)
	if j < 0 {
		return false
	}
	p := rec.Limits[j].Params
	if p.Amount <= 0 || p.Period <= 0 {
		return false
	}
	limit := float64(p.Amount) / float64(writeCost) * 1000 / float64(p.Period) // writes per second
	return writes >= splitAt*limit
}
