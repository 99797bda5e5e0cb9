package dynamodb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

// ErrContention is wrapped by the error returned when an operation kept
// losing races with concurrent writers and gave up (see WithMaxAttempts).
var ErrContention = errors.New("dynamodb: gave up under write contention")

// Consume implements store.Buckets.
func (s *Store) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	if len(req.Buckets) == 1 {
		return s.consumeOne(ctx, ns, &req.Buckets[0], req.Now)
	}
	return s.consumeMany(ctx, ns, req)
}

// consumeOne is the single-bucket path: a speculative write when the bucket
// is known, else (or when that fails and refill could help) a write guarded
// by the refill timestamp, after reading the bucket (or from the old item a
// failed speculative write returned).
func (s *Store) consumeOne(ctx context.Context, ns string, br *store.BucketRequest, now int64) (bool, error) {
	var old item
	read := false
	if s.speculative && s.isKnown(bucketID{ns, br.Key}) && debits(br) {
		granted, decided, from, err := s.speculateOne(ctx, ns, br, now)
		if decided {
			return granted, err
		}
		old, read = from, true
	}
	return s.writeLoop(ctx, ns, br, now, old, read)
}

// speculateOne tries a speculative debit of one bucket. decided reports an
// answer: granted, or refused because refill cannot help (no further call),
// or an error. Otherwise the read path continues from old, the item the
// failed write returned (nil: the bucket is gone and must be created).
func (s *Store) speculateOne(ctx context.Context, ns string, br *store.BucketRequest, now int64) (granted, decided bool, old item, err error) {
	res, err := s.speculate(ctx, ns, br, now)
	switch {
	case err != nil:
		return false, true, nil, err
	case res.ok:
		return true, true, nil, nil
	case res.old == nil:
		s.known.Delete(bucketID{ns, br.Key})
		return false, false, nil, nil
	}
	if _, ok, err := prepareFrom(res.old, br, now); err != nil || !ok {
		return false, true, nil, err
	}
	return false, false, res.old, nil
}

// writeLoop writes one bucket through the read path: from old (when read;
// nil meaning absent) or a fresh read, retrying lost races. Writers of one
// process take turns per bucket (a local lock), so that a hot bucket sees
// one read-path writer per process rather than one per goroutine racing on
// its refill timestamp; speculative writes need no turn.
func (s *Store) writeLoop(ctx context.Context, ns string, br *store.BucketRequest, now int64, old item, read bool) (bool, error) {
	mu := s.turn(ns, br.Key)
	waited := !mu.TryLock()
	if waited {
		mu.Lock()
	}
	defer mu.Unlock()
	if waited && s.speculative && debits(br) {
		// The writer before us most likely refilled the bucket: what we
		// read is stale, and a speculative debit may now simply succeed.
		granted, decided, from, err := s.speculateOne(ctx, ns, br, now)
		if decided {
			return granted, err
		}
		old, read = from, true
	}
	for attempt := 0; attempt < s.maxAttempts; attempt++ {
		if !read {
			var err error
			if old, err = s.getBucket(ctx, ns, br.Key); err != nil {
				return false, err
			}
		}
		granted, retry, err := s.writeOne(ctx, ns, br, now, old)
		if err != nil || retry == nil {
			return granted, err
		}
		// A failed write normally returns the item it met; if it did not
		// (it may be gone), read it again. Losing the race means another
		// writer made progress, and the returned item is fresh: retry at
		// once, and back off only if that keeps happening.
		old, read = retry.old, retry.old != nil
		if attempt >= immediateRetries && attempt+1 < s.maxAttempts {
			if err := backoff(ctx, attempt-immediateRetries); err != nil {
				return false, err
			}
		}
	}
	return false, fmt.Errorf("%w: bucket %s/%s after %d attempts", ErrContention, br.Key.Entity, br.Key.Resource, s.maxAttempts)
}

// immediateRetries is how many lost races a write retries without sleeping.
const immediateRetries = 4

// retryFrom carries the item a failed conditional write returned.
type retryFrom struct{ old item }

// writeOne prepares the bucket from old (nil: it does not exist) and writes
// it: create or normal write. It returns retry when a concurrent writer got
// in first.
func (s *Store) writeOne(ctx context.Context, ns string, br *store.BucketRequest, now int64, old item) (bool, *retryFrom, error) {
	var rec *store.Record
	if old != nil {
		var err error
		if rec, err = decodeRecord(old); err != nil {
			return false, nil, err
		}
	}
	p := prepared(rec, now)
	if !store.Prepare(p, br, now) {
		return false, nil, nil
	}
	in := s.writeInput(ns, br, now, old, rec, p)
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
		return false, nil, fmt.Errorf("dynamodb: write bucket %s/%s: %w", br.Key.Entity, br.Key.Resource, err)
	}
	s.known.Store(bucketID{ns, br.Key}, struct{}{})
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
func (s *Store) writeInput(ns string, br *store.BucketRequest, now int64, old item, rec, p *store.Record) writeInput {
	if rec == nil {
		debited := p.Clone()
		store.Debit(debited, br)
		consumed := map[string]int64{}
		for _, lr := range br.Limits {
			consumed[lr.Name] = lr.Amount
		}
		it := encodeBucket(ns, br.Key, 0, 1, debited, consumed)
		return writeInput{put: &dynamodb.PutItemInput{
			TableName:                           &s.table,
			Item:                                it,
			ConditionExpression:                 aws.String("attribute_not_exists(PK)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}}
	}
	e := newExpr()
	e.where("%s = %v", attrRefilled, num(rec.Refilled))
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
	if len(e.set)+len(e.add) > 0 {
		// The version orders normal writes and refunds among themselves,
		// which rf alone does not when a write leaves it unchanged;
		// speculative debits do not touch it, and commute with everything.
		if v, err := getN(old, attrVersion); err == nil {
			e.where("%s = %v", attrVersion, num(v))
		} else {
			e.where("attribute_not_exists(%s)", attrVersion, nil)
		}
		e.addN(attrVersion, 1)
	}
	return writeInput{update: &dynamodb.UpdateItemInput{
		TableName:                           &s.table,
		Key:                                 bucketKey(ns, br.Key),
		UpdateExpression:                    e.update(),
		ConditionExpression:                 e.condition(),
		ExpressionAttributeNames:            e.names,
		ExpressionAttributeValues:           e.attrValues(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

func bucketKey(ns string, k store.BucketKey) item {
	return item{attrPK: str(bucketPK(ns, k, 0)), attrSK: str(skState)}
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
func (s *Store) speculate(ctx context.Context, ns string, br *store.BucketRequest, now int64) (speculation, error) {
	e := newExpr()
	e.where("attribute_exists(%s)", attrPK, nil)
	for _, lr := range br.Limits {
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
		Key:                                 bucketKey(ns, br.Key),
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
		return speculation{}, fmt.Errorf("dynamodb: speculative write %s/%s: %w", br.Key.Entity, br.Key.Resource, err)
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
// of one bucket.
func (s *Store) turn(ns string, k store.BucketKey) *sync.Mutex {
	h := maphash.String(s.seed, ns) ^ maphash.String(s.seed, k.Entity)*31 ^ maphash.String(s.seed, k.Resource)*1_000_003
	return &s.turns[h%uint64(len(s.turns))]
}

func (s *Store) isKnown(id bucketID) bool {
	_, ok := s.known.Load(id)
	return ok
}

func (s *Store) getBucket(ctx context.Context, ns string, k store.BucketKey) (item, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: bucketKey(ns, k), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("dynamodb: read bucket %s/%s: %w", k.Entity, k.Resource, err)
	}
	return out.Item, nil
}

// consumeMany is the cascade path. When every bucket is known it is the
// fast path: parallel speculative writes; buckets whose speculative write
// failed but whose refill would cover the request are then written one by
// one through the read path (no transaction), and if any bucket finally
// refuses, everything debited is compensated. Otherwise (a cold cascade) all
// buckets are read and written in one transaction.
func (s *Store) consumeMany(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	for attempt := 0; attempt < s.maxAttempts; attempt++ {
		// Every attempt prefers the fast path: a lost race on the slow path
		// usually means a concurrent writer has just created the buckets.
		if s.speculative && s.allKnownAndDebited(ns, req) {
			granted, decided, err := s.fastMany(ctx, ns, req)
			if err != nil || decided {
				return granted, err
			}
		}
		granted, retry, err := s.transact(ctx, ns, req)
		if err != nil || !retry {
			return granted, err
		}
		if attempt >= immediateRetries && attempt+1 < s.maxAttempts {
			if err := backoff(ctx, attempt-immediateRetries); err != nil {
				return false, err
			}
		}
	}
	return false, fmt.Errorf("%w: cascade of %s/%s after %d attempts", ErrContention,
		req.Buckets[0].Key.Entity, req.Buckets[0].Key.Resource, s.maxAttempts)
}

func (s *Store) allKnownAndDebited(ns string, req *store.ConsumeRequest) bool {
	for i := range req.Buckets {
		if !s.isKnown(bucketID{ns, req.Buckets[i].Key}) || !debits(&req.Buckets[i]) {
			return false
		}
	}
	return true
}

// fastMany runs the fast cascade path. decided is false when a bucket turned
// out to be missing and the slow path must create it (nothing stays debited
// then).
func (s *Store) fastMany(ctx context.Context, ns string, req *store.ConsumeRequest) (granted, decided bool, err error) {
	n := len(req.Buckets)
	specs := make([]speculation, n)
	errs := make([]error, n)
	parallel(n, func(i int) { specs[i], errs[i] = s.speculate(ctx, ns, &req.Buckets[i], req.Now) })
	debited := make([]bool, n)
	for i := range specs {
		debited[i] = errs[i] == nil && specs[i].ok
	}
	// Classify the failures from the old items they returned.
	refused, missing := false, false
	for i := range specs {
		if debited[i] || errs[i] != nil {
			continue
		}
		if specs[i].old == nil {
			s.known.Delete(bucketID{ns, req.Buckets[i].Key})
			missing = true
			continue
		}
		_, ok, err := prepareFrom(specs[i].old, &req.Buckets[i], req.Now)
		if err != nil {
			errs[i] = err
		}
		refused = refused || !ok
	}
	if err := errors.Join(errs...); err != nil || refused || missing {
		if cerr := s.compensate(ctx, ns, req, debited); cerr != nil || err != nil {
			return false, true, errors.Join(err, cerr)
		}
		// A missing bucket must be created: the slow path does that, and
		// its reads also give every bucket's exact Observed state.
		return false, !missing, nil
	}
	// Refill covers every failed bucket: write those through the read path.
	parallel(n, func(i int) {
		if !debited[i] {
			debited[i], errs[i] = s.writeLoop(ctx, ns, &req.Buckets[i], req.Now, specs[i].old, true)
		}
	})
	all := true
	for i := range debited {
		all = all && debited[i]
	}
	if all {
		return true, true, nil
	}
	err = errors.Join(errs...)
	if cerr := s.compensate(ctx, ns, req, debited); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return false, true, err
}

// compensate gives back what the request debited in the marked buckets.
func (s *Store) compensate(ctx context.Context, ns string, req *store.ConsumeRequest, debited []bool) error {
	var undo []store.Delta
	for i, d := range debited {
		if !d {
			continue
		}
		for _, lr := range req.Buckets[i].Limits {
			if lr.Amount > 0 {
				undo = append(undo, store.Delta{Key: req.Buckets[i].Key, Limit: lr.Name, Amount: -lr.Amount})
			}
		}
	}
	if len(undo) == 0 {
		return nil
	}
	if err := s.ApplyDeltas(context.WithoutCancel(ctx), ns, undo); err != nil {
		return fmt.Errorf("dynamodb: compensate cascade: %w", err)
	}
	return nil
}

// parallel runs f(0..n-1) concurrently and waits.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	wg.Wait()
}

// transact reads every bucket, prepares them, and writes them in one
// transaction. retry reports a lost race.
func (s *Store) transact(ctx context.Context, ns string, req *store.ConsumeRequest) (granted, retry bool, err error) {
	keys := make([]store.BucketKey, len(req.Buckets))
	for i := range req.Buckets {
		keys[i] = req.Buckets[i].Key
	}
	olds, err := s.getBuckets(ctx, ns, keys)
	if err != nil {
		return false, false, err
	}
	recs := make([]*store.Record, len(olds))
	ps := make([]*store.Record, len(olds))
	ok := true
	for i, it := range olds {
		if it != nil {
			if recs[i], err = decodeRecord(it); err != nil {
				return false, false, err
			}
		}
		ps[i] = prepared(recs[i], req.Now)
		if !store.Prepare(ps[i], &req.Buckets[i], req.Now) {
			ok = false
		}
	}
	if !ok {
		return false, false, nil
	}
	var items []types.TransactWriteItem
	for i := range req.Buckets {
		in := s.writeInput(ns, &req.Buckets[i], req.Now, olds[i], recs[i], ps[i])
		if in.put != nil {
			items = append(items, types.TransactWriteItem{Put: &types.Put{
				TableName: in.put.TableName, Item: in.put.Item, ConditionExpression: in.put.ConditionExpression,
			}})
			continue
		}
		u := in.update
		if u.UpdateExpression == nil {
			// Nothing changes in this bucket, but the grant depends on it.
			items = append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
				TableName: u.TableName, Key: u.Key, ConditionExpression: u.ConditionExpression,
				ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
			}})
			continue
		}
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
			ConditionExpression: u.ConditionExpression, ExpressionAttributeNames: u.ExpressionAttributeNames,
			ExpressionAttributeValues: u.ExpressionAttributeValues,
		}})
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	var canceled *types.TransactionCanceledException
	switch {
	case errors.As(err, &canceled):
		if retryable(canceled) {
			return false, true, nil
		}
		return false, false, fmt.Errorf("dynamodb: cascade transaction: %w", err)
	case isConflict(err):
		return false, true, nil
	case err != nil:
		return false, false, fmt.Errorf("dynamodb: cascade transaction: %w", err)
	}
	for _, k := range keys {
		s.known.Store(bucketID{ns, k}, struct{}{})
	}
	return true, false, nil
}

// newOpID returns a random id for one delta write.
func newOpID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// mergeDeltas sums deltas of the same limit (one update cannot name an
// attribute twice) and drops zeros.
func mergeDeltas(ds []store.Delta) []store.Delta {
	out := make([]store.Delta, 0, len(ds))
	for _, d := range ds {
		i := 0
		for i < len(out) && out[i].Limit != d.Limit {
			i++
		}
		if i == len(out) {
			out = append(out, d)
		} else {
			out[i].Amount += d.Amount
		}
	}
	kept := out[:0]
	for _, d := range out {
		if d.Amount != 0 {
			kept = append(kept, d)
		}
	}
	return kept
}

// retryable reports a transaction cancelled by a lost race (a failed
// condition, a conflict with another transaction) or by throttling.
func retryable(e *types.TransactionCanceledException) bool {
	for _, r := range e.CancellationReasons {
		switch aws.ToString(r.Code) {
		case "", "None", "ConditionalCheckFailed", "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded":
		default:
			return false
		}
	}
	return true
}

func isConflict(err error) bool {
	var tc *types.TransactionConflictException
	return errors.As(err, &tc)
}

// getBuckets reads items consistently, in order; nil where absent.
func (s *Store) getBuckets(ctx context.Context, ns string, keys []store.BucketKey) ([]item, error) {
	ks := make([]item, len(keys))
	for i, k := range keys {
		ks[i] = bucketKey(ns, k)
	}
	return s.batchGet(ctx, ks)
}

// ReadBuckets implements store.Buckets.
func (s *Store) ReadBuckets(ctx context.Context, ns string, keys []store.BucketKey) ([]*store.Record, error) {
	its, err := s.getBuckets(ctx, ns, keys)
	if err != nil {
		return nil, err
	}
	out := make([]*store.Record, len(keys))
	for i, it := range its {
		if it != nil {
			if out[i], err = decodeRecord(it); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// ApplyDeltas implements store.Buckets: one unconditional-ADD UpdateItem per
// bucket (guarded only so that a missing bucket or limit is not created
// half-formed), buckets in parallel.
func (s *Store) ApplyDeltas(ctx context.Context, ns string, deltas []store.Delta) error {
	groups := map[store.BucketKey][]store.Delta{}
	var order []store.BucketKey
	for _, d := range deltas {
		if _, ok := groups[d.Key]; !ok {
			order = append(order, d.Key)
		}
		groups[d.Key] = append(groups[d.Key], d)
	}
	if len(order) == 1 {
		return s.addDeltas(ctx, ns, order[0], groups[order[0]])
	}
	errs := make([]error, len(order))
	parallel(len(order), func(i int) { errs[i] = s.addDeltas(ctx, ns, order[i], groups[order[i]]) })
	return errors.Join(errs...)
}

// addDeltas applies deltas to one bucket with one UpdateItem. The ADDs are
// not idempotent, and the SDK retries a request whose response was lost
// after DynamoDB applied it; so the write also records a random operation id
// (attribute "op"), on condition that the item does not hold it already. A
// retry that finds its own id knows the first attempt was applied. (Another
// write landing between the attempts would overwrite the id; that window is
// one retry delay wide.)
func (s *Store) addDeltas(ctx context.Context, ns string, k store.BucketKey, ds []store.Delta) error {
	ds = mergeDeltas(ds)
	op := newOpID()
	for len(ds) > 0 {
		e := newExpr()
		e.where("(attribute_not_exists(%s) OR "+e.name(attrOp)+" <> %v)", attrOp, str(op))
		e.set = append(e.set, e.name(attrOp)+" = "+e.value(str(op)))
		refund := false
		for _, d := range ds {
			e.where("attribute_exists(%s)", limitAttr(d.Limit, fieldCapacity), nil)
			e.addN(limitAttr(d.Limit, fieldTokens), -d.Amount)
			e.addN(limitAttr(d.Limit, fieldConsumed), d.Amount)
			if d.Amount < 0 {
				// A refund brings the full time nearer by an amount this
				// call cannot compute without the parameters; 0 is a lower
				// bound of any time, and stops speculative debits until the
				// next normal write sets the bound afresh.
				e.setN(limitAttr(d.Limit, fieldFullAt), 0)
				refund = true
			}
		}
		if refund {
			// A normal write prepared before this refund must not apply
			// its bound on top of the reset: bump the version it checks.
			e.addN(attrVersion, 1)
		}
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                           &s.table,
			Key:                                 bucketKey(ns, k),
			UpdateExpression:                    e.update(),
			ConditionExpression:                 e.condition(),
			ExpressionAttributeNames:            e.names,
			ExpressionAttributeValues:           e.attrValues(),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var cond *types.ConditionalCheckFailedException
		if !errors.As(err, &cond) {
			if err != nil {
				return fmt.Errorf("dynamodb: adjust bucket %s/%s: %w", k.Entity, k.Resource, err)
			}
			return nil
		}
		if getS(cond.Item, attrOp) == op {
			return nil // an earlier attempt of this call was applied
		}
		// The bucket or some limits are gone: drop their deltas, keep the rest.
		var kept []store.Delta
		for _, d := range ds {
			if cond.Item != nil && cond.Item[limitAttr(d.Limit, fieldCapacity)] != nil {
				kept = append(kept, d)
			}
		}
		if len(kept) == len(ds) {
			return fmt.Errorf("dynamodb: adjust bucket %s/%s: condition failed with every limit present", k.Entity, k.Resource)
		}
		ds = kept
	}
	return nil
}
