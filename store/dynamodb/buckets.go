package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// Consume implements store.Buckets.
func (s *Store) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	b := s.newBudget()
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
		n := s.shardsOf(id)
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

// consumeTarget writes one bucket item: a speculative write when the bucket
// is known, else (or when that fails and refill could help) a write guarded
// by the refill timestamp, after reading the item (or from the old item a
// failed speculative write returned).
func (s *Store) consumeTarget(ctx context.Context, b *budget, ns string, t *target, now int64) (bool, error) {
	var old item
	read := false
	if s.speculative && s.isKnown(t.id(ns)) && debits(&t.req) {
		granted, decided, from, err := s.speculateOne(ctx, ns, t, now)
		if decided {
			return granted, err
		}
		old, read = from, true
	}
	return s.writeLoop(ctx, b, ns, t, now, old, read)
}

// speculateOne tries a speculative debit of one bucket. decided reports an
// answer: granted, or refused because refill cannot help (no further call),
// or an error. Otherwise the read path continues from old, the item the
// failed write returned (nil: the bucket is gone and must be created).
func (s *Store) speculateOne(ctx context.Context, ns string, t *target, now int64) (granted, decided bool, old item, err error) {
	res, err := s.speculate(ctx, ns, t, now)
	switch {
	case err != nil:
		return false, true, nil, err
	case res.ok:
		return true, true, nil, nil
	}
	if err := s.checkLayout(ns, t, res.old); err != nil {
		return false, true, nil, err
	}
	if res.old == nil {
		s.known.forget(t.id(ns))
		return false, false, nil, nil
	}
	if _, ok, err := prepareFrom(res.old, &t.req, now); err != nil || !ok {
		return false, true, nil, err
	}
	return false, false, res.old, nil
}

// writeLoop writes one bucket through the read path: from old (when read;
// nil meaning absent) or a fresh read, retrying lost races within b.
// Writers of one process take turns per bucket (a local lock), so that a
// hot bucket sees one read-path writer per process rather than one per
// goroutine racing on its refill timestamp; speculative writes need no turn.
func (s *Store) writeLoop(ctx context.Context, b *budget, ns string, t *target, now int64, old item, read bool) (bool, error) {
	mu := s.turn(ns, t)
	waited := !mu.TryLock()
	if waited {
		mu.Lock()
	}
	defer mu.Unlock()
	if waited && s.speculative && debits(&t.req) {
		// The writer before us most likely refilled the bucket: what we
		// read is stale, and a speculative debit may now simply succeed.
		granted, decided, from, err := s.speculateOne(ctx, ns, t, now)
		if decided {
			return granted, err
		}
		old, read = from, true
	}
	for {
		if !read {
			var err error
			if old, err = s.getItem(ctx, ns, t); err != nil {
				return false, err
			}
		}
		if err := s.checkLayout(ns, t, old); err != nil {
			return false, err
		}
		granted, retry, err := s.writeOne(ctx, ns, t, now, old)
		if err != nil || retry == nil {
			return granted, err
		}
		// A failed write normally returns the item it met; if it did not
		// (it may be gone), read it again. Losing the race means another
		// writer made progress, and the returned item is fresh: the budget
		// retries at once, and backs off only if that keeps happening.
		if err := b.retry(ctx, errLostRace); err != nil {
			return false, b.giveUp(err, "bucket "+t.key.Entity+"/"+t.key.Resource)
		}
		old, read = retry.old, retry.old != nil
	}
}

// retryFrom carries the item a failed conditional write returned.
type retryFrom struct{ old item }

// writeOne prepares the bucket from old (nil: it does not exist) and writes
// it: create or normal write. It returns retry when a concurrent writer got
// in first.
func (s *Store) writeOne(ctx context.Context, ns string, t *target, now int64, old item) (bool, *retryFrom, error) {
	var rec *store.Record
	if old != nil {
		var err error
		if rec, err = decodeRecord(old); err != nil {
			return false, nil, err
		}
	}
	p := prepared(rec, now)
	if !store.Prepare(p, &t.req, now) {
		return false, nil, nil
	}
	in := s.writeInput(ns, t, now, old, rec, p)
	var err error
	switch {
	case in.put != nil:
		_, err = s.db.PutItem(ctx, in.put)
	case in.update.UpdateExpression == nil:
		return true, nil, nil // same time, no debit: nothing changes
	default:
		_, err = s.db.UpdateItem(ctx, in.update)
	}
	var cond *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &cond):
		return false, &retryFrom{old: cond.Item}, nil
	case err != nil:
		return false, nil, fmt.Errorf("dynamodb: write bucket %s/%s: %w", t.key.Entity, t.key.Resource, err)
	}
	s.known.store(t.id(ns), t.shards)
	return true, nil, nil
}

// prepared returns a copy of rec to prepare, or a new record.
func prepared(rec *store.Record, now int64) *store.Record {
	if rec == nil {
		return store.NewRecord(now)
	}
	return rec.Clone()
}

// prepareFrom decodes a bucket item and prepares br against it, filling
// br's Observed.
func prepareFrom(it item, br *store.BucketRequest, now int64) (*store.Record, bool, error) {
	rec, err := decodeRecord(it)
	if err != nil {
		return nil, false, err
	}
	return rec, store.Prepare(rec, br, now), nil
}

func debits(br *store.BucketRequest) bool {
	for i := range br.Limits {
		if br.Limits[i].Amount > 0 {
			return true
		}
	}
	return false
}

type writeInput struct {
	put    *dynamodb.PutItemInput
	update *dynamodb.UpdateItemInput
}

// writeInput builds the write of a prepared bucket p (not yet debited) whose
// stored state was old (nil: create it).
//
// An existing bucket is updated relative to what was read, so that
// concurrent speculative debits (which do not touch rf) commute with the
// write: each rate limit's balance gets ADD (refill credit - debit), guarded
// by a floor (the balance still covers the debit) and a ceiling (the credit
// still fits under the capacity, so no concurrent refund made clamping
// necessary). The refill timestamp guards against a concurrent refill. Where
// refill filled the bucket, where parameters changed, or for a new limit,
// the balance is SET outright, guarded by its old value.
//
// The pressure limit is a meter, not a guard: its balance always moves by
// ADD, unconditionally, as speculative debits of it never stop.
func (s *Store) writeInput(ns string, t *target, now int64, old item, rec, p *store.Record) writeInput {
	br := &t.req
	if rec == nil {
		debited := p.Clone()
		store.Debit(debited, br)
		consumed := map[string]int64{}
		for _, lr := range br.Limits {
			consumed[lr.Name] = lr.Amount
		}
		it := encodeBucket(ns, t.key, t.shard, t.shards, debited, consumed)
		it[attrTTL] = num(s.expiry(debited))
		describeEntity(it, br.Entity)
		if t.event && debits(br) {
			it[attrEvents] = num(1)
		}
		return writeInput{put: &dynamodb.PutItemInput{
			TableName:                           &s.table,
			Item:                                it,
			ConditionExpression:                 aws.String("attribute_not_exists(PK)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}}
	}
	e := newExpr()
	e.where("%s = %v", attrRefilled, num(rec.Refilled))
	e.where("%s = %v", attrShardCount, num(int64(t.shards)))
	if p.Refilled != rec.Refilled {
		e.setN(attrRefilled, p.Refilled)
	}

	for _, l := range p.Limits {
		var amount int64
		checked := false
		if i := br.Find(l.Name); i >= 0 {
			amount, checked = br.Limits[i].Amount, br.Limits[i].Check
		}
		tk, rm := limitAttr(l.Name, fieldTokens), limitAttr(l.Name, fieldRem)
		j := rec.Find(l.Name)
		if hidden(l.Name) {
			meter(e, l, rec, j, amount)
			continue
		}
		switch {
		case j >= 0 && rec.Limits[j].Params == l.Params && (l.Params.Amount == 0 || l.State.Tokens < l.Params.Capacity):
			credit := l.State.Tokens - rec.Limits[j].State.Tokens
			if d := credit - amount; d != 0 {
				e.addN(tk, d)
			}
			if l.State.Rem != rec.Limits[j].State.Rem {
				e.setN(rm, l.State.Rem)
			}
			if checked {
				e.where("%s >= %v", tk, num(amount-credit))
			}
			if l.Params.Amount > 0 {
				e.where("%s <= %v", tk, num(l.Params.Capacity-credit))
			}
		default:
			if j >= 0 {
				e.where("%s = %v", tk, num(rec.Limits[j].State.Tokens))
			} else {
				e.where("attribute_not_exists(%s)", tk, nil)
			}
			e.setN(tk, l.State.Tokens-amount)
			e.setN(rm, l.State.Rem)
			if j < 0 || rec.Limits[j].Params != l.Params {
				e.setN(limitAttr(l.Name, fieldCapacity), l.Params.Capacity)
				e.setN(limitAttr(l.Name, fieldAmount), l.Params.Amount)
				e.setN(limitAttr(l.Name, fieldPeriod), l.Params.Period)
			}
		}
		if amount != 0 {
			e.addN(limitAttr(l.Name, fieldConsumed), amount)
		}
		if l.Params.Amount > 0 {
			// ADD, not SET: speculative debits landing between the read
			// and this write postpone the bound too, and are kept. The
			// version condition below stops two such ADDs computed from one
			// read, and refunds (which reset the bound) in between.
			fa := limitAttr(l.Name, fieldFullAt)
			oldFA, _ := getN(old, fa)
			debited := bucket.ForceConsume(l.State, amount)
			if d := fullAt(p.Refilled, store.LimitState{State: debited, Params: l.Params}) - oldFA; d != 0 {
				e.addN(fa, d)
			}
		}
	}
	if t.event && debits(br) {
		e.addN(attrEvents, 1)
	}
	debited := p.Clone()
	store.Debit(debited, br)
	s.normalExpiry(e, old, rec, debited)
	redescribeEntity(e, old, br.Entity)
	if len(e.set)+len(e.add)+len(e.remove) > 0 {
		// The version orders normal writes and refunds among themselves,
		// which rf alone does not when a write leaves it unchanged;
		// speculative debits do not touch it, and commute with everything.
		whereVersion(e, old)
		e.addN(attrVersion, 1)
	}
	return writeInput{update: &dynamodb.UpdateItemInput{
		TableName:                           &s.table,
		Key:                                 t.itemKey(ns),
		UpdateExpression:                    e.update(),
		ConditionExpression:                 e.condition(),
		ExpressionAttributeNames:            e.names,
		ExpressionAttributeValues:           e.attrValues(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// meter adds to e the update of the pressure limit l (prepared; j is its
// index in the stored rec, or -1) for a write that debits amount.
func meter(e *expr, l store.LimitState, rec *store.Record, j int, amount int64) {
	if j >= 0 && rec.Limits[j].Params == l.Params {
		if d := l.State.Tokens - rec.Limits[j].State.Tokens - amount; d != 0 {
			e.addN(limitAttr(l.Name, fieldTokens), d)
		}
		return
	}
	e.setN(limitAttr(l.Name, fieldTokens), l.State.Tokens-amount)
	e.setN(limitAttr(l.Name, fieldRem), 0)
	e.setN(limitAttr(l.Name, fieldCapacity), l.Params.Capacity)
	e.setN(limitAttr(l.Name, fieldAmount), l.Params.Amount)
	e.setN(limitAttr(l.Name, fieldPeriod), l.Params.Period)
}

// speculation is the outcome of a speculative write: ok, or the old item
// (nil if the bucket does not exist).
type speculation struct {
	ok  bool
	old item
}

// speculate debits br without reading: ADD each amount, on condition that
// the bucket exists with the request's parameters, every checked balance
// covers its amount without refill, and refill has not filled any debited
// limit since the bucket's refill time (so the debit commutes with the
// refill not yet applied). On success Observed is derived from the new item.
func (s *Store) speculate(ctx context.Context, ns string, t *target, now int64) (speculation, error) {
	br := &t.req
	e := newExpr()
	e.where("%s = %v", attrShardCount, num(int64(t.shards)))
	speculativeExpiry(e, br, now)
	if t.event {
		e.addN(attrEvents, 1)
	}
	for _, lr := range br.Limits {
		if hidden(lr.Name) {
			// The meter needs no condition: without its other attributes
			// (an item older than it), a lone balance is ignored until a
			// normal write sets the meter up.
			if lr.Amount > 0 {
				e.addN(limitAttr(lr.Name, fieldTokens), -lr.Amount)
			}
			continue
		}
		e.where("%s = %v", limitAttr(lr.Name, fieldCapacity), num(lr.Params.Capacity))
		e.where("%s = %v", limitAttr(lr.Name, fieldAmount), num(lr.Params.Amount))
		e.where("%s = %v", limitAttr(lr.Name, fieldPeriod), num(lr.Params.Period))
		if lr.Check {
			e.where("%s >= %v", limitAttr(lr.Name, fieldTokens), num(lr.Amount))
		}
		if lr.Amount > 0 {
			e.addN(limitAttr(lr.Name, fieldTokens), -lr.Amount)
			e.addN(limitAttr(lr.Name, fieldConsumed), lr.Amount)
			if lr.Params.Amount > 0 {
				// Debiting without refilling is exact only if refill has not
				// reached the capacity since rf (it would have clamped). fa
				// is a lower bound of when it does; a debit of c postpones it
				// by at least floor(c*Period/Amount) ms.
				fa := limitAttr(lr.Name, fieldFullAt)
				e.where("%s > %v", fa, num(now))
				e.addN(fa, postpone(lr.Amount, lr.Params))
			}
		}
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.table,
		Key:                                 t.itemKey(ns),
		UpdateExpression:                    e.update(),
		ConditionExpression:                 e.condition(),
		ExpressionAttributeNames:            e.names,
		ExpressionAttributeValues:           e.attrValues(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var cond *types.ConditionalCheckFailedException
	if errors.As(err, &cond) {
		return speculation{old: cond.Item}, nil
	}
	if err != nil {
		return speculation{}, fmt.Errorf("dynamodb: speculative write %s/%s: %w", t.key.Entity, t.key.Resource, err)
	}
	rec, err := decodeRecord(out.Attributes)
	if err != nil {
		return speculation{}, err
	}
	for i := range br.Limits {
		lr := &br.Limits[i]
		if j := rec.Find(lr.Name); j >= 0 {
			st := rec.Limits[j].State
			st.Tokens += lr.Amount // undo the debit: Observed is before it
			lr.Observed = bucket.Refill(st, lr.Params, now-rec.Refilled)
		} else {
			lr.Observed = bucket.Full(lr.Params) // a meter not set up yet
		}
	}
	return speculation{ok: true}, nil
}

// postpone is how far a debit of amount moves a limit's full time: at least
// floor(amount*Period/Amount) ms (the refill of that long credits at most
// the amount), computed without overflow.
func postpone(amount int64, p bucket.Params) int64 {
	d := bucket.RetryAfter(bucket.State{}, bucket.Params{Capacity: amount, Amount: p.Amount, Period: p.Period}, amount)
	if d == bucket.Never {
		return 0 // beyond any clock; not moving the bound is always safe
	}
	return d - 1
}

// turn returns the local lock that orders this process's read-path writers
// of one bucket item.
func (s *Store) turn(ns string, t *target) *sync.Mutex {
	h := maphash.String(s.seed, ns) ^ maphash.String(s.seed, t.key.Entity)*31 ^ maphash.String(s.seed, t.key.Resource)*1_000_003
	h += uint64(t.shard) * 0x9e3779b97f4a7c15
	return &s.turns[h%uint64(len(s.turns))]
}

func (s *Store) isKnown(id bucketID) bool {
	_, ok := s.known.load(id)
	return ok
}

func (s *Store) getItem(ctx context.Context, ns string, t *target) (item, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: t.itemKey(ns), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("dynamodb: read bucket %s/%s: %w", t.key.Entity, t.key.Resource, err)
	}
	return out.Item, nil
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
