package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// Listing durable lease records (docs/dynamodb.md 4.13, "List").

// ListLeases implements store.Leases. With an entity, it finds the
// records through GSI3 (the entity's partition, eventually consistent)
// and reads them; otherwise it queries every lease partition of the
// namespace from q.After, consistently, and merges them in id order.
func (s *Store) ListLeases(ctx context.Context, ns string, q store.LeaseQuery) ([]store.LeaseRecord, string, error) {
	if err := q.Validate(); err != nil {
		return nil, "", err
	}
	var recs []store.LeaseRecord
	var err error
	if q.Entity != "" {
		recs, err = s.leasesOfEntity(ctx, ns, &q)
	} else {
		recs, err = s.leasesOfNamespace(ctx, ns, &q)
	}
	if err != nil {
		return nil, "", err
	}
	slices.SortFunc(recs, func(a, b store.LeaseRecord) int { return strings.Compare(a.ID, b.ID) })
	if len(recs) <= q.Limit {
		return recs, "", nil
	}
	recs = recs[:q.Limit]
	return recs, recs[q.Limit-1].ID, nil
}

// leasesOfEntity returns the records q selects among the entity's.
func (s *Store) leasesOfEntity(ctx context.Context, ns string, q *store.LeaseQuery) ([]store.LeaseRecord, error) {
	prefix := "LEASE#"
	if q.Resource != "" {
		prefix = schema.LeaseGSI3SK(q.Resource, "")
	}
	keys, err := s.query(ctx, &dynamodb.QueryInput{
		TableName: &s.table, IndexName: aws.String(gsi3),
		KeyConditionExpression:    aws.String("GSI3PK = :pk AND begins_with(GSI3SK, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(entityPK(ns, q.Entity)), ":p": str(prefix)},
	})
	if err != nil {
		return nil, err
	}
	var want []item
	for _, k := range keys {
		if getS(k, attrSK) > q.After {
			want = append(want, item{attrPK: k[attrPK], attrSK: k[attrSK]})
		}
	}
	its, err := s.readItems(ctx, s.newBudget(), want)
	if err != nil {
		return nil, err
	}
	var out []store.LeaseRecord
	for _, it := range its {
		if it == nil {
			continue // ended since the index saw it
		}
		rec, err := decodeLease(it)
		if err != nil {
			return nil, err
		}
		if q.Selects(&rec) {
			out = append(out, rec)
		}
	}
	return out, nil
}

// leasesOfNamespace returns up to q.Limit+1 records q selects from each
// lease partition: enough to fill the page and tell whether another
// follows.
func (s *Store) leasesOfNamespace(ctx context.Context, ns string, q *store.LeaseQuery) ([]store.LeaseRecord, error) {
	parts := make([][]store.LeaseRecord, schema.LeasePartitions)
	errs := make([]error, schema.LeasePartitions)
	parallel(schema.LeasePartitions, func(i int) { parts[i], errs[i] = s.leasePartition(ctx, ns, i, q) })
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return slices.Concat(parts...), nil
}

// leasePartition returns up to q.Limit+1 records q selects from lease
// partition i, in id order. Its key condition stops below the partition's
// tombstones (schema.TombstoneMark), so that the query never reads one.
// A sort key has one condition: after q.After, it is BETWEEN q.After and
// the mark, and the record q.After itself, if it is still there, is read
// and dropped.
func (s *Store) leasePartition(ctx context.Context, ns string, i int, q *store.LeaseQuery) ([]store.LeaseRecord, error) {
	in := &dynamodb.QueryInput{
		TableName: &s.table, ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("PK = :pk AND SK < :tomb"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(schema.LeasePartitionPK(ns, i)), ":tomb": str(schema.TombstoneMark),
		},
	}
	if q.After >= schema.TombstoneMark {
		return nil, nil // after every lease id
	}
	if q.After != "" { // a key condition cannot compare with ""
		in.KeyConditionExpression = aws.String("PK = :pk AND SK BETWEEN :after AND :tomb")
		in.ExpressionAttributeValues[":after"] = str(q.After)
	}
	if q.ExpiredBy > 0 {
		in.FilterExpression = aws.String("#x > :zero AND #x <= :by")
		in.ExpressionAttributeNames = map[string]string{"#x": schema.AttrExpires}
		in.ExpressionAttributeValues[":zero"], in.ExpressionAttributeValues[":by"] = num(0), num(q.ExpiredBy)
	}
	var out []store.LeaseRecord
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() && len(out) <= q.Limit {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("dynamodb: list leases: %w", err)
		}
		for _, it := range page.Items {
			if getS(it, attrSK) == q.After {
				continue
			}
			rec, err := decodeLease(it)
			if err != nil {
				return nil, err
			}
			out = append(out, rec)
		}
	}
	return out, nil
}
