package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// GSI4, the namespace index, holds every item of a namespace (buckets,
// lease records and tombstones, audit events, usage snapshots, configs,
// entities, API keys) under NamespaceIndexParts partition keys,
// {ns}#{0..f}, the part a hash of the item's own key (schema.
// NamespaceIndexPart): one index partition takes about 1,000 writes a
// second, and a namespace's churn of slot leases would otherwise meet that
// ceiling at a few hundred leases a second (docs/scale.md 4). A reader of
// the whole namespace queries every part; one that needs the index's sort
// order merges the parts, each of which is sorted (mergeIndex).
//
// Items an older Tollgate wrote have the bare id as their key
// (schema.LegacyNamespaceIndexKey). Readers query it too until the table's
// version record carries schema.AttrNamespaceIndex, which
// Admin.ReindexNamespaceIndex (tollgate deploy) records once it has moved
// every such item to its part.

// gsi4PartPage bounds the index entries one Query of one part evaluates in
// a listing: the namespace's parts together evaluate about gsi4Page.
const gsi4PartPage = gsi4Page / schema.NamespaceIndexParts

// namespaceIndexKeys returns the GSI4 partition keys of namespace ns that
// may hold entries: its parts and, until the table records that none is
// left there, the legacy key. Once the record is seen, the client never
// reads it again (a migrated table stays migrated).
func (c *client) namespaceIndexKeys(ctx context.Context, ns string) ([]string, error) {
	if !c.nsIndexSpread.Load() {
		out, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:            &c.table,
			Key:                  item{attrPK: str(registryPK()), attrSK: str(skVersion)},
			ProjectionExpression: aws.String(schema.AttrNamespaceIndex),
		})
		if err != nil {
			return nil, fmt.Errorf("dynamodb: read schema version: %w", err)
		}
		if n, _ := getN(out.Item, schema.AttrNamespaceIndex); n == schema.NamespaceIndexParts {
			c.nsIndexSpread.Store(true)
		}
	}
	return schema.NamespaceIndexKeys(ns, !c.nsIndexSpread.Load()), nil
}

// indexPart is the stream of one partition key's entries of a GSI4 query:
// the entries of the page read and not yet visited, and the query of the
// next page.
type indexPart struct {
	in   dynamodb.QueryInput
	buf  []item
	done bool
}

// fill reads pages of p until it has an entry or none is left (a page
// whose entries the filter all dropped is empty but not the last).
func (c *client) fill(ctx context.Context, p *indexPart) error {
	for len(p.buf) == 0 && !p.done {
		out, err := c.db.Query(ctx, &p.in)
		if err != nil {
			return fmt.Errorf("dynamodb: query GSI4: %w", err)
		}
		p.buf = out.Items
		p.in.ExclusiveStartKey = out.LastEvaluatedKey
		p.done = out.LastEvaluatedKey == nil
	}
	return nil
}

// mergeIndex visits in GSI4 sort-key order the entries that the query in
// (on GSI4, its key condition naming the partition key :ns) finds under
// every key of keys, until visit returns false. The first page of every
// key is read in parallel, the next page of one only once its entries are
// visited, so that a short listing reads little more than it returns. Equal
// sort keys (an entity's configs share their entity's) come in table key
// order.
func (c *client) mergeIndex(ctx context.Context, keys []string, in *dynamodb.QueryInput, visit func(it item) bool) error {
	parts := make([]*indexPart, len(keys))
	for i, k := range keys {
		p := &indexPart{in: *in}
		p.in.ExpressionAttributeValues = maps.Clone(in.ExpressionAttributeValues)
		p.in.ExpressionAttributeValues[":ns"] = str(k)
		parts[i] = p
	}
	errs := make([]error, len(parts))
	parallel(len(parts), func(i int) { errs[i] = c.fill(ctx, parts[i]) })
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for {
		var next *indexPart
		for _, p := range parts {
			if len(p.buf) > 0 && (next == nil || indexLess(p.buf[0], next.buf[0])) {
				next = p
			}
		}
		if next == nil {
			return nil
		}
		it := next.buf[0]
		next.buf = next.buf[1:]
		if !visit(it) {
			return nil
		}
		if err := c.fill(ctx, next); err != nil {
			return err
		}
	}
}

// indexLess orders GSI4 entries by sort key, then table key.
func indexLess(a, b item) bool {
	if x, y := getS(a, attrGSI4SK), getS(b, attrGSI4SK); x != y {
		return x < y
	}
	if x, y := getS(a, attrPK), getS(b, attrPK); x != y {
		return x < y
	}
	return getS(a, attrSK) < getS(b, attrSK)
}

// namespaceIDs returns the id of every namespace in the registry.
func (a *Admin) namespaceIDs(ctx context.Context) ([]string, error) {
	var ids []string
	p := dynamodb.NewQueryPaginator(a.db, &dynamodb.QueryInput{
		TableName:                 &a.table,
		KeyConditionExpression:    aws.String("PK = :pk AND begins_with(SK, :p)"),
		ExpressionAttributeValues: item{":pk": str(registryPK()), ":p": str(skNamespacePrefix)},
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("dynamodb: list namespaces: %w", err)
		}
		for _, it := range page.Items {
			ids = append(ids, getS(it, "id"))
		}
	}
	return ids, nil
}

// ReindexNamespaceIndex moves the GSI4 entry of every item an older
// Tollgate wrote under its namespace's bare id (the legacy key) to the
// item's part, {ns}#{0..f}, in every namespace of the table, then records
// in the schema version record (schema.AttrNamespaceIndex) that the index
// is spread, so that readers stop querying the legacy key; it returns how
// many items it moved. Each move is one UpdateItem of GSI4PK, on the
// condition that it still holds the legacy key: an item deleted or moved
// meanwhile is skipped, never recreated. An interrupted run leaves the
// moved items moved and the record unwritten; running it again moves the
// rest, and running it on a migrated table moves nothing (one Query of the
// legacy key per namespace). tollgate deploy runs it, after ReindexAudit.
// Items written under the legacy key after it ran (by a process of an
// older Tollgate still running) are unseen by listings until it runs
// again. It needs Query on GSI4 and the registry, UpdateItem and GetItem:
// the operator's persona.
func (a *Admin) ReindexNamespaceIndex(ctx context.Context) (int, error) {
	ctx = unbounded(ctx) // an operator's: not bounded by the call timeout
	ids, err := a.namespaceIDs(ctx)
	if err != nil {
		return 0, fmt.Errorf("dynamodb: reindex namespace index: %w", err)
	}
	n := 0
	for _, ns := range ids {
		k, err := a.spreadNamespace(ctx, ns)
		n += k
		if err != nil {
			return n, err
		}
	}
	_, err = a.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &a.table,
		Key:                       item{attrPK: str(registryPK()), attrSK: str(skVersion)},
		UpdateExpression:          aws.String("SET #n = :n"),
		ConditionExpression:       aws.String("attribute_exists(PK)"),
		ExpressionAttributeNames:  map[string]string{"#n": schema.AttrNamespaceIndex},
		ExpressionAttributeValues: item{":n": num(schema.NamespaceIndexParts)},
	})
	var cond *types.ConditionalCheckFailedException
	if errors.As(err, &cond) {
		return n, fmt.Errorf("%w: table %s has no schema version record", ErrSchemaUnversioned, a.table)
	}
	if err != nil {
		return n, fmt.Errorf("dynamodb: record namespace index: %w", err)
	}
	a.nsIndexSpread.Store(true)
	return n, nil
}

// spreadNamespace is ReindexNamespaceIndex in namespace ns.
func (a *Admin) spreadNamespace(ctx context.Context, ns string) (int, error) {
	legacy := schema.LegacyNamespaceIndexKey(ns)
	p := dynamodb.NewQueryPaginator(a.db, &dynamodb.QueryInput{
		TableName:                 &a.table,
		IndexName:                 aws.String(gsi4),
		KeyConditionExpression:    aws.String("GSI4PK = :ns"),
		ExpressionAttributeValues: item{":ns": str(legacy)},
	})
	n := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return n, fmt.Errorf("dynamodb: reindex namespace index of %s: %w", ns, err)
		}
		for _, it := range page.Items {
			_, err := a.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 &a.table,
				Key:                       item{attrPK: it[attrPK], attrSK: it[attrSK]},
				UpdateExpression:          aws.String("SET GSI4PK = :new"),
				ConditionExpression:       aws.String("GSI4PK = :old"),
				ExpressionAttributeValues: item{":new": str(namespaceIndexKey(ns, it)), ":old": str(legacy)},
			})
			var gone *types.ConditionalCheckFailedException
			switch {
			case errors.As(err, &gone): // deleted, or moved by another run
			case err != nil:
				return n, fmt.Errorf("dynamodb: reindex namespace index of %s: %w", ns, err)
			default:
				n++
			}
		}
	}
	return n, nil
}
