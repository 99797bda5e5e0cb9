package stream

import (
	"context"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// recordPrecision is how coarse the stream's creation times are on AWS:
// rounded down to the second.
const recordPrecision = 1000 // ms

// maxSplitsPerPass bounds the work of one pass, so that a batch of many
// hot items does not hold its stream shard (or a Lambda invocation) for
// long; items left over are due again at the next pass.
const maxSplitsPerPass = 8

// Upkeep splits hot buckets ahead of their writers, from what the stream
// shows of their writes: it doubles the shards of a bucket whose shard 0
// takes writes at 80% or more of its write-pressure limit (docs/aggregator.md, "Shard management"). The
// process reader (Read with WithUpkeep) and the AWS Lambda function
// (cmd/tollgate-lambda) both hand it every batch they have applied, with
// the Heat of the batch's stream shard: the same code decides and writes
// in both.
//
// The Upkeep measures the pace (the Heat); the backend decides from an
// item's own meter whether that pace calls for a split
// (dynamodb.Store.SplitDue) and writes it (dynamodb.Store.Split), so the
// split keeps the exactness of every other write of the backend.
//
// Writers need no proactive refill (earlier versions ran one when a debit
// without a read could not refill): a stored full tick refills itself, in
// every write's condition (docs/dynamodb.md 4.1).
//
// A split writes through the store's usual conditional writes, so it
// never conflicts with the writers: a split that loses a race does
// nothing. An Upkeep is safe for concurrent use if each Heat is used by
// one caller at a time.
type Upkeep struct {
	s   *dynamodb.Store
	clk clock.Clock
}

// UpkeepOption configures an Upkeep.
type UpkeepOption func(*Upkeep)

// WithUpkeepClock sets the clock splits are dated by (default: the wall
// clock), within the bound the stream sets (see Tend).
func WithUpkeepClock(c clock.Clock) UpkeepOption { return func(u *Upkeep) { u.clk = c } }

// NewUpkeep returns the upkeep of s's buckets. Splits are bounded by s's
// WithMaxShards.
func NewUpkeep(s *dynamodb.Store, opts ...UpkeepOption) *Upkeep {
	u := &Upkeep{s: s, clk: clock.Real{}}
	for _, o := range opts {
		o(u)
	}
	return u
}

// Tended is what one pass of the upkeep wrote.
type Tended struct {
	Split int // buckets whose shards were doubled
}

// Tend notes in heat the writes of bucket items that recs (one batch of a
// stream shard, in order) show, then splits the buckets the heat shows
// hot, from the newest image of each in recs. heat must be the one of
// recs' stream shard: a bucket item's records go to one shard at a time.
//
// Splits are dated by the upkeep's clock, but never later than a second
// after the newest record's creation time (DynamoDB's clock, rounded down
// to the second): an upkeep whose clock runs ahead of DynamoDB's credits
// no refill early when it halves the balances.
//
// A split that fails costs only the optimisation; the context's error is
// returned.
func (u *Upkeep) Tend(ctx context.Context, heat *Heat, recs []Record) (Tended, error) {
	latest := heat.noteAll(recs)
	at := min(u.clk.Now().UnixMilli(), heat.newest+recordPrecision)
	var res Tended
	for _, w := range u.plan(heat, latest) {
		if ctx.Err() != nil {
			break
		}
		if u.s.Split(ctx, w.ns, w.key, w.shards, at) {
			res.Split++
			heat.forget(w.pk) // shard 0 now takes half the writes
		}
	}
	return res, ctx.Err()
}

// bucketWrite is the newest write of one bucket item in a batch.
type bucketWrite struct {
	pk            string
	ns            string
	key           store.BucketKey
	shard, shards int
	img           dynamodb.Image // the item after the write, hidden meter included
}

// noteAll notes every write of a bucket item in recs, then forgets idle
// items; it returns the newest write of each item in recs, in the order of
// their first appearance.
func (h *Heat) noteAll(recs []Record) []bucketWrite {
	var order []string
	latest := map[string]Record{}
	for _, r := range recs {
		if _, ok := bucketNS(r); !ok {
			continue
		}
		pk := r.New.S(schema.AttrPK)
		h.note(pk, recordTime(r))
		if _, seen := latest[pk]; !seen {
			order = append(order, pk)
		}
		latest[pk] = r
	}
	h.forgetIdle()
	out := make([]bucketWrite, 0, len(order))
	for _, pk := range order {
		r := latest[pk]
		ns, _ := bucketNS(r)
		out = append(out, bucketWrite{
			pk: pk, ns: ns, key: bucketKey(r.New), img: r.New,
			shard: int(imageN(r.New, schema.AttrShard)), shards: max(int(imageN(r.New, schema.AttrShardCount)), 1),
		})
	}
	return out
}

// plan decides, from the heat and the newest image of each item written
// in the batch, which buckets to split (by their shard 0).
func (u *Upkeep) plan(heat *Heat, latest []bucketWrite) (splits []bucketWrite) {
	for _, w := range latest {
		if w.shard == 0 && len(splits) < maxSplitsPerPass && u.s.SplitDue(w.img, heat.rate(w.pk)) {
			splits = append(splits, w)
		}
	}
	return splits
}
