package dynamodb

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/internal/ddblocal"
)

// A table made from Layout by another tool (deploy/terraform does so),
// with the TTL and the version record VersionRecord names, is one this
// package uses: CheckTable accepts it, and CreateTable (tollgate deploy)
// leaves it as it is. Without the version record CheckTable refuses it.
func TestTableFromLayout(t *testing.T) {
	if endpoint == "" {
		t.Skip(ddblocal.Help)
	}
	ctx := context.Background()
	l := Layout()
	name := "tollgate-test-layout-" + randomHex(6)
	db := dynamodb.NewFromConfig(localConfig(), atLocal)
	keys := func(pk, sk string) []types.KeySchemaElement {
		return []types.KeySchemaElement{
			{AttributeName: aws.String(pk), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(sk), KeyType: types.KeyTypeRange},
		}
	}
	in := &dynamodb.CreateTableInput{
		TableName:   &name,
		BillingMode: types.BillingMode(l.BillingMode),
		KeySchema:   keys(l.PartitionKey, l.SortKey),
		StreamSpecification: &types.StreamSpecification{
			StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewType(l.StreamViewType),
		},
	}
	for _, a := range l.StringAttributes {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{
			AttributeName: aws.String(a), AttributeType: types.ScalarAttributeTypeS,
		})
	}
	for _, ix := range l.Indexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName:  aws.String(ix.Name),
			KeySchema:  keys(ix.PartitionKey, ix.SortKey),
			Projection: &types.Projection{ProjectionType: types.ProjectionType(ix.Projection)},
		})
	}
	if _, err := db.CreateTable(ctx, in); err != nil {
		t.Fatal(err)
	}
	s := mustNew(t, localConfig(), name, nil, atLocal)
	t.Cleanup(func() { _ = s.Admin().DeleteTable(context.Background()) })
	if err := dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &name}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               &name,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(l.TTLAttribute), Enabled: aws.Bool(true)},
	}); err != nil {
		t.Fatal(err)
	}

	if err := s.Admin().CheckTable(ctx); !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("CheckTable without a version record = %v, want ErrSchemaMismatch", err)
	}
	pk, sk, attr := VersionRecord()
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &name, Item: map[string]types.AttributeValue{
		l.PartitionKey: &types.AttributeValueMemberS{Value: pk},
		l.SortKey:      &types.AttributeValueMemberS{Value: sk},
		attr:           &types.AttributeValueMemberN{Value: strconv.Itoa(SchemaVersion)},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Admin().CheckTable(ctx); err != nil {
		t.Fatalf("CheckTable of a table made from Layout: %v", err)
	}
	if err := s.Admin().CreateTable(ctx); err != nil {
		t.Fatalf("CreateTable (tollgate deploy) on a table made from Layout: %v", err)
	}
}
