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

// Stored API keys (store.Keys, docs/dynamodb.md 4.16). A key is two items
// holding every field, written and deleted together in one transaction
// with the audit event (and the change generation, transactMeta):
//
//   - by name, {ns}/KEYS# #KEY#{name}: inside the namespace, so a tenant's
//     policy reaches it and ListKeys is one Query of one partition;
//   - by hash, _/KEY#{hash} #KEY: outside every namespace, found by the
//     hash of a request's bearer key before its namespace is known. Only
//     the operator's and the worker's policies may write these (docs 7): a
//     tenant writing one could forge a key of another namespace.
//
// Both carry GSI4PK = {ns}#{part}, so PurgeNamespace deletes them with the rest
// of the namespace, and, for a key that expires, ttl one day past the
// expiry, so DynamoDB deletes expired keys (KeyByHash returns an expired
// key that is still there as it is; the caller checks).

// keyTTLMargin is how long after its expiry an expired key's items may be
// deleted by DynamoDB's TTL.
const keyTTLMargin = 24 * time.Hour

func keyByNameKey(ns, name string) item {
	return item{attrPK: str(schema.KeysPK(ns)), attrSK: str(schema.KeySK(name))}
}

func keyByHashKey(hash string) item {
	return item{attrPK: str(schema.KeyHashPK(hash)), attrSK: str(schema.SKKeyHash)}
}

// encodeKey returns the items of k in namespace ns: by name and by hash.
func encodeKey(ns string, k model.Key) (byName, byHash item) {
	byName, byHash = keyByNameKey(ns, k.Name), keyByHashKey(k.Hash)
	for _, it := range []item{byName, byHash} {
		it["name"], it["namespace"], it["ns"] = str(k.Name), str(k.Namespace), str(ns)
		it["role"], it["entity"], it["hash"] = str(string(k.Role)), str(k.Entity), str(k.Hash)
		it["allow_limits"] = &types.AttributeValueMemberBOOL{Value: k.AllowLimits}
		it["created_at"], it["expires_at"] = num(model.UnixMilli(k.CreatedAt)), num(model.UnixMilli(k.ExpiresAt))
		it[attrGSI4PK], it[attrGSI4SK] = str(namespaceIndexKey(ns, it)), it[attrPK]
		if !k.ExpiresAt.IsZero() {
			it[attrTTL] = num(k.ExpiresAt.Add(keyTTLMargin).Unix())
		}
	}
	return byName, byHash
}

func decodeKey(it item) (model.Key, error) {
	k := model.Key{Name: getS(it, "name"), Namespace: getS(it, "namespace"), Role: model.Role(getS(it, "role")),
		Entity: getS(it, "entity"), AllowLimits: getBool(it, "allow_limits"), Hash: getS(it, "hash")}
	created, err := getN(it, "created_at")
	if err != nil {
		return k, fmt.Errorf("dynamodb: key %s: %w", k.Name, err)
	}
	expires, err := getN(it, "expires_at")
	if err != nil {
		return k, fmt.Errorf("dynamodb: key %s: %w", k.Name, err)
	}
	k.CreatedAt, k.ExpiresAt = model.FromUnixMilli(created), model.FromUnixMilli(expires)
	return k, nil
}

// CreateKey implements store.Keys: both items on condition that neither
// exists, and the audit event, in one transaction.
func (s *Store) CreateKey(ctx context.Context, ns string, k model.Key, ev model.AuditEvent) error {
	if k.Name == "" || k.Hash == "" {
		return model.Invalid("key", k.Name, "a key needs a name and a hash")
	}
	audit, err := s.auditPut(ns, ev)
	if err != nil {
		return err
	}
	byName, byHash := encodeKey(ns, k)
	notExists := aws.String("attribute_not_exists(PK)")
	reasons, err := s.transactMeta(ctx, []types.TransactWriteItem{
		{Put: &types.Put{TableName: &s.table, Item: byName, ConditionExpression: notExists}},
		{Put: &types.Put{TableName: &s.table, Item: byHash, ConditionExpression: notExists}},
		audit,
	})
	if failed(reasons, 0) || failed(reasons, 1) {
		return model.ErrKeyExists
	}
	return err
}

// KeyByHash implements store.Keys: one strongly consistent GetItem.
func (s *Store) KeyByHash(ctx context.Context, hash string) (model.Key, error) {
	if hash == "" {
		return model.Key{}, model.ErrKeyNotFound
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: keyByHashKey(hash), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return model.Key{}, fmt.Errorf("dynamodb: read key: %w", err)
	}
	if out.Item == nil {
		return model.Key{}, model.ErrKeyNotFound
	}
	return decodeKey(out.Item)
}

// ListKeys implements store.Keys: a strongly consistent Query of the
// namespace's key partition from after, in sort key (name) order.
func (s *Store) ListKeys(ctx context.Context, ns, after string, limit int) ([]model.Key, error) {
	if err := store.ValidatePage(limit, model.MaxKeyPage); err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		TableName:              &s.table,
		KeyConditionExpression: aws.String("PK = :pk AND SK > :after"),
		ExpressionAttributeValues: item{
			":pk": str(schema.KeysPK(ns)), ":after": str(schema.KeySK(after)),
		},
		ConsistentRead: aws.Bool(true),
		Limit:          aws.Int32(int32(limit)),
	}
	out := make([]model.Key, 0, min(limit, 64))
	for {
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("dynamodb: list keys: %w", err)
		}
		for _, it := range res.Items {
			k, err := decodeKey(it)
			if err != nil {
				return nil, err
			}
			out = append(out, k)
		}
		// A page stops short of Limit only at 1 MB of items.
		if res.LastEvaluatedKey == nil || len(out) >= limit {
			return out, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
		in.Limit = aws.Int32(int32(limit - len(out)))
	}
}

// DeleteKey implements store.Keys: the key's hash is read from its item
// by name, then both items go, on condition that the one by name still
// holds that hash, with the audit event, in one transaction.
func (s *Store) DeleteKey(ctx context.Context, ns, name string, ev model.AuditEvent) error {
	if name == "" {
		return model.ErrKeyNotFound
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: keyByNameKey(ns, name), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("dynamodb: read key %s: %w", name, err)
	}
	if out.Item == nil {
		return model.ErrKeyNotFound
	}
	audit, err := s.auditPut(ns, ev)
	if err != nil {
		return err
	}
	hash := getS(out.Item, "hash")
	reasons, err := s.transactMeta(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{TableName: &s.table, Key: keyByNameKey(ns, name),
			ConditionExpression: aws.String("#h = :h"), ExpressionAttributeNames: map[string]string{"#h": "hash"},
			ExpressionAttributeValues: item{":h": str(hash)}}},
		// The item by hash may be gone already (TTL deletes the two
		// items of an expired key independently), never another
		// namespace's: hashes are unique.
		{Delete: &types.Delete{TableName: &s.table, Key: keyByHashKey(hash),
			ConditionExpression: aws.String("attribute_not_exists(PK) OR #ns = :ns"), ExpressionAttributeNames: map[string]string{"#ns": "ns"},
			ExpressionAttributeValues: item{":ns": str(ns)}}},
		audit,
	})
	if failed(reasons, 0) || failed(reasons, 1) {
		return model.ErrKeyNotFound // revoked meanwhile
	}
	return err
}
