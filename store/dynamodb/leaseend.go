package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// Lease endings (docs/dynamodb.md 4.13): the deletion of a durable lease's
// record (or its replacement by a tombstone, tombstones.go) and the
// give-back of what it holds, in one transaction.

// EndLease implements store.Leases: one transaction deletes the record
// (conditioned on its version, and for a reconciler on its expiry), puts
// its tombstone if e keeps one (conditioned then on the record being the
// copy the tombstone is made from: e.Record, or one read, endedRecord),
// applies the deltas to
// each bucket item (the delta writes of addDeltas) and puts the audit
// event. A bucket item whose condition fails (a limit gone or changed, the
// item deleted) is read back from the cancellation and the transaction
// planned again; the record's condition failing is the answer, unless
// only the copy was stale. The SDK's idempotency token makes its own
// retries of the transaction safe.
func (en *engine) EndLease(ctx context.Context, ns string, e store.LeaseEnding) error {
	if err := checkLeaseID(e.ID); err != nil {
		return err
	}
	var known *storedLease // the record a tombstone copies
	if e.KeepUntil > 0 {
		l, err := en.endedRecord(ctx, ns, &e)
		if err != nil {
			return err
		}
		known = &l
	}
	groups := groupDeltas(ns, e.Deltas)
	for i := range groups {
		groups[i].img = en.lanes.image(groups[i].id)
	}
	b := en.newBudget()
	for {
		items, err := en.endItems(ctx, ns, &e, groups, known)
		if err != nil {
			return err
		}
		_, err = en.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			for _, g := range groups {
				if g.img != nil && len(g.ds) > 0 {
					en.lanes.offer(g.id, g.img.withDeltas(g.ds))
				}
			}
			return nil
		}
		var canceled *types.TransactionCanceledException
		if !errors.As(err, &canceled) || txRetry(err) == nil {
			return fmt.Errorf("dynamodb: end lease: %w", err)
		}
		reasons := canceled.CancellationReasons
		if failed(reasons, 0) {
			old := reasons[0].Item
			l, ok := storedOf(old)
			if known == nil || !ok || !l.ends(&e) {
				return en.leaseRefused(ctx, ns, e.ID, old)
			}
			// Only the copy was stale (the ender's record, or the id's
			// record of another time): the tombstone is made again from
			// the record met.
			known = &l
		}
		cause := txRetry(err)
		if cause == errLostRace {
			if err := en.refreshGroups(groups, items, reasons); err != nil {
				return err
			}
		}
		if err := b.retry(ctx, cause); err != nil {
			return b.giveUp(err, "end lease "+e.ID)
		}
	}
}

// deltaGroup is the deltas of one bucket item, and the image they are
// written from (nil: not known).
type deltaGroup struct {
	id  itemID
	ds  []store.Delta
	img *image
	at  int // the group's index in the transaction; -1 if not in it
}

// groupDeltas groups deltas by the item they go to (their Placement's
// shard), merged per limit.
func groupDeltas(ns string, deltas []store.Delta) []deltaGroup {
	var out []deltaGroup
	for _, d := range deltas {
		id := itemID{ns, d.Key, max(d.Placement, 0)}
		i := slices.IndexFunc(out, func(g deltaGroup) bool { return g.id == id })
		if i < 0 {
			out = append(out, deltaGroup{id: id})
			i = len(out) - 1
		}
		out[i].ds = append(out[i].ds, d)
	}
	for i := range out {
		out[i].ds = mergeDeltas(out[i].ds)
	}
	return out
}

// endItems builds the ending's transaction: the record's deletion first,
// then, if known is not nil, the Put of the tombstone made from it, then
// each group's delta write (read first where its form is not known; a
// group left without deltas is dropped), then the event.
func (en *engine) endItems(ctx context.Context, ns string, e *store.LeaseEnding, groups []deltaGroup, known *storedLease) ([]types.TransactWriteItem, error) {
	cond := "#v = :v"
	vals := map[string]types.AttributeValue{":v": num(e.Version)}
	if e.ExpiredBy > 0 {
		cond += " AND #x > :zero AND #x <= :by"
		vals[":zero"], vals[":by"] = num(0), num(e.ExpiredBy)
	}
	items := []types.TransactWriteItem{{Delete: &types.Delete{
		TableName: &en.table, Key: leaseKey(ns, e.ID), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames:            map[string]string{"#v": schema.AttrLeaseVersion, "#x": schema.AttrExpires},
		ExpressionAttributeValues:           vals,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}}
	if e.ExpiredBy <= 0 {
		delete(items[0].Delete.ExpressionAttributeNames, "#x")
	}
	if known != nil {
		tomb, err := known.tombstone(ns, e)
		if err != nil {
			return nil, err
		}
		known.copyCond(items[0].Delete)
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &en.table, Item: tomb}})
	}
	for i := range groups {
		g := &groups[i]
		g.at = -1
		forms, ok := en.deltaForms(g.id, g.img, g.ds)
		if !ok {
			img, err := en.readImage(ctx, g.id)
			if err != nil {
				return nil, err
			}
			g.img, g.ds = img, keepPresent(g.ds, img)
			if forms, ok = en.deltaForms(g.id, g.img, g.ds); !ok {
				return nil, fmt.Errorf("dynamodb: end lease %q: no form for the deltas of %s/%s (a bug)", e.ID, g.id.key.Entity, g.id.key.Resource)
			}
		}
		if len(g.ds) == 0 {
			continue
		}
		t := &target{key: g.id.key, shard: g.id.shard}
		u := deltaExpr(newOpID(), 0, g.ds, forms).updateItem(&en.table, t.itemKey(ns), "")
		ti := transactUpdate(u)
		ti.Update.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		g.at = len(items)
		items = append(items, ti)
	}
	if e.Event != nil {
		ev, err := en.auditPut(ns, *e.Event)
		if err != nil {
			return nil, err
		}
		items = append(items, ev)
	}
	return items, nil
}

// refreshGroups takes, for each group whose write failed its condition,
// the item the cancellation returned: the next try plans from it, and
// drops the deltas of limits it no longer holds (as the contract says).
func (en *engine) refreshGroups(groups []deltaGroup, items []types.TransactWriteItem, reasons []types.CancellationReason) error {
	for i := range groups {
		g := &groups[i]
		if g.at < 0 || !failed(reasons, g.at) {
			continue
		}
		img, err := itemImage(reasons[g.at].Item)
		if err != nil {
			return err
		}
		g.img, g.ds = img, keepPresent(g.ds, img)
	}
	return nil
}
