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

// GetConfigs implements store.Configs with one consistent BatchGetItem.
func (s *Store) GetConfigs(ctx context.Context, ns string, scopes []model.Scope) ([]*model.Config, error) {
	keys := make([]item, len(scopes))
	for i, sc := range scopes {
		keys[i] = configKey(ns, sc)
	}
	its, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make([]*model.Config, len(scopes))
	for i, it := range its {
		if it != nil {
			if out[i], err = decodeConfig(it); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// PutConfig implements store.Configs: the config at the next version (on
// the condition that the stored one is at the version it replaces), the
// audit event and (for an entity scope) a check that the entity exists, in
// one transaction. With a precondition the version replaced is the one
// expected, and nothing is read first (the version is read only to say
// what it is when the condition fails); without, it is read, and read
// again if another change wins the item in between.
func (s *Store) PutConfig(ctx context.Context, ns string, scope model.Scope, cfg model.Config, ev model.AuditEvent, pre ...store.Precondition) error {
	audit, err := s.auditPut(ns, ev)
	if err != nil {
		return err
	}
	for range maxVersionRetries {
		var have int64
		if store.Expects(pre) {
			have = pre[0].Version
		} else if have, err = s.readVersion(ctx, configKey(ns, scope)); err != nil {
			return err
		}
		cfg.Version = have + 1
		items := []types.TransactWriteItem{s.conditionalPut(encodeConfig(ns, scope, cfg), versionIs(have)), audit}
		if scope.Entity != "" {
			items = append(items, s.entityMustExist(ns, scope.Entity))
		}
		reasons, err := s.transactMeta(ctx, items)
		switch {
		case failed(reasons, 2):
			return model.ErrEntityNotFound
		case failed(reasons, 0) && store.Expects(pre):
			return s.versionRefused(ctx, configKey(ns, scope), pre)
		case failed(reasons, 0):
			continue // changed since read
		}
		return err
	}
	return errKeptChanging
}

// DeleteConfig implements store.Configs.
func (s *Store) DeleteConfig(ctx context.Context, ns string, scope model.Scope, ev model.AuditEvent, pre ...store.Precondition) error {
	audit, err := s.auditPut(ns, ev)
	if err != nil {
		return err
	}
	reasons, err := s.transactMeta(ctx, []types.TransactWriteItem{s.conditionalDelete(configKey(ns, scope), deleteCondition(pre)), audit})
	if failed(reasons, 0) {
		return s.deleteRefused(ctx, configKey(ns, scope), pre, model.ErrNotFound)
	}
	return err
}

// CreateEntity implements store.Entities.
func (s *Store) CreateEntity(ctx context.Context, ns string, e model.Entity, ev model.AuditEvent) error {
	e.Version = 1
	items, err := s.entityWrite(ns, e, ev, versionIs(0), e.ParentID != "")
	if err != nil {
		return err
	}
	reasons, err := s.transactMeta(ctx, items)
	switch {
	case failed(reasons, 0):
		return model.ErrEntityExists
	case failed(reasons, 2):
		return model.ErrEntityNotFound
	}
	return err
}

// GetEntity implements store.Entities.
func (s *Store) GetEntity(ctx context.Context, ns, id string) (model.Entity, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.table,
		Key:            item{attrPK: str(entityPK(ns, id)), attrSK: str(skMeta)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return model.Entity{}, fmt.Errorf("dynamodb: read entity %s: %w", id, err)
	}
	if out.Item == nil {
		return model.Entity{}, model.ErrEntityNotFound
	}
	return decodeEntity(out.Item)
}

// DeleteEntity implements store.Entities. The entity, its configs and the
// audit event go in one transaction; its buckets, found through GSI3, are
// deleted after. (GSI3 is eventually consistent: a bucket created a moment
// before the delete may survive it. It is harmless: a bucket of an unknown
// entity behaves as a new one once refilled, and is recreated on use.)
func (s *Store) DeleteEntity(ctx context.Context, ns, id string, ev model.AuditEvent, pre ...store.Precondition) error {
	own, err := s.query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("PK = :pk"),
		ExpressionAttributeValues: item{":pk": str(entityPK(ns, id))},
		ConsistentRead:            aws.Bool(true),
		ProjectionExpression:      aws.String("PK, SK"),
	})
	if err != nil {
		return err
	}
	audit, err := s.auditPut(ns, ev)
	if err != nil {
		return err
	}
	key := item{attrPK: str(entityPK(ns, id)), attrSK: str(skMeta)}
	items := []types.TransactWriteItem{s.conditionalDelete(key, deleteCondition(pre)), audit}
	var rest []item
	for _, it := range own {
		if getS(it, attrSK) == skMeta {
			continue
		}
		if len(items) < maxTransactItems-1 { // transactMeta adds one
			items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: &s.table, Key: it}})
		} else {
			rest = append(rest, it)
		}
	}
	reasons, err := s.transactMeta(ctx, items)
	if failed(reasons, 0) {
		return s.deleteRefused(ctx, key, pre, model.ErrEntityNotFound)
	}
	if err != nil {
		return err
	}
	buckets, err := s.query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(gsi3),
		KeyConditionExpression:    aws.String("GSI3PK = :pk AND begins_with(GSI3SK, :b)"),
		ExpressionAttributeValues: item{":pk": str(entityPK(ns, id)), ":b": str("BUCKET#")},
	})
	if err != nil {
		return err
	}
	for _, b := range buckets {
		rest = append(rest, item{attrPK: b[attrPK], attrSK: b[attrSK]})
	}
	s.engine.forget(func(ns2 string, k store.BucketKey) bool { return ns2 == ns && k.Entity == id })
	return s.batchDelete(ctx, rest)
}

// ListChildren implements store.Entities through GSI1 (eventually
// consistent on AWS: a child created a moment ago may be missing).
func (s *Store) ListChildren(ctx context.Context, ns, id string) ([]model.Entity, error) {
	its, err := s.query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(gsi1),
		KeyConditionExpression:    aws.String("GSI1PK = :pk"),
		ExpressionAttributeValues: item{":pk": str(parentGSI1PK(ns, id))},
	})
	if err != nil {
		return nil, err
	}
	out := make([]model.Entity, 0, len(its))
	for _, it := range its {
		e, err := decodeEntity(it)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// ListAudit implements store.Audit.
func (s *Store) ListAudit(ctx context.Context, ns, entity, after string, limit int) ([]model.AuditEvent, error) {
	in := &dynamodb.QueryInput{
		TableName:              &s.table,
		KeyConditionExpression: aws.String("PK = :pk AND SK > :after"),
		ExpressionAttributeValues: item{
			":pk": str(auditPK(ns, entity)), ":after": str(auditSK(after)),
		},
		ConsistentRead: aws.Bool(true),
	}
	if limit > 0 {
		in.Limit = aws.Int32(int32(min(limit, 1<<30)))
	}
	var out []model.AuditEvent
	for {
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("dynamodb: list audit: %w", err)
		}
		for _, it := range res.Items {
			ev, err := decodeAudit(it)
			if err != nil {
				return nil, err
			}
			out = append(out, ev)
		}
		if res.LastEvaluatedKey == nil || (limit > 0 && len(out) >= limit) {
			return out, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
		if limit > 0 {
			in.Limit = aws.Int32(int32(limit - len(out)))
		}
	}
}

func (s *Store) entityMustExist(ns, id string) types.TransactWriteItem {
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName:           &s.table,
		Key:                 item{attrPK: str(entityPK(ns, id)), attrSK: str(skMeta)},
		ConditionExpression: aws.String("attribute_exists(PK)"),
	}}
}

// maxTransactItems is the most items one TransactWriteItems holds.
const maxTransactItems = 100

// transactMeta runs a transaction of control-plane changes (configs,
// entities, keys, namespace registrations), retrying conflicts and
// throttling with backoff, within one budget. It appends the item that
// raises the change generation (changes.go), so items may hold at most
// maxTransactItems-1; the reasons' indexes are those of items. Concurrent
// changes conflict on that item (TransactionConflict), which is retried
// like any conflict. On a failed condition it returns the cancellation
// reasons (and a non-nil error): a domain answer, not a race to retry.
func (s *Store) transactMeta(ctx context.Context, items []types.TransactWriteItem) ([]types.CancellationReason, error) {
	b := s.newBudget()
	items = append(items[:len(items):len(items)], s.bumpItem())
	for {
		_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			return nil, nil
		}
		var canceled *types.TransactionCanceledException
		if errors.As(err, &canceled) {
			for i := range canceled.CancellationReasons {
				if failed(canceled.CancellationReasons, i) {
					return canceled.CancellationReasons, err
				}
			}
		}
		if txRetry(err) != errContended {
			return nil, fmt.Errorf("dynamodb: transaction: %w", err)
		}
		if rerr := b.retry(ctx, errContended); rerr != nil {
			if rerr == ErrContention {
				return nil, fmt.Errorf("%w: transaction after %d attempts: %w", ErrContention, b.max, err)
			}
			return nil, rerr
		}
	}
}

// failed reports whether the transaction item at index i failed its condition.
func failed(reasons []types.CancellationReason, i int) bool {
	return i < len(reasons) && aws.ToString(reasons[i].Code) == "ConditionalCheckFailed"
}

// query runs a query to the end.
func (s *Store) query(ctx context.Context, in *dynamodb.QueryInput) ([]item, error) {
	var out []item
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("dynamodb: query: %w", err)
		}
		out = append(out, page.Items...)
	}
	return out, nil
}

// entityWrite is the transaction that writes entity e on condition cond,
// with its audit event, and, when checkParent, the check that its parent
// exists.
func (s *Store) entityWrite(ns string, e model.Entity, ev model.AuditEvent, cond condition, checkParent bool) ([]types.TransactWriteItem, error) {
	it, err := encodeEntity(ns, e)
	if err != nil {
		return nil, err
	}
	audit, err := s.auditPut(ns, ev)
	if err != nil {
		return nil, err
	}
	items := []types.TransactWriteItem{s.conditionalPut(it, cond), audit}
	if checkParent {
		items = append(items, s.entityMustExist(ns, e.ParentID))
	}
	return items, nil
}
