package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// The namespace-wide audit log (store.AuditLog) reads GSI4, which every
// audit item already enters (GSI4PK {ns}#{part}, for purge): its GSI4 sort
// key is {ns}/AUDITLOG#{id} (schema.AuditLogGSI4SK), so each of the
// namespace's GSI4 partitions (nsindex.go) holds its share of the events
// in id order, which is time order. A page is one Query of a key range of
// each partition (keys only), merged by sort key, and one BatchGetItem of
// the events; a sweep is the same Queries and a DeleteItem per event. No
// scan, no extra item, no extra index: the audit item's write is the one
// it was (docs/dynamodb.md 2.3). GSI4 is eventually consistent: an event
// written a moment ago may be missing.

var _ store.AuditLog = (*Store)(nil)

// ListAuditRange implements store.AuditLog.
func (s *Store) ListAuditRange(ctx context.Context, ns string, q store.AuditRange) ([]model.AuditEvent, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	after, before := q.Bounds()
	keys, err := s.auditKeys(ctx, ns, after, before, q.Limit)
	if err != nil || len(keys) == 0 {
		return nil, err
	}
	its, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("dynamodb: list audit: %w", err)
	}
	out := make([]model.AuditEvent, 0, len(its))
	for _, it := range its {
		if it == nil {
			continue // swept since the index was read
		}
		ev, err := decodeAudit(it)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// auditKeys returns the table keys of up to limit audit events of ns
// with after < id < before, in id order, from GSI4.
func (s *Store) auditKeys(ctx context.Context, ns, after, before string, limit int) ([]item, error) {
	prefix := schema.AuditLogPrefix(ns)
	from := prefix
	if after != "" {
		from = prefix + after + "\x00" // the least key above after's
	}
	to := prefix + before
	if to < from {
		return nil, nil
	}
	parts, err := s.namespaceIndexKeys(ctx, ns)
	if err != nil {
		return nil, err
	}
	var keys []item
	err = s.mergeIndex(ctx, parts, &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(gsi4),
		KeyConditionExpression:    aws.String("GSI4PK = :ns AND GSI4SK BETWEEN :from AND :to"),
		ExpressionAttributeValues: item{":from": str(from), ":to": str(to)},
		Limit:                     aws.Int32(auditPartPage(limit)),
	}, func(it item) bool {
		if getS(it, attrGSI4SK) == to { // BETWEEN includes to; before does not, and nothing sorts after it
			return false
		}
		keys = append(keys, item{attrPK: it[attrPK], attrSK: it[attrSK]})
		return len(keys) < limit
	})
	return keys, err
}

// auditPartPage is the Limit of each part's Query of a page of limit
// events: twice an even share, so that most pages need one Query a part.
func auditPartPage(limit int) int32 {
	share := (limit + schema.NamespaceIndexParts - 1) / schema.NamespaceIndexParts
	return int32(min(2*share+2, gsi4PartPage))
}

// SweepAudit implements store.AuditLog. It counts the index entries it
// deletes, which on DynamoDB (not DynamoDB Local) may include an event a
// sweep running at the same moment deleted.
func (s *Store) SweepAudit(ctx context.Context, ns string, before time.Time, limit int) (int, error) {
	if limit < 1 {
		return 0, ctx.Err()
	}
	keys, err := s.auditKeys(ctx, ns, "", store.AuditIDAt(before), limit)
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	if err := s.deleteEach(ctx, keys); err != nil {
		return 0, fmt.Errorf("dynamodb: sweep audit: %w", err)
	}
	return len(keys), nil
}

// sweepWorkers is how many DeleteItem calls a sweep has in flight.
const sweepWorkers = 8

// deleteEach deletes the items of keys with DeleteItem, sweepWorkers at a
// time. Not BatchWriteItem: the sweep is the reconciler's, whose IAM
// persona (worker, deploy/iam.go) may delete items but not batch-write
// them; the write units are the same.
func (s *Store) deleteEach(ctx context.Context, keys []item) error {
	errs := make([]error, sweepWorkers)
	parallel(sweepWorkers, func(w int) {
		for i := w; i < len(keys) && errs[w] == nil; i += sweepWorkers {
			_, errs[w] = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: keys[i]})
		}
	})
	return errors.Join(errs...)
}

// attrAuditRetention is the namespace record's audit retention, in
// nanoseconds (absent: forever).
const attrAuditRetention = "audit_retention"

// SetAuditRetention implements store.AuditLog: a transaction, so that the
// change generation rises with it (transactMeta).
func (s *Store) SetAuditRetention(ctx context.Context, name string, d time.Duration) error {
	reasons, err := s.transactMeta(ctx, []types.TransactWriteItem{{Update: &types.Update{
		TableName:                 &s.table,
		Key:                       namespaceKey(name),
		UpdateExpression:          aws.String("SET " + attrAuditRetention + " = :d"),
		ConditionExpression:       aws.String("attribute_exists(PK)"),
		ExpressionAttributeValues: item{":d": num(int64(d))},
	}}})
	if failed(reasons, 0) {
		return model.ErrNamespaceNotFound
	}
	if err != nil {
		return fmt.Errorf("dynamodb: update namespace %s: %w", name, err)
	}
	return nil
}

// ReindexAudit gives the audit items written before the namespace-wide
// log (their GSI4 sort key was {ns}/AUDIT#{entity}, which does not sort by
// time) the sort key ListAuditRange and SweepAudit read, in every
// namespace of the table, and returns how many it changed. tollgate
// deploy runs it; running it again finds nothing to do (one Query of GSI4
// per namespace and GSI4 key). Items deleted meanwhile are skipped. It needs Query on
// GSI4 and the registry, and UpdateItem: the operator's persona.
func (a *Admin) ReindexAudit(ctx context.Context) (int, error) {
	ctx = unbounded(ctx) // an operator's: not bounded by the call timeout
	ids, err := a.namespaceIDs(ctx)
	if err != nil {
		return 0, fmt.Errorf("dynamodb: reindex audit: %w", err)
	}
	n := 0
	for _, ns := range ids {
		k, err := a.reindexAudit(ctx, ns)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// reindexAudit is ReindexAudit in namespace ns: the GSI4 range of the old
// sort keys, {ns}/AUDIT#{entity} ("{ns}/AUDITLOG#" sorts after it), under
// every key of the namespace (ReindexNamespaceIndex may have moved an old
// event to its part before this ran).
func (a *Admin) reindexAudit(ctx context.Context, ns string) (int, error) {
	n := 0
	for _, key := range schema.NamespaceIndexKeys(ns, true) {
		k, err := a.reindexAuditKey(ctx, ns, key)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// reindexAuditKey is reindexAudit under GSI4 partition key key.
func (a *Admin) reindexAuditKey(ctx context.Context, ns, key string) (int, error) {
	old := schema.AuditPK(ns, "")
	p := dynamodb.NewQueryPaginator(a.db, &dynamodb.QueryInput{
		TableName:                 &a.table,
		IndexName:                 aws.String(gsi4),
		KeyConditionExpression:    aws.String("GSI4PK = :ns AND GSI4SK BETWEEN :from AND :to"),
		ExpressionAttributeValues: item{":ns": str(key), ":from": str(old), ":to": str(strings.TrimSuffix(old, "#") + "$")},
	})
	n := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return n, fmt.Errorf("dynamodb: reindex audit of %s: %w", ns, err)
		}
		for _, it := range page.Items {
			id, ok := strings.CutPrefix(getS(it, attrSK), schema.AuditSK(""))
			if !ok {
				continue
			}
			_, err := a.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 &a.table,
				Key:                       item{attrPK: it[attrPK], attrSK: it[attrSK]},
				UpdateExpression:          aws.String("SET GSI4SK = :k"),
				ConditionExpression:       aws.String("attribute_exists(PK)"),
				ExpressionAttributeValues: item{":k": str(schema.AuditLogGSI4SK(ns, id))},
			})
			var gone *types.ConditionalCheckFailedException
			switch {
			case errors.As(err, &gone):
			case err != nil:
				return n, fmt.Errorf("dynamodb: reindex audit of %s: %w", ns, err)
			default:
				n++
			}
		}
	}
	return n, nil
}
