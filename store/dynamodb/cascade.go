package dynamodb

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/store"
)

// consumeMany is the cascade path. With speculation on, every bucket is
// acquired on its own, in parallel, through the single-bucket path (its
// lane: one write, shards and retries included), and if any refuses, the
// others are given back (consumeEach). With speculation off, all buckets
// are read and written in one transaction, unless one is sharded.
func (en *engine) consumeMany(ctx context.Context, b *budget, ns string, req *store.ConsumeRequest) (bool, error) {
	if en.speculative || en.anySharded(ns, req) {
		return en.consumeEach(ctx, b, ns, req)
	}
	for {
		ts := make([]*target, len(req.Buckets))
		for i := range req.Buckets {
			ts[i] = en.newTarget(&req.Buckets[i], 0, 1)
		}
		granted, err := en.transact(ctx, ns, req, ts)
		for i, t := range ts {
			t.report(&req.Buckets[i])
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

func (en *engine) anySharded(ns string, req *store.ConsumeRequest) bool {
	for i := range req.Buckets {
		if en.shardCounts.load(bucketID{ns, req.Buckets[i].Key}) > 1 {
			return true
		}
	}
	return false
}

// consumeEach acquires each bucket of a cascade on its own, in parallel,
// and gives back what was debited if any refuses. The debits are not
// applied at one instant: while a cascade is being decided, a bucket can
// hold a debit that is later given back, so concurrent requests may be
// refused (under-admission), but a grant is returned only when every
// bucket holds its debit, so nothing is ever over-admitted.
func (en *engine) consumeEach(ctx context.Context, b *budget, ns string, req *store.ConsumeRequest) (bool, error) {
	n := len(req.Buckets)
	granted := make([]bool, n)
	errs := make([]error, n)
	parallel(n, func(i int) { granted[i], errs[i] = en.consumeOne(ctx, b, ns, &req.Buckets[i], req.Now) })
	all := true
	for _, g := range granted {
		all = all && g
	}
	err := errors.Join(errs...)
	if all && err == nil {
		return true, nil
	}
	if cerr := en.compensate(ctx, ns, req, granted); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return false, err
}

// compensate gives back what the request debited in the marked buckets,
// where each was debited (its Placement), under a context that the
// caller's cancellation does not end: a cancelled caller must not strand a
// debit.
func (en *engine) compensate(ctx context.Context, ns string, req *store.ConsumeRequest, debited []bool) error {
	var undo []store.Delta
	for i, d := range debited {
		if d {
			undo = append(undo, undoDeltas(&req.Buckets[i], req.Buckets[i].Placement)...)
		}
	}
	if len(undo) == 0 {
		return nil
	}
	if err := en.applyDeltas(context.WithoutCancel(ctx), ns, undo, -1); err != nil {
		return fmt.Errorf("dynamodb: compensate cascade: %w", err)
	}
	return nil
}

// transact reads every bucket, decides the request on each, and writes
// them in one transaction: a bucket that needs no write, but on whose
// state the grant depends, is a condition check. A cancelled transaction
// returns its retry cause (see txRetry).
func (en *engine) transact(ctx context.Context, ns string, req *store.ConsumeRequest, ts []*target) (bool, error) {
	keys := make([]item, len(ts))
	for i, t := range ts {
		keys[i] = t.itemKey(ns)
	}
	olds, err := en.readItems(ctx, en.newBudget(), keys)
	if err != nil {
		return false, err
	}
	ws := make([]*write, len(ts))
	ok := true
	for i, t := range ts {
		if ws[i], err = en.planRead(ns, t, req.Now, olds[i]); err != nil {
			return false, err
		}
		ok = ok && ws[i].sim.granted[0]
	}
	if !ok {
		return false, nil
	}
	items := make([]types.TransactWriteItem, len(ts))
	for i, w := range ws {
		items[i] = w.transactItem()
	}
	_, err = en.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err != nil {
		if cause := txRetry(err); cause != nil {
			return false, cause
		}
		return false, fmt.Errorf("dynamodb: cascade transaction: %w", err)
	}
	return true, nil
}
