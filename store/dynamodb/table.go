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
)

// SchemaVersion is the layout of items this package reads and writes. A table
// whose version record differs is refused.
const SchemaVersion = 1

// ErrSchemaMismatch is returned by CheckTable and CreateTable when the table
// was written by an incompatible version of Tollgate.
var ErrSchemaMismatch = errors.New("dynamodb: incompatible table schema")

// ErrTableNotFound is returned by CheckTable when the table does not exist.
var ErrTableNotFound = errors.New("dynamodb: table not found")

// CreateTable creates the table (keys, the four GSIs, streams with new and
// old images, TTL on "ttl", on-demand billing), waits until it is active and
// writes the schema version record. An existing table is checked instead.
func (s *Store) CreateTable(ctx context.Context) error {
	_, err := s.db.CreateTable(ctx, s.createTableInput())
	var inUse *types.ResourceInUseException
	switch {
	case errors.As(err, &inUse):
		// Already there (perhaps created by another process): wait and check.
	case err != nil:
		return fmt.Errorf("dynamodb: create table %s: %w", s.table, err)
	}
	if err := dynamodb.NewTableExistsWaiter(s.db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &s.table}, 5*time.Minute); err != nil {
		return fmt.Errorf("dynamodb: wait for table %s: %w", s.table, err)
	}
	if err := s.enableTTL(ctx); err != nil {
		return err
	}
	if err := s.writeVersion(ctx); err != nil {
		return err
	}
	return s.CheckTable(ctx)
}

func (s *Store) createTableInput() *dynamodb.CreateTableInput {
	streams := &types.StreamSpecification{
		StreamEnabled:  aws.Bool(true),
		StreamViewType: types.StreamViewTypeNewAndOldImages,
	}
	if s.noStreams {
		streams = nil
	}
	key := func(pk, sk string) []types.KeySchemaElement {
		return []types.KeySchemaElement{
			{AttributeName: aws.String(pk), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(sk), KeyType: types.KeyTypeRange},
		}
	}
	gsi := func(name, pk, sk string, projection types.ProjectionType) types.GlobalSecondaryIndex {
		return types.GlobalSecondaryIndex{
			IndexName:  aws.String(name),
			KeySchema:  key(pk, sk),
			Projection: &types.Projection{ProjectionType: projection},
		}
	}
	var attrs []types.AttributeDefinition
	for _, a := range []string{attrPK, attrSK, attrGSI1PK, attrGSI1SK, attrGSI2PK, attrGSI2SK, attrGSI3PK, attrGSI3SK, attrGSI4PK, attrGSI4SK} {
		attrs = append(attrs, types.AttributeDefinition{AttributeName: aws.String(a), AttributeType: types.ScalarAttributeTypeS})
	}
	return &dynamodb.CreateTableInput{
		TableName:            &s.table,
		AttributeDefinitions: attrs,
		KeySchema:            key(attrPK, attrSK),
		BillingMode:          types.BillingModePayPerRequest,
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			gsi(gsi1, attrGSI1PK, attrGSI1SK, types.ProjectionTypeAll),
			// Keys only: token updates then never write the index.
			gsi(gsi2, attrGSI2PK, attrGSI2SK, types.ProjectionTypeKeysOnly),
			gsi(gsi3, attrGSI3PK, attrGSI3SK, types.ProjectionTypeKeysOnly),
			gsi(gsi4, attrGSI4PK, attrGSI4SK, types.ProjectionTypeKeysOnly),
		},
		StreamSpecification: streams,
	}
}

func (s *Store) enableTTL(ctx context.Context) error {
	_, err := s.db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: &s.table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(attrTTL), Enabled: aws.Bool(true),
		},
	})
	// Enabling TTL twice is refused ("already enabled"): that is success.
	var invalid *types.ResourceInUseException
	if err != nil && !errors.As(err, &invalid) && !isAlreadyEnabled(err) {
		return fmt.Errorf("dynamodb: enable TTL on %s: %w", s.table, err)
	}
	return nil
}

func isAlreadyEnabled(err error) bool {
	var apiErr interface{ ErrorMessage() string }
	return errors.As(err, &apiErr) && strings.Contains(strings.ToLower(apiErr.ErrorMessage()), "already enabled")
}

// writeVersion records SchemaVersion unless a version is already recorded.
func (s *Store) writeVersion(ctx context.Context) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table,
		Item: item{
			attrPK:    str(registryPK()),
			attrSK:    str(skVersion),
			"version": num(SchemaVersion),
		},
		ConditionExpression: aws.String("attribute_not_exists(PK)"),
	})
	var cond *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &cond) {
		return fmt.Errorf("dynamodb: write schema version: %w", err)
	}
	return nil
}

// TableStatus describes the table.
type TableStatus struct {
	Name          string
	Status        string // e.g. ACTIVE
	SchemaVersion int64  // 0 if no version record
	ItemCount     int64  // DynamoDB's estimate, refreshed about every 6 hours
	SizeBytes     int64
	StreamARN     string
}

// DescribeTable reports the table's state and schema version.
func (s *Store) DescribeTable(ctx context.Context) (TableStatus, error) {
	out, err := s.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &s.table})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return TableStatus{}, fmt.Errorf("%w: %s", ErrTableNotFound, s.table)
	}
	if err != nil {
		return TableStatus{}, fmt.Errorf("dynamodb: describe table %s: %w", s.table, err)
	}
	st := TableStatus{
		Name:      s.table,
		Status:    string(out.Table.TableStatus),
		ItemCount: aws.ToInt64(out.Table.ItemCount),
		SizeBytes: aws.ToInt64(out.Table.TableSizeBytes),
		StreamARN: aws.ToString(out.Table.LatestStreamArn),
	}
	v, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.table,
		Key:            item{attrPK: str(registryPK()), attrSK: str(skVersion)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return st, fmt.Errorf("dynamodb: read schema version: %w", err)
	}
	if v.Item != nil {
		st.SchemaVersion, _ = getN(v.Item, "version")
	}
	return st, nil
}

// CheckTable verifies that the table exists, is active, and has this
// package's schema version.
func (s *Store) CheckTable(ctx context.Context) error {
	st, err := s.DescribeTable(ctx)
	if err != nil {
		return err
	}
	if st.SchemaVersion != SchemaVersion {
		return fmt.Errorf("%w: table %s has schema version %d, this Tollgate needs %d",
			ErrSchemaMismatch, s.table, st.SchemaVersion, SchemaVersion)
	}
	if st.Status != string(types.TableStatusActive) {
		return fmt.Errorf("dynamodb: table %s is %s, not ACTIVE", s.table, st.Status)
	}
	return nil
}

// DeleteTable deletes the table and waits until it is gone.
func (s *Store) DeleteTable(ctx context.Context) error {
	_, err := s.db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &s.table})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dynamodb: delete table %s: %w", s.table, err)
	}
	return dynamodb.NewTableNotExistsWaiter(s.db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &s.table}, 5*time.Minute)
}
