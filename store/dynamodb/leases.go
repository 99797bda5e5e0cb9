package dynamodb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// Durable lease records (store.Leases; docs/dynamodb.md 4.13). A record is
// an item of its own, in one of the namespace's lease partitions; it is
// created in the same transaction as its buckets' debits and deleted in the
// same transaction as their give-back, and both are conditioned on it, so
// a lease ends exactly once. A record never sits inside a bucket item:
// DynamoDB charges a write by the item's size, so every acquire of a bucket
// holding many open leases would pay for all of them. An ending that keeps
// a tombstone puts it as another item of the same partition
// (tombstones.go).

var _ store.Leases = (*Store)(nil)

// leaseKey is the key of the open record of lease id.
func leaseKey(ns, id string) item {
	return item{attrPK: str(schema.LeasePK(ns, id)), attrSK: str(id)}
}

// leaseBody is the part of a record kept as JSON in one attribute: read
// whole, never in conditions.
type leaseBody struct {
	Holder  string              `json:"holder,omitempty"`
	Created int64               `json:"created"`
	Buckets []store.LeaseBucket `json:"buckets"`
	Pending []store.LeaseDelta  `json:"pending,omitempty"`
}

// encodeLease returns the item of rec in namespace ns: its open record,
// or its tombstone if rec has ended (encodeTombstone).
func encodeLease(ns string, rec *store.LeaseRecord) (item, error) {
	body, err := json.Marshal(leaseBody{Holder: rec.Holder, Created: rec.Created, Buckets: rec.Buckets, Pending: rec.Pending})
	if err != nil {
		return nil, fmt.Errorf("dynamodb: encode lease %q: %w", rec.ID, err)
	}
	if rec.Ended() {
		return encodeTombstone(ns, rec, string(body)), nil
	}
	it := leaseKey(ns, rec.ID)
	setLeaseAttrs(it, ns, rec, string(body))
	it[attrGSI3PK] = str(entityPK(ns, rec.Entity))
	it[attrGSI3SK] = str(schema.LeaseGSI3SK(rec.Resource, rec.ID))
	return it, nil
}

// setLeaseAttrs sets the attributes that open records and tombstones
// share: all but the keys of GSI3 and those of the ending.
func setLeaseAttrs(it item, ns string, rec *store.LeaseRecord, body string) {
	it[attrEntity] = str(rec.Entity)
	it[attrResource] = str(rec.Resource)
	it[schema.AttrLeaseVersion] = num(rec.Version)
	it[schema.AttrExpires] = num(rec.Expires)
	it[schema.AttrRecord] = str(body)
	it[attrGSI4PK] = str(namespaceIndexKey(ns, it))
	it[attrGSI4SK] = it[attrPK]
}

// decodeLease reads a lease item, an open record or a tombstone.
func decodeLease(it item) (store.LeaseRecord, error) {
	id, ended := strings.CutPrefix(getS(it, attrSK), schema.TombstoneMark)
	rec := store.LeaseRecord{ID: id, Entity: getS(it, attrEntity), Resource: getS(it, attrResource)}
	var body leaseBody
	var err1, err2, err4 error
	rec.Version, err1 = getN(it, schema.AttrLeaseVersion)
	rec.Expires, err2 = getN(it, schema.AttrExpires)
	err3 := json.Unmarshal([]byte(getS(it, schema.AttrRecord)), &body)
	if ended {
		err4 = decodeEnding(it, &rec)
	}
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return store.LeaseRecord{}, fmt.Errorf("dynamodb: lease %q: %w", rec.ID, err)
	}
	rec.Holder, rec.Created, rec.Buckets, rec.Pending = body.Holder, body.Created, body.Buckets, body.Pending
	return rec, nil
}

// GetLease implements store.Leases: a GetItem of the open record and, if
// there is none, one of the tombstone. Leases are resumed open far more
// often than ended, and then one GetItem (1 RCU) is all it costs, where a
// BatchGetItem of both keys would cost 2 RCU every time and is no faster
// (docs/dynamodb.md 4.13).
func (s *Store) GetLease(ctx context.Context, ns, id string) (store.LeaseRecord, error) {
	if err := checkLeaseID(id); err != nil {
		return store.LeaseRecord{}, err
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: leaseKey(ns, id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return store.LeaseRecord{}, fmt.Errorf("dynamodb: read lease: %w", err)
	}
	it := out.Item
	if it != nil {
	} else if it, err = s.getTombstone(ctx, ns, id); err != nil {
		return store.LeaseRecord{}, err
	}
	if it == nil {
		return store.LeaseRecord{}, fmt.Errorf("lease %q: %w", id, model.ErrLeaseNotFound)
	}
	return decodeLease(it)
}

// UpdateLease implements store.Leases: a PutItem of the open record
// conditioned on the stored version. A tombstone is another item, so the
// condition fails when the lease has ended (leaseRefused tells).
func (s *Store) UpdateLease(ctx context.Context, ns string, rec store.LeaseRecord) error {
	if err := checkLeaseID(rec.ID); err != nil {
		return err
	}
	// The update of a tombstone, read and changed, goes to the open
	// record's key like any other, where it finds no record: a lease
	// ends by EndLease alone.
	rec.EndedAt, rec.EndedAs, rec.KeepUntil = 0, 0, 0
	it, err := encodeLease(ns, &rec)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table, Item: it,
		ConditionExpression:                 aws.String("#v = :v"),
		ExpressionAttributeNames:            map[string]string{"#v": schema.AttrLeaseVersion},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":v": num(rec.Version - 1)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var cond *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &cond):
		return s.leaseRefused(ctx, ns, rec.ID, cond.Item)
	case err != nil:
		return fmt.Errorf("dynamodb: update lease: %w", err)
	}
	return nil
}

// EndLease implements store.Leases: the record's deletion (or its
// replacement by a tombstone), the give-back of what it holds to its
// buckets and the event, in one transaction (leaseend.go).
func (s *Store) EndLease(ctx context.Context, ns string, e store.LeaseEnding) error {
	return s.engine.EndLease(ctx, ns, e)
}
