package dynamodb

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store"
)

// DefaultLookahead is how far ahead the upkeep looks by default when it
// decides whether a bucket item's stored balance will last until its next
// pass: a second of stream latency and a second of polling or batching.
const DefaultLookahead = 2 * time.Second

// recordPrecision is how coarse the stream's creation times are on AWS:
// rounded down to the second.
const recordPrecision = 1000 // ms

// Bounds on the work of one pass, so that a batch of many hot items does
// not hold its stream shard (or a Lambda invocation) for long; items left
// over are due again at the next pass.
const (
	maxRefillsPerPass = 100
	maxSplitsPerPass  = 8
)

// Upkeep keeps hot buckets on the one-write fast path from what the stream
// shows of their writes: it refills bucket items whose stored balance will
// not cover their observed consumption until the next pass (refill.go), and
// doubles the shards of a bucket whose shard 0 takes writes at 80% or more
// of its write-pressure limit (DESIGN 6). The process reader
// (ReadChanges with WithUpkeep) and the AWS Lambda function
// (cmd/tollgate-lambda) both hand it every batch they have applied, with
// the Heat of the batch's stream shard: the same code decides and writes
// in both.
//
// Refill and split write through the store's usual conditional writes, so
// they never conflict with the writers: a write that loses a race does
// nothing. An Upkeep is safe for concurrent use if each Heat is used by one
// caller at a time.
type Upkeep struct {
	s         *Store
	lookahead int64 // ms
	clk       clock.Clock
}

// UpkeepOption configures an Upkeep.
type UpkeepOption func(*Upkeep)

// WithLookahead sets how long a refilled balance should last: about the
// time until the next pass sees the item again (default DefaultLookahead).
func WithLookahead(d time.Duration) UpkeepOption {
	return func(u *Upkeep) {
		if d > 0 {
			u.lookahead = d.Milliseconds()
		}
	}
}

// WithUpkeepClock sets the clock refills are dated by (default: the wall
// clock), within the bound the stream sets (see Tend).
func WithUpkeepClock(c clock.Clock) UpkeepOption { return func(u *Upkeep) { u.clk = c } }

// NewUpkeep returns the upkeep of s's buckets. Splits are bounded by s's
// WithMaxShards.
func (s *Store) NewUpkeep(opts ...UpkeepOption) *Upkeep {
	u := &Upkeep{s: s, lookahead: DefaultLookahead.Milliseconds(), clk: clock.Real{}}
	for _, o := range opts {
		o(u)
	}
	return u
}

// Tended is what one pass of the upkeep wrote.
type Tended struct {
	Refilled int // bucket items refilled
	Split    int // buckets whose shards were doubled
}

// Tend notes in heat the writes of bucket items that recs (one batch of a
// stream shard, in order) show, then splits and refills the items the heat
// shows hot, from the newest image of each in recs. heat must be the one of
// recs' stream shard: a bucket item's records go to one shard at a time.
//
// Refills are dated by the upkeep's clock, but never later than a second
// after the newest record's creation time (DynamoDB's clock, rounded down
// to the second): an upkeep whose clock runs ahead of DynamoDB's grants
// nothing early. Writers' clocks must agree with DynamoDB's, as their
// refill times are compared with the upkeep's (a writer behind by δ sees
// refills up to δ early, as it would from a writer ahead by δ).
//
// Errors of single items do not stop the others; they are returned
// together. They cost only the optimisation.
func (u *Upkeep) Tend(ctx context.Context, heat *Heat, recs []ImageChange) (Tended, error) {
	latest := heat.noteAll(recs)
	at := min(u.clk.Now().UnixMilli(), heat.newest+recordPrecision)
	splits, refills := u.plan(heat, latest, at)
	var res Tended
	var errs []error
	split := map[bucketID]bool{}
	for _, w := range splits {
		if ctx.Err() != nil {
			break
		}
		if u.s.split(ctx, w.ns, &store.BucketRequest{Key: w.key}, w.shards, at) {
			res.Split++
			split[bucketID{w.ns, w.key}] = true
			heat.forget(w.pk) // shard 0 now takes half the writes
		}
	}
	for _, w := range refills {
		if ctx.Err() != nil {
			break
		}
		if split[bucketID{w.ns, w.key}] {
			continue // the split refilled it, and changed its parameters
		}
		wrote, err := u.s.refill(ctx, w.ns, w.key, w.shard, at, u.lookahead, heat.rate(w.pk))
		if err != nil {
			errs = append(errs, err)
		}
		if wrote {
			res.Refilled++
		}
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

// bucketWrite is the newest write of one bucket item in a batch.
type bucketWrite struct {
	pk            string
	ns            string
	key           store.BucketKey
	shard, shards int
	rec           *store.Record // the item after the write, hidden meter included
}

// noteAll notes every write of a bucket item in recs, then forgets idle
// items; it returns the newest write of each item in recs, in the order of
// their first appearance.
func (h *Heat) noteAll(recs []ImageChange) []bucketWrite {
	var order []string
	latest := map[string]ImageChange{}
	for _, r := range recs {
		if _, ok := bucketNS(r); !ok {
			continue
		}
		c, _ := ChangeOf(r) // Consumed and Events are those of the write, possibly none
		pk := r.New.S(attrPK)
		h.note(pk, c.Time, c.Events, c.Consumed)
		if _, seen := latest[pk]; !seen {
			order = append(order, pk)
		}
		latest[pk] = r
	}
	h.forgetIdle()
	out := make([]bucketWrite, 0, len(order))
	for _, pk := range order {
		r := latest[pk]
		rec, ok := imageRecord(r.New)
		if !ok {
			continue // not a complete bucket item: nothing to decide on
		}
		ns, _ := bucketNS(r)
		out = append(out, bucketWrite{
			pk: pk, ns: ns, key: store.BucketKey{Entity: r.New.S(attrEntity), Resource: r.New.S(attrResource)},
			shard: int(imageN(r.New, attrShard)), shards: max(int(imageN(r.New, attrShardCount)), 1), rec: rec,
		})
	}
	return out
}

// plan decides, from the heat and the newest image of each item written
// in the batch, which buckets to split (by their shard 0) and which items
// to refill at `at`.
func (u *Upkeep) plan(heat *Heat, latest []bucketWrite, at int64) (splits, refills []bucketWrite) {
	for _, w := range latest {
		r := heat.rate(w.pk)
		if w.shard == 0 && 2*w.shards <= u.s.maxShards && splitDue(w.rec, r) {
			if len(splits) < maxSplitsPerPass {
				splits = append(splits, w)
			}
			continue
		}
		if len(refills) < maxRefillsPerPass && refillDue(w.rec, at, u.lookahead, r) {
			refills = append(refills, w)
		}
	}
	return splits, refills
}

// imageRecord reads the limits and refill time of a bucket item's image,
// as decodeRecord reads a stored item; ok is false if any is missing.
func imageRecord(img Image) (*store.Record, bool) {
	rf, err := strconv.ParseInt(img.N(attrRefilled), 10, 64)
	if err != nil {
		return nil, false
	}
	rec := &store.Record{Refilled: rf}
	suffix := "_" + fieldCapacity
	for _, name := range img.Names() {
		if !strings.HasPrefix(name, "b_") || !strings.HasSuffix(name, suffix) {
			continue
		}
		l := store.LimitState{Name: name[2 : len(name)-len(suffix)]}
		for _, f := range []struct {
			field string
			v     *int64
		}{
			{fieldCapacity, &l.Params.Capacity}, {fieldAmount, &l.Params.Amount}, {fieldPeriod, &l.Params.Period},
			{fieldTokens, &l.State.Tokens}, {fieldRem, &l.State.Rem},
		} {
			if *f.v, err = strconv.ParseInt(img.N(limitAttr(l.Name, f.field)), 10, 64); err != nil {
				return nil, false
			}
		}
		rec.Limits = append(rec.Limits, l)
	}
	return rec, true
}
