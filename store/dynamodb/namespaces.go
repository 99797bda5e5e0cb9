package dynamodb

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// The registry lives under the reserved partition "_/SYSTEM#" (no namespace
// id starts with '_'): a forward record per name and a reverse one per id,
// so neither can be registered twice.
const (
	skNamespacePrefix = "#NAMESPACE#"
	skNamespaceID     = "#NSID#"
)

func namespaceKey(name string) item {
	return item{attrPK: str(registryPK()), attrSK: str(skNamespacePrefix + name)}
}

// CreateNamespace implements store.Namespaces.
func (s *Store) CreateNamespace(ctx context.Context, n model.Namespace) error {
	fwd := namespaceKey(n.Name)
	fwd["name"], fwd["id"], fwd["created_at"] = str(n.Name), str(n.ID), num(n.CreatedAt.UnixMilli())
	fwd["deleted_at"] = num(0)
	if n.AuditRetention != 0 {
		fwd[attrAuditRetention] = num(int64(n.AuditRetention))
	}
	rev := item{attrPK: str(registryPK()), attrSK: str(skNamespaceID + n.ID), "name": str(n.Name)}
	notExists := aws.String("attribute_not_exists(PK)")
	reasons, err := s.transactMeta(ctx, []types.TransactWriteItem{
		{Put: &types.Put{TableName: &s.table, Item: fwd, ConditionExpression: notExists}},
		{Put: &types.Put{TableName: &s.table, Item: rev, ConditionExpression: notExists}},
	})
	if failed(reasons, 0) || failed(reasons, 1) {
		return model.ErrNamespaceExists
	}
	return err
}

// GetNamespace implements store.Namespaces.
func (s *Store) GetNamespace(ctx context.Context, name string) (model.Namespace, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: namespaceKey(name), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return model.Namespace{}, fmt.Errorf("dynamodb: read namespace %s: %w", name, err)
	}
	if out.Item == nil {
		return model.Namespace{}, model.ErrNamespaceNotFound
	}
	return decodeNamespace(out.Item)
}

func decodeNamespace(it item) (model.Namespace, error) {
	n := model.Namespace{Name: getS(it, "name"), ID: getS(it, "id")}
	created, err := getN(it, "created_at")
	if err != nil {
		return n, err
	}
	n.CreatedAt = time.UnixMilli(created).UTC()
	if deleted, _ := getN(it, "deleted_at"); deleted != 0 {
		n.DeletedAt = time.UnixMilli(deleted).UTC()
	}
	if d, _ := getN(it, attrAuditRetention); d != 0 {
		n.AuditRetention = time.Duration(d)
	}
	return n, nil
}

// ListNamespaces implements store.Namespaces.
func (s *Store) ListNamespaces(ctx context.Context) ([]model.Namespace, error) {
	its, err := s.query(ctx, &dynamodb.QueryInput{
		TableName:              &s.table,
		KeyConditionExpression: aws.String("PK = :pk AND begins_with(SK, :p)"),
		ExpressionAttributeValues: item{
			":pk": str(registryPK()), ":p": str(skNamespacePrefix),
		},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	out := make([]model.Namespace, 0, len(its))
	for _, it := range its {
		n, err := decodeNamespace(it)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// SetNamespaceDeleted implements store.Namespaces: a transaction, so that
// the change generation rises with it (transactMeta).
func (s *Store) SetNamespaceDeleted(ctx context.Context, name string, at time.Time) error {
	var ms int64
	if !at.IsZero() {
		ms = at.UnixMilli()
	}
	reasons, err := s.transactMeta(ctx, []types.TransactWriteItem{{Update: &types.Update{
		TableName:                 &s.table,
		Key:                       namespaceKey(name),
		UpdateExpression:          aws.String("SET deleted_at = :d"),
		ConditionExpression:       aws.String("attribute_exists(PK)"),
		ExpressionAttributeValues: item{":d": num(ms)},
	}}})
	if failed(reasons, 0) {
		return model.ErrNamespaceNotFound
	}
	if err != nil {
		return fmt.Errorf("dynamodb: update namespace %s: %w", name, err)
	}
	return nil
}

// PurgeNamespace implements store.Namespaces: it pages through GSI4 (every
// item of the namespace, keys only, under each of its parts and the legacy
// key: nsindex.go) deleting in batches, until a pass finds nothing (GSI4
// is eventually consistent), then removes the registration. It queries the
// legacy key even on a migrated table, so that it also removes what a
// process of an older Tollgate wrote there since.
func (s *Store) PurgeNamespace(ctx context.Context, name string, progress func(int)) error {
	n, err := s.GetNamespace(ctx, name)
	if err != nil {
		return err
	}
	deleted := 0
	for pass := 0; ; pass++ {
		found := 0
		for _, key := range schema.NamespaceIndexKeys(n.ID, true) {
			p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
				TableName:                 &s.table,
				IndexName:                 aws.String(gsi4),
				KeyConditionExpression:    aws.String("GSI4PK = :ns"),
				ExpressionAttributeValues: item{":ns": str(key)},
			})
			for p.HasMorePages() {
				page, err := p.NextPage(ctx)
				if err != nil {
					return fmt.Errorf("dynamodb: purge %s: %w", name, err)
				}
				keys := make([]item, len(page.Items))
				for i, it := range page.Items {
					keys[i] = item{attrPK: it[attrPK], attrSK: it[attrSK]}
				}
				if err := s.batchDelete(ctx, keys); err != nil {
					return fmt.Errorf("dynamodb: purge %s: %w", name, err)
				}
				found += len(keys)
				deleted += len(keys)
				if progress != nil {
					progress(deleted)
				}
			}
		}
		if found == 0 {
			break
		}
		if pass >= s.maxAttempts {
			return fmt.Errorf("dynamodb: purge %s: items keep appearing after %d passes", name, pass)
		}
	}
	s.engine.forget(func(ns string, _ store.BucketKey) bool { return ns == n.ID })
	if err := s.batchDelete(ctx, []item{namespaceKey(name), {attrPK: str(registryPK()), attrSK: str(skNamespaceID + n.ID)}}); err != nil {
		return err
	}
	// A purge is many batches, not one transaction: the generation rises
	// once it is done (its keys and registration are gone everywhere).
	return s.bump(ctx)
}
