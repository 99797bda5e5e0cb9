package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/store"
)

// consumeMany is the cascade path. When every bucket is known it is the
// fast path: parallel speculative writes; buckets whose speculative write
// failed but whose refill would cover the request are then written one by
// one through the read path (no transaction), and if any bucket finally
// refuses, everything debited is compensated. Otherwise (a cold cascade) all
// buckets are read and written in one transaction. A cascade through a
// sharded bucket goes bucket by bucket (see consumeEach).
func (s *Store) consumeMany(ctx context.Context, b *budget, ns string, req *store.ConsumeRequest) (bool, error) {
	for {
		var granted bool
		var err error
		if s.anySharded(ns, req) {
			granted, err = s.consumeEach(ctx, b, ns, req)
		} else {
			ts := make([]*target, len(req.Buckets))
			for i := range req.Buckets {
				ts[i] = s.newTarget(&req.Buckets[i], 0, 1)
			}
			granted, err = s.consumeManyOnce(ctx, b, ns, req, ts)
			for i, t := range ts {
				t.report(&req.Buckets[i])
				if granted && t.pressured() {
					s.split(ctx, ns, &req.Buckets[i], 1, req.Now)
				}
			}
		}
		cause := retryCause(err)
		if cause == nil {
			return granted, err
		}
		if err := b.retry(ctx, cause); err != nil {
			return false, b.giveUp(err, "cascade of "+req.Buckets[0].Key.Entity+"/"+req.Buckets[0].Key.Resource)
		}
	}
}

// consumeManyOnce makes one attempt at an unsharded cascade. Every attempt
// prefers the fast path: a lost race on the slow path usually means a
// concurrent writer has just created the buckets.
func (s *Store) consumeManyOnce(ctx context.Context, b *budget, ns string, req *store.ConsumeRequest, ts []*target) (bool, error) {
	if s.speculative && s.allKnownAndDebited(ns, req) {
		granted, decided, err := s.fastMany(ctx, b, ns, req, ts)
		if err != nil || decided {
			return granted, err
		}
	}
	return s.transact(ctx, b, ns, req, ts)
}

func (s *Store) anySharded(ns string, req *store.ConsumeRequest) bool {
	for i := range req.Buckets {
		if s.shardsOf(bucketID{ns, req.Buckets[i].Key}) > 1 {
			return true
		}
	}
	return false
}

func (s *Store) allKnownAndDebited(ns string, req *store.ConsumeRequest) bool {
	for i := range req.Buckets {
		if !s.isKnown(bucketID{ns, req.Buckets[i].Key}) || !debits(&req.Buckets[i]) {
			return false
		}
	}
	return true
}

// consumeEach is the cascade path through a sharded bucket: each bucket is
// acquired on its own, in parallel, through the single-bucket path (shards,
// retries and gathering included), and if any refuses, the others are given
// back. Like the fast path, it never over-admits; a concurrent request may
// see a debit that is about to be given back.
func (s *Store) consumeEach(ctx context.Context, b *budget, ns string, req *store.ConsumeRequest) (bool, error) {
	n := len(req.Buckets)
	granted := make([]bool, n)
	errs := make([]error, n)
	parallel(n, func(i int) { granted[i], errs[i] = s.consumeOne(ctx, b, ns, &req.Buckets[i], req.Now) })
	all := true
	for _, g := range granted {
		all = all && g
	}
	err := errors.Join(errs...)
	if all && err == nil {
		return true, nil
	}
	if cerr := s.compensate(ctx, ns, req, granted); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return false, err
}

// fastMany runs the fast cascade path. decided is false when a bucket turned
// out to be missing and the slow path must create it (nothing stays debited
// then).
func (s *Store) fastMany(ctx context.Context, b *budget, ns string, req *store.ConsumeRequest, ts []*target) (granted, decided bool, err error) {
	n := len(ts)
	specs := make([]speculation, n)
	errs := make([]error, n)
	parallel(n, func(i int) { specs[i], errs[i] = s.speculate(ctx, ns, ts[i], req.Now) })
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
		if errs[i] = s.checkLayout(ns, ts[i], specs[i].old); errs[i] != nil {
			continue
		}
		if specs[i].old == nil {
			s.known.forget(ts[i].id(ns))
			missing = true
			continue
		}
		_, ok, err := prepareFrom(specs[i].old, &ts[i].req, req.Now)
		if err != nil {
			errs[i] = err
		}
		refused = refused || !ok
	}
	if err := errors.Join(errs...); err != nil || refused || missing {
		if cerr := s.compensate(ctx, ns, req, debited); cerr != nil || err != nil {
			return false, true, joinReplan(err, cerr)
		}
		// A missing bucket must be created: the slow path does that, and
		// its reads also give every bucket's exact Observed state.
		return false, !missing, nil
	}
	// Refill covers every failed bucket: write those through the read path.
	parallel(n, func(i int) {
		if !debited[i] {
			debited[i], errs[i] = s.writeLoop(ctx, b, ns, ts[i], req.Now, specs[i].old, true)
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
	return false, true, joinReplan(err, nil)
}

// joinReplan joins errors, except that a layout change alone (on one or
// more buckets) stays the bare errReplan the caller checks for.
func joinReplan(err, cerr error) error {
	if cerr == nil && onlyReplan(err) {
		return errReplan
	}
	return errors.Join(err, cerr)
}

// onlyReplan reports whether err is errReplan, or errors joining only
// errReplan.
func onlyReplan(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !onlyReplan(e) {
				return false
			}
		}
		return len(j.Unwrap()) > 0
	}
	return err == errReplan
}

// compensate gives back what the request debited in the marked buckets,
// where each was debited (its Placement).
func (s *Store) compensate(ctx context.Context, ns string, req *store.ConsumeRequest, debited []bool) error {
	var undo []store.Delta
	for i, d := range debited {
		if !d {
			continue
		}
		b := &req.Buckets[i]
		for _, lr := range b.Limits {
			if lr.Amount > 0 {
				undo = append(undo, store.Delta{Key: b.Key, Limit: lr.Name, Amount: -lr.Amount, Placement: b.Placement})
			}
		}
	}
	if len(undo) == 0 {
		return nil
	}
	if err := s.applyDeltas(context.WithoutCancel(ctx), ns, undo, -1); err != nil {
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
// transaction. A cancelled transaction returns its retry cause (see txRetry).
func (s *Store) transact(ctx context.Context, b *budget, ns string, req *store.ConsumeRequest, ts []*target) (bool, error) {
	keys := make([]item, len(ts))
	for i, t := range ts {
		keys[i] = t.itemKey(ns)
	}
	olds, err := s.readItems(ctx, b, keys)
	if err != nil {
		return false, err
	}
	recs := make([]*store.Record, len(olds))
	ps := make([]*store.Record, len(olds))
	ok := true
	for i, it := range olds {
		if err := s.checkLayout(ns, ts[i], it); err != nil {
			return false, err
		}
		if it != nil {
			if recs[i], err = decodeRecord(it); err != nil {
				return false, err
			}
		}
		ps[i] = prepared(recs[i], req.Now)
		if !store.Prepare(ps[i], &ts[i].req, req.Now) {
			ok = false
		}
	}
	if !ok {
		return false, nil
	}
	items := make([]types.TransactWriteItem, len(ts))
	for i, t := range ts {
		items[i] = transactItem(s.writeInput(ns, t, req.Now, olds[i], recs[i], ps[i]))
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err != nil {
		if cause := txRetry(err); cause != nil {
			return false, cause
		}
		return false, fmt.Errorf("dynamodb: cascade transaction: %w", err)
	}
	for _, t := range ts {
		s.known.store(t.id(ns), t.shards)
	}
	return true, nil
}

// transactItem turns a single-item write into a transaction item; a write
// that changes nothing becomes a condition check, as the grant still
// depends on it.
func transactItem(in writeInput) types.TransactWriteItem {
	if in.put != nil {
		return types.TransactWriteItem{Put: &types.Put{
			TableName: in.put.TableName, Item: in.put.Item, ConditionExpression: in.put.ConditionExpression,
		}}
	}
	u := in.update
	if u.UpdateExpression == nil {
		return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: u.TableName, Key: u.Key, ConditionExpression: u.ConditionExpression,
			ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
		}}
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
		ConditionExpression: u.ConditionExpression, ExpressionAttributeNames: u.ExpressionAttributeNames,
		ExpressionAttributeValues: u.ExpressionAttributeValues,
	}}
}
