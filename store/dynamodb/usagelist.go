package dynamodb

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Reading usage snapshots back: one entity's from its partition, one
// resource's from GSI2 (docs/dynamodb.md, section 2.5).

// decodeUsage reads a snapshot item.
func decodeUsage(it item) (store.UsageSnapshot, error) {
	var snap store.UsageSnapshot
	start, err := getN(it, attrUsageStart)
	if err != nil {
		return snap, err
	}
	snap.Key = store.UsageKey{Entity: getS(it, attrEntity), Resource: getS(it, attrResource),
		Window: store.Window(getS(it, attrUsageWindow)), Start: start}
	if snap.Events, err = getN(it, attrUsageEvents); err != nil {
		return snap, err
	}
	if _, ok := it[attrUsageExpires]; ok {
		if snap.Expires, err = getN(it, attrUsageExpires); err != nil {
			return snap, err
		}
	}
	snap.Consumed = map[string]int64{}
	for name := range it {
		if limit, ok := strings.CutPrefix(name, usageCounterPrefix); ok {
			if snap.Consumed[limit], err = getN(it, name); err != nil {
				return snap, err
			}
		}
	}
	return snap, nil
}

// ListUsage implements store.UsageStore.
//
// By entity: one strongly consistent Query of the entity's partition, its
// sort key between bounds derived from the resource, the start range and
// the cursor; items of the other window (when no resource is given) and
// expired ones are dropped here.
//
// By resource: a Query of GSI2 (keys only; eventually consistent, so a
// snapshot created a moment ago may be missing), then one strongly
// consistent BatchGetItem per page for the items themselves.
//
// Both page through DynamoDB with Limit set to what is still missing, until
// the page is full or the range is exhausted.
func (s *Store) ListUsage(ctx context.Context, ns string, q store.UsageQuery) ([]store.UsageSnapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit, err := q.Validate()
	if err != nil {
		return nil, err
	}
	if q.Entity != "" {
		if err := model.ValidateEntityID(q.Entity); err != nil {
			return nil, err
		}
	}
	if q.Resource != "" {
		if err := model.ValidateResource(q.Resource); err != nil {
			return nil, err
		}
	}
	if q.To <= q.From {
		return []store.UsageSnapshot{}, nil
	}
	in, atCursor := s.usageQuery(ns, q)
	if in == nil {
		return []store.UsageSnapshot{}, nil
	}
	out := []store.UsageSnapshot{}
	for {
		n := limit - len(out)
		if atCursor && in.ExclusiveStartKey == nil {
			n++ // the range starts at the cursor's own snapshot, which is dropped
		}
		in.Limit = aws.Int32(int32(n))
		page, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("dynamodb: list usage: %w", err)
		}
		its := page.Items
		if !q.ByEntity() {
			if its, err = s.usageItems(ctx, its); err != nil {
				return nil, err
			}
		}
		for _, it := range its {
			snap, err := decodeUsage(it)
			if err != nil {
				return nil, err
			}
			if !q.Matches(snap.Key, snap.Expires) || !q.IsAfter(snap.Key) {
				continue
			}
			snap.Cursor = q.UsageCursor(snap.Key)
			out = append(out, snap)
		}
		if len(out) >= limit || page.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	// Already in order (the sort keys sort as the cursors); sorting again
	// costs little and keeps the order the contract's, whatever the keys.
	q.SortUsage(out)
	return out[:min(len(out), limit)], nil
}

// usageQuery builds the Query of q, or returns nil if no key can match.
// The bounds are inclusive (BETWEEN): when the cursor is the lower bound
// (atCursor), the snapshot at the cursor itself may come first; it, and
// anything outside [From, To) that the bounds let through, are dropped by
// the caller.
func (s *Store) usageQuery(ns string, q store.UsageQuery) (in *dynamodb.QueryInput, atCursor bool) {
	w := string(q.Window)
	var pk, lo, hi, after string
	if q.ByEntity() {
		pk = entityPK(ns, q.Entity)
		if q.Resource == "" {
			// Every resource and both windows: the window is filtered here.
			lo, hi = skUsagePrefix, "#USAGE$" // '$' follows '#'
		} else {
			lo, hi = usageStartBounds(skUsagePrefix+q.Resource+"#"+w+"#", q, "")
		}
		if q.After != "" {
			res, start, _ := strings.Cut(q.After, "#")
			after = skUsagePrefix + res + "#" + w + "#" + start
		}
	} else {
		pk = resourcePK(ns, q.Resource)
		// Each start is followed by "#{entity}": "$" ends the last one.
		lo, hi = usageStartBounds(gsi2UsagePrefix+w+"#", q, "$")
		if q.After != "" {
			after = gsi2UsagePrefix + w + "#" + q.After
		}
	}
	if after != "" && after >= lo {
		lo, atCursor = after, true
	}
	if lo > hi {
		return nil, false
	}
	in = &dynamodb.QueryInput{
		TableName: &s.table,
		ExpressionAttributeValues: item{
			":pk": str(pk), ":lo": str(lo), ":hi": str(hi),
		},
	}
	if q.ByEntity() {
		in.KeyConditionExpression = aws.String("PK = :pk AND SK BETWEEN :lo AND :hi")
		in.ConsistentRead = aws.Bool(true)
	} else {
		in.IndexName = aws.String(gsi2)
		in.KeyConditionExpression = aws.String("GSI2PK = :pk AND GSI2SK BETWEEN :lo AND :hi")
	}
	return in, atCursor
}

// usageStartBounds returns the key bounds of starts in [q.From, q.To) under
// prefix; end follows the last start's own key. Padded non-negative starts
// sort as numbers; a negative one ("-000…") sorts before them all, but not
// in numeric order, so a range reaching below zero is not bounded from
// below and is filtered by the caller. (No real window starts before 1970;
// this only keeps such queries correct.)
func usageStartBounds(prefix string, q store.UsageQuery, end string) (string, string) {
	lo, hi := prefix, ""
	if q.From >= 0 {
		lo = prefix + usagePadStart(q.From)
	}
	if q.To > 0 {
		hi = prefix + usagePadStart(q.To-1) + end
	} else {
		hi = prefix + "0" // below every non-negative start, above every negative one
	}
	return lo, hi
}

// usageItems reads the items whose keys a GSI2 query returned, in the same
// order, leaving out any deleted since (the index lags the table).
func (s *Store) usageItems(ctx context.Context, keys []item) ([]item, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	ks := make([]item, len(keys))
	for i, k := range keys {
		ks[i] = item{attrPK: k[attrPK], attrSK: k[attrSK]}
	}
	its, err := s.batchGet(ctx, ks)
	if err != nil {
		return nil, fmt.Errorf("dynamodb: list usage: %w", err)
	}
	return slices.DeleteFunc(its, func(it item) bool { return it == nil }), nil
}
