package dynamodb

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Entities and configs carry a version (model.Entity.Version,
// model.Config.Version) in the attribute "version". A change reads the
// item's version, checks the caller's store.Precondition against it, and
// writes the next version on the condition that the item is still at the
// one read; a failed condition means another change came in between, and
// the change reads again (then a precondition no longer holds). An item
// written before versions were kept has no attribute, and is at version 1.

// attrRecordVersion is an entity's or config's version.
const attrRecordVersion = "version"

// maxVersionRetries bounds how often a change reads the version again
// because another change won the item in between.
const maxVersionRetries = 16

// versionOf is the version of an entity or config item, 0 for none (nil).
func versionOf(it item) int64 {
	if it == nil {
		return 0
	}
	if v, err := getN(it, attrRecordVersion); err == nil && v > 0 {
		return v
	}
	return 1
}

// setVersion writes version v (when positive) into an item being encoded.
func setVersion(it item, v int64) {
	if v > 0 {
		it[attrRecordVersion] = num(v)
	}
}

// condition is a condition expression with the names and values it uses.
type condition struct {
	expr   string
	names  map[string]string
	values item
}

// versionIs is the condition that the item at a key is at version v (0:
// that there is none). One without the attribute is at version 1.
func versionIs(v int64) condition {
	switch v {
	case 0:
		return condition{expr: "attribute_not_exists(PK)"}
	case 1:
		return condition{expr: "attribute_exists(PK) AND (attribute_not_exists(#ver) OR #ver = :ver)",
			names: map[string]string{"#ver": attrRecordVersion}, values: item{":ver": num(1)}}
	}
	return condition{expr: "attribute_exists(PK) AND #ver = :ver",
		names: map[string]string{"#ver": attrRecordVersion}, values: item{":ver": num(v)}}
}

// deleteCondition is the condition of deleting the item at a key: that it
// exists and, with pre, that pre holds (a precondition of none can never
// hold for an item to delete).
func deleteCondition(pre []store.Precondition) condition {
	switch {
	case !store.Expects(pre):
		return condition{expr: "attribute_exists(PK)"}
	case pre[0].Version == 0:
		return condition{expr: "attribute_exists(PK) AND attribute_not_exists(PK)"}
	}
	return versionIs(pre[0].Version)
}

// conditionalPut returns a conditional Put of it.
func (s *Store) conditionalPut(it item, c condition) types.TransactWriteItem {
	p := &types.Put{TableName: &s.table, Item: it, ConditionExpression: aws.String(c.expr)}
	if len(c.names) > 0 {
		p.ExpressionAttributeNames, p.ExpressionAttributeValues = c.names, c.values
	}
	return types.TransactWriteItem{Put: p}
}

// conditionalDelete returns a conditional Delete of the item at key.
func (s *Store) conditionalDelete(key item, c condition) types.TransactWriteItem {
	d := &types.Delete{TableName: &s.table, Key: key, ConditionExpression: aws.String(c.expr)}
	if len(c.names) > 0 {
		d.ExpressionAttributeNames, d.ExpressionAttributeValues = c.names, c.values
	}
	return types.TransactWriteItem{Delete: d}
}

// readVersion reads, strongly, the version of the item at key (0: none).
func (s *Store) readVersion(ctx context.Context, key item) (int64, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key, ConsistentRead: aws.Bool(true),
		ProjectionExpression:     aws.String("PK, #ver"),
		ExpressionAttributeNames: map[string]string{"#ver": attrRecordVersion},
	})
	if err != nil {
		return 0, fmt.Errorf("dynamodb: read version: %w", err)
	}
	return versionOf(out.Item), nil
}

// deleteRefused tells why a conditional delete of the item at key with
// pre failed: it is gone (notFound) or pre does not hold.
func (s *Store) deleteRefused(ctx context.Context, key item, pre []store.Precondition, notFound error) error {
	if !store.Expects(pre) {
		return notFound
	}
	have, err := s.readVersion(ctx, key)
	if err != nil {
		return err
	}
	if have == 0 {
		return notFound
	}
	if err := store.CheckVersion(have, pre); err != nil {
		return err
	}
	return fmt.Errorf("dynamodb: %w: the item changed during the delete; try again", ErrContention)
}

// versionRefused is the error of a conditional write of the item at key
// that failed its precondition pre: the version now stored, read to say
// what it is.
func (s *Store) versionRefused(ctx context.Context, key item, pre []store.Precondition) error {
	have, err := s.readVersion(ctx, key)
	if err != nil {
		return err
	}
	if err := store.CheckVersion(have, pre); err != nil {
		return err
	}
	// Changed back to the version expected since (a delete and a put):
	// still a change the caller did not see.
	return model.VersionMismatch(pre[0].Version, have)
}

// errKeptChanging is returned when maxVersionRetries did not suffice.
var errKeptChanging = fmt.Errorf("dynamodb: %w: the item kept changing; try again", ErrContention)
