package dynamodb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/store"
)

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

// ApplyDeltas implements store.Buckets: one unconditional-ADD UpdateItem per
// bucket item (guarded only so that a missing bucket or limit is not
// created half-formed), items in parallel. A delta goes to the shard its
// debit came from (its Placement; shard 0 for a gathered debit).
func (s *Store) ApplyDeltas(ctx context.Context, ns string, deltas []store.Delta) error {
	return s.applyDeltas(ctx, ns, deltas, 0)
}

// applyDeltas applies deltas, and adds events to the acquire counter of
// each bucket they touch (a compensation takes back the acquire it undoes).
func (s *Store) applyDeltas(ctx context.Context, ns string, deltas []store.Delta, events int64) error {
	type dest struct {
		k     store.BucketKey
		shard int
	}
	groups := map[dest][]store.Delta{}
	var order []dest
	for _, d := range deltas {
		to := dest{d.Key, max(d.Placement, 0)}
		if _, ok := groups[to]; !ok {
			order = append(order, to)
		}
		groups[to] = append(groups[to], d)
	}
	apply := func(i int) error {
		return s.addDeltas(ctx, ns, &target{key: order[i].k, shard: order[i].shard}, groups[order[i]], events)
	}
	if len(order) == 1 {
		return apply(0)
	}
	errs := make([]error, len(order))
	parallel(len(order), func(i int) { errs[i] = apply(i) })
	return errors.Join(errs...)
}

// addDeltas applies deltas to one bucket with one UpdateItem. The ADDs are
// not idempotent, and the SDK retries a request whose response was lost
// after DynamoDB applied it; so the write also records a random operation id
// (attribute "op"), on condition that the item does not hold it already. A
// retry that finds its own id knows the first attempt was applied. (Another
// write landing between the attempts would overwrite the id; that window is
// one retry delay wide.)
func (s *Store) addDeltas(ctx context.Context, ns string, t *target, ds []store.Delta, events int64) error {
	k := t.key
	ds = mergeDeltas(ds)
	op := newOpID()
	for len(ds) > 0 {
		e := newExpr()
		e.where("(attribute_not_exists(%s) OR "+e.name(attrOp)+" <> %v)", attrOp, str(op))
		e.set = append(e.set, e.name(attrOp)+" = "+e.value(str(op)))
		if events != 0 {
			e.addN(attrEvents, events)
		}
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
		s.deltaExpiry(e, ds)
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                           &s.table,
			Key:                                 t.itemKey(ns),
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
