package dynamodb

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// The change generation (store.Changes, docs/dynamodb.md 4.15) is one
// item in a partition of its own, _/CHANGES# #GENERATION, with a number
// gen that every change of the control plane raises by an ADD in the
// transaction that makes the change (transactMeta adds it to each), so a
// change and its generation commit together. Every process polls it with
// one strongly consistent GetItem (1 RCU) about once a second. Only its
// moving matters: ADD on a missing item creates it at 1.

// generationKey is the key of the change generation item.
func generationKey() item {
	return item{attrPK: str(schema.ChangesPK()), attrSK: str(schema.SKGeneration)}
}

// bumpItem is the transaction item that raises the generation.
func (s *Store) bumpItem() types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                 &s.table,
		Key:                       generationKey(),
		UpdateExpression:          aws.String("ADD #g :one"),
		ExpressionAttributeNames:  map[string]string{"#g": schema.AttrGeneration},
		ExpressionAttributeValues: item{":one": num(1)},
	}}
}

// bump raises the generation on its own, for the changes that are not one
// transaction (PurgeNamespace): after the change, before its call returns.
func (s *Store) bump(ctx context.Context) error {
	u := s.bumpItem().Update
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: u.TableName, Key: u.Key,
		UpdateExpression: u.UpdateExpression, ExpressionAttributeNames: u.ExpressionAttributeNames,
		ExpressionAttributeValues: u.ExpressionAttributeValues})
	if err != nil {
		return fmt.Errorf("dynamodb: raise the change generation: %w", err)
	}
	return nil
}

// Generation implements store.Changes: one strongly consistent GetItem of
// the generation item (0 while no change was ever made).
func (s *Store) Generation(ctx context.Context) (uint64, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                &s.table,
		Key:                      generationKey(),
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#g"),
		ExpressionAttributeNames: map[string]string{"#g": schema.AttrGeneration},
	})
	if err != nil {
		return 0, fmt.Errorf("dynamodb: read the change generation: %w", err)
	}
	v, ok := out.Item[schema.AttrGeneration].(*types.AttributeValueMemberN)
	if !ok {
		return 0, nil
	}
	g, err := strconv.ParseUint(v.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("dynamodb: the change generation %q: %w", v.Value, err)
	}
	return g, nil
}

// LocalGeneration implements store.Changes: many processes share the
// table, so callers poll Generation.
func (s *Store) LocalGeneration() bool { return false }
