package dynamodb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// Lease tombstones (store.Leases; docs/dynamodb.md 4.13, "Tombstones"). A
// tombstone is an item of its own, beside its lease's open record in the
// same lease partition, under the sort key "~" + id: every open record of
// a partition sorts before every tombstone, so the reconciler's listing
// bounds its key condition below "~" and never reads one (a filter would:
// DynamoDB charges for the items a query reads before its filter). It has
// no GSI3 keys, so an entity's listing never sees it either; it has GSI4
// keys, so that a purge deletes it; and DynamoDB's ttl, so that DynamoDB
// deletes it after KeepUntil, late: readers take a tombstone past
// KeepUntil as gone (store.LeaseRecord.Gone), and an acquire with a reused
// id (store.ConsumeRequest.ReusedID) passes one.

// tombstoneKey is the key of the tombstone of lease id.
func tombstoneKey(ns, id string) item {
	return item{attrPK: str(schema.LeasePK(ns, id)), attrSK: str(schema.LeaseTombstoneSK(id))}
}

// encodeTombstone returns the tombstone item of rec, an ended record whose
// JSON body is body.
func encodeTombstone(ns string, rec *store.LeaseRecord, body string) item {
	it := tombstoneKey(ns, rec.ID)
	setLeaseAttrs(it, ns, rec, body)
	it[schema.AttrEndedAt] = num(rec.EndedAt)
	it[schema.AttrEndedAs] = num(int64(rec.EndedAs))
	it[schema.AttrKeepUntil] = num(rec.KeepUntil)
	// DynamoDB's ttl is in seconds: rounded up, so that it never deletes
	// a tombstone before KeepUntil.
	it[attrTTL] = num((rec.KeepUntil + 999) / 1000)
	return it
}

// decodeEnding reads into rec the ending of tombstone item it.
func decodeEnding(it item, rec *store.LeaseRecord) error {
	at, err1 := getN(it, schema.AttrEndedAt)
	as, err2 := getN(it, schema.AttrEndedAs)
	keep, err3 := getN(it, schema.AttrKeepUntil)
	rec.EndedAt, rec.EndedAs, rec.KeepUntil = at, store.LeaseEnd(as), keep
	return errors.Join(err1, err2, err3)
}

// checkLeaseID refuses an id that is not a lease id (model.ValidateLeaseID):
// one beginning with '~' would name a tombstone's key as a record's.
func checkLeaseID(id string) error { return model.ValidateLeaseID(id) }

// keptCond is the condition that no tombstone is kept at the key it is
// evaluated on at now: none, or one past its KeepUntil.
func keptCond(now int64) (string, map[string]string, item) {
	return "attribute_not_exists(PK) OR #keep <= :now",
		map[string]string{"#keep": schema.AttrKeepUntil}, item{":now": num(now)}
}

// getTombstone returns the tombstone item of lease id, nil if none.
func (c *client) getTombstone(ctx context.Context, ns, id string) (item, error) {
	out, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &c.table, Key: tombstoneKey(ns, id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("dynamodb: read lease tombstone: %w", err)
	}
	return out.Item, nil
}

// leaseRefused is the error of a write conditioned on the open record of
// lease id that met old instead. With no record (old empty) the lease may
// have ended and left a tombstone, which refuses a write as a changed
// record does (ErrLeaseConflict: the caller reads it again and finds how
// the lease ended); one read of the tombstone's key tells, on this path
// only.
func (c *client) leaseRefused(ctx context.Context, ns, id string, old item) error {
	if len(old) > 0 {
		return fmt.Errorf("lease %q: %w", id, model.ErrLeaseConflict)
	}
	tomb, err := c.getTombstone(ctx, ns, id)
	switch {
	case err != nil:
		return err
	case tomb != nil:
		return fmt.Errorf("lease %q: ended: %w", id, model.ErrLeaseConflict)
	}
	return fmt.Errorf("lease %q: %w", id, model.ErrLeaseNotFound)
}

// storedLease is an open record as its item holds it: every attribute a
// tombstone copies, the JSON body as the very string stored.
type storedLease struct {
	entity, resource, body string
	version, expires       int64
}

// storedOf returns the record item it holds (ok false if it is not one).
func storedOf(it item) (storedLease, bool) {
	v, err1 := getN(it, schema.AttrLeaseVersion)
	x, err2 := getN(it, schema.AttrExpires)
	body, isS := it[schema.AttrRecord].(*types.AttributeValueMemberS)
	if err1 != nil || err2 != nil || !isS {
		return storedLease{}, false
	}
	return storedLease{entity: getS(it, attrEntity), resource: getS(it, attrResource), body: body.Value, version: v, expires: x}, true
}

// ends reports whether e may end the record l holds (store.LeaseEnding.Ends).
func (l *storedLease) ends(e *store.LeaseEnding) bool {
	return l.version == e.Version && (e.ExpiredBy <= 0 || l.expires > 0 && l.expires <= e.ExpiredBy)
}

// tombstone returns the tombstone item e leaves of the record l holds.
func (l *storedLease) tombstone(ns string, e *store.LeaseEnding) (item, error) {
	var body leaseBody
	if err := json.Unmarshal([]byte(l.body), &body); err != nil {
		return nil, fmt.Errorf("dynamodb: lease %q: %w", e.ID, err)
	}
	rec := store.LeaseRecord{ID: e.ID, Entity: l.entity, Resource: l.resource, Holder: body.Holder, Created: body.Created,
		Expires: l.expires, Version: l.version, Buckets: body.Buckets, Pending: body.Pending}
	tomb := e.Tombstone(&rec)
	return encodeLease(ns, &tomb)
}

// copyCond is the condition of an ending's Delete that keeps a tombstone:
// the record is still, attribute for attribute, the one l holds, so that
// the tombstone, made from l, copies the record deleted.
func (l *storedLease) copyCond(d *types.Delete) {
	*d.ConditionExpression += " AND #rec = :rec AND #x = :x AND #ent = :ent AND #res = :res"
	d.ExpressionAttributeNames["#rec"], d.ExpressionAttributeNames["#x"] = schema.AttrRecord, schema.AttrExpires
	d.ExpressionAttributeNames["#ent"], d.ExpressionAttributeNames["#res"] = attrEntity, attrResource
	v := d.ExpressionAttributeValues
	v[":rec"], v[":x"], v[":ent"], v[":res"] = str(l.body), num(l.expires), str(l.entity), str(l.resource)
}

// endedRecord returns the open record that e ends, for its tombstone: the
// one the ender passes (e.Record), else read (one GetItem). The ending's
// condition proves it current; a refusal read here is the ending's
// answer, as the transaction's would be.
func (c *client) endedRecord(ctx context.Context, ns string, e *store.LeaseEnding) (storedLease, error) {
	if r := e.Record; r != nil && r.ID == e.ID && r.Version == e.Version && !r.Ended() {
		if it, err := encodeLease(ns, r); err == nil {
			if l, ok := storedOf(it); ok {
				return l, nil
			}
		}
	}
	out, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &c.table, Key: leaseKey(ns, e.ID), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return storedLease{}, fmt.Errorf("dynamodb: read lease: %w", err)
	}
	l, ok := storedOf(out.Item)
	if !ok || !l.ends(e) {
		return storedLease{}, c.leaseRefused(ctx, ns, e.ID, out.Item)
	}
	return l, nil
}
