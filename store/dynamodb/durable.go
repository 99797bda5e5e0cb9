package dynamodb

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Durable acquires (docs/dynamodb.md 4.13): a request that carries a lease
// record is one transaction of every bucket's write and the record's
// creation, so that the record exists if and only if its debit does.

// consumeLeased decides a request that carries a lease record: every
// bucket's planned write and the record's creation go in one transaction.
// It plans from this process's images of the items where it holds them
// (a warm acquire is one call), else from a consistent read; after a lost
// race, or a refusal planned from an image, it plans again from a read.
// A sharded bucket is debited on one shard, as the single-bucket path's
// first try would be.
func (en *engine) consumeLeased(ctx context.Context, b *budget, ns string, req *store.ConsumeRequest) (bool, error) {
	if len(req.Lease.Buckets) != len(req.Buckets) {
		return false, model.Invalid("lease", req.Lease.ID, "the record must list the request's buckets in order")
	}
	if err := checkLeaseID(req.Lease.ID); err != nil {
		return false, err
	}
	cached := true
	for {
		ts := make([]*target, len(req.Buckets))
		for i := range req.Buckets {
			n := en.shardCounts.load(bucketID{ns, req.Buckets[i].Key})
			ts[i] = en.newTarget(&req.Buckets[i], en.pick(n)[0], n)
			req.Lease.Buckets[i].Placement = ts[i].shard
		}
		granted, err := en.transactLeased(ctx, ns, req, ts, cached)
		for i, t := range ts {
			t.report(&req.Buckets[i])
		}
		cause := retryCause(err)
		if cause == nil {
			return granted, err
		}
		cached = false
		if err := b.retry(ctx, cause); err != nil {
			return false, b.giveUp(err, "lease "+req.Lease.ID)
		}
	}
}

// transactLeased plans each target from its image and writes them with the
// record's creation, and the request's audit event if any, in one
// transaction.
func (en *engine) transactLeased(ctx context.Context, ns string, req *store.ConsumeRequest, ts []*target, cached bool) (bool, error) {
	imgs, fromCache, err := en.images(ctx, ns, ts, cached)
	if err != nil {
		return false, err
	}
	ws := make([]*write, len(ts))
	ok := true
	for i, t := range ts {
		if ws[i], err = en.planImage(ns, t, req.Now, imgs[i]); err != nil {
			return false, err
		}
		ok = ok && ws[i].sim.granted[0]
	}
	if !ok {
		if fromCache {
			return false, errReplan // a refusal counts only on what the table holds
		}
		return false, en.reusedIDTaken(ctx, ns, req)
	}
	creation, err := en.leaseCreation(ns, req)
	if err != nil {
		return false, err
	}
	items := make([]types.TransactWriteItem, 0, len(ts)+len(creation)+1)
	for _, w := range ws {
		items = append(items, w.transactItem())
	}
	items = append(items, creation...)
	if req.Event != nil {
		// The audit event rides in the same transaction (no extra call):
		// it is written if and only if the debit and the record are.
		ev, err := en.auditPut(ns, *req.Event)
		if err != nil {
			return false, err
		}
		items = append(items, ev)
	}
	_, err = en.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err != nil {
		var canceled *types.TransactionCanceledException
		if errors.As(err, &canceled) && failedIn(canceled.CancellationReasons, len(ts), len(ts)+len(creation)) {
			return false, fmt.Errorf("lease %q: %w", req.Lease.ID, model.ErrLeaseExists)
		}
		if cause := txRetry(err); cause != nil {
			return false, cause
		}
		return false, fmt.Errorf("dynamodb: lease transaction: %w", err)
	}
	for i, w := range ws {
		en.lanes.remember(itemID{ns, ts[i].key, ts[i].shard}, en.afterWrite(w, imgs[i], ts[i].shards))
	}
	return true, nil
}

// reusedIDTaken is the error of a refused request whose lease id is
// reused (an idempotency key's) and taken, by an open record or a kept
// tombstone: ErrLeaseExists, as the transaction would have answered had
// the buckets covered it, so that the caller replays the first request
// (which may be what emptied them) rather than report a refusal. nil for
// an id made at random, which no earlier request can hold. It costs the
// refusal one or two consistent reads.
func (en *engine) reusedIDTaken(ctx context.Context, ns string, req *store.ConsumeRequest) error {
	if !req.ReusedID {
		return nil
	}
	out, err := en.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &en.table, Key: leaseKey(ns, req.Lease.ID), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return fmt.Errorf("dynamodb: read lease: %w", err)
	}
	if out.Item == nil {
		it, err := en.getTombstone(ctx, ns, req.Lease.ID)
		if err != nil || it == nil {
			return err
		}
		rec, err := decodeLease(it)
		if err != nil || rec.KeepUntil <= req.Now {
			return err // a tombstone past KeepUntil frees its id
		}
	}
	return fmt.Errorf("lease %q: %w", req.Lease.ID, model.ErrLeaseExists)
}

// failedIn reports whether the condition of any of the transaction's
// items from to to (excluded) failed.
func failedIn(reasons []types.CancellationReason, from, to int) bool {
	for i := from; i < to; i++ {
		if failed(reasons, i) {
			return true
		}
	}
	return false
}

// leaseCreation returns the transaction items that create req.Lease: the
// Put of its open record, or of its tombstone if it is born ended, on the
// condition that its key is free; and, with ReusedID, a ConditionCheck of
// the other key (ErrLeaseExists if either fails). A reused id must find no
// open record and no kept tombstone. An id made at random needs no check
// of the other key: the only record that can have it is one written by a
// retry of the same request, which is of the same kind, at the same key.
func (en *engine) leaseCreation(ns string, req *store.ConsumeRequest) ([]types.TransactWriteItem, error) {
	rec := req.Lease
	it, err := encodeLease(ns, rec)
	if err != nil {
		return nil, err
	}
	put := &types.Put{TableName: &en.table, Item: it, ConditionExpression: aws.String("attribute_not_exists(PK)")}
	items := []types.TransactWriteItem{{Put: put}}
	if !req.ReusedID {
		return items, nil
	}
	cond, names, vals := keptCond(req.Now)
	if rec.Ended() {
		// A tombstone past its KeepUntil is replaced.
		put.ConditionExpression, put.ExpressionAttributeNames, put.ExpressionAttributeValues = &cond, names, vals
		return append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: &en.table, Key: leaseKey(ns, rec.ID), ConditionExpression: aws.String("attribute_not_exists(PK)"),
		}}), nil
	}
	return append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: &en.table, Key: tombstoneKey(ns, rec.ID), ConditionExpression: &cond,
		ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
	}}), nil
}
