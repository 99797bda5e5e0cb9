package dynamodb

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/store"
)

var _ store.BucketLister = (*Store)(nil)

// ListBuckets implements store.BucketLister: the resource's bucket keys
// from GSI2 (keys only; eventually consistent, so a bucket created a
// moment ago may be missing), then each bucket read consistently, a
// sharded one summed over its shards.
func (s *Store) ListBuckets(ctx context.Context, ns, resource, after string, limit int) ([]store.ListedBucket, error) {
	if err := store.ValidateBucketPage(resource, limit); err != nil {
		return nil, err
	}
	entities, err := s.bucketEntities(ctx, ns, resource, after, limit)
	if err != nil {
		return nil, err
	}
	keys := make([]store.BucketKey, len(entities))
	for i, e := range entities {
		keys[i] = store.BucketKey{Entity: e, Resource: resource}
	}
	recs, err := s.engine.ReadBuckets(ctx, ns, keys)
	if err != nil {
		return nil, err
	}
	out := make([]store.ListedBucket, 0, len(recs))
	for i, rec := range recs {
		if rec == nil {
			continue // deleted since the index listed it
		}
		out = append(out, store.ListedBucket{Entity: entities[i], Record: rec})
	}
	return out, nil
}

// bucketEntities returns up to limit entity ids, after after, that have a
// bucket of resource. GSI2 sort keys are "BUCKET#{entity}#{shard}": '#'
// sorts before every character of an entity id, so they sort by entity,
// and "BUCKET#{after}#~" is past every shard of after.
func (s *Store) bucketEntities(ctx context.Context, ns, resource, after string, limit int) ([]string, error) {
	low := "BUCKET#"
	if after != "" {
		low = "BUCKET#" + after + "#~"
	}
	in := &dynamodb.QueryInput{
		TableName: &s.table, IndexName: aws.String(gsi2),
		KeyConditionExpression:   aws.String("#pk = :pk AND #sk BETWEEN :low AND :high"),
		ExpressionAttributeNames: map[string]string{"#pk": attrGSI2PK, "#sk": attrGSI2SK},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(resourcePK(ns, resource)), ":low": str(low), ":high": str("BUCKET$"),
		},
	}
	var out []string
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() && len(out) < limit {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("dynamodb: list buckets of %s: %w", resource, err)
		}
		for _, it := range page.Items {
			e := getS(it, attrEntity)
			if e == "" {
				e = entityOfGSI2SK(getS(it, attrGSI2SK))
			}
			if e != "" && (len(out) == 0 || out[len(out)-1] != e) && len(out) < limit {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// entityOfGSI2SK reads the entity of "BUCKET#{entity}#{shard}".
func entityOfGSI2SK(sk string) string {
	rest := sk[len("BUCKET#"):]
	for i := len(rest) - 1; i >= 0; i-- {
		if rest[i] == '#' {
			return rest[:i]
		}
	}
	return ""
}
