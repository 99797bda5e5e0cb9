package dynamodb

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

func TestTableLifecycle(t *testing.T) {
	ctx := context.Background()
	s := newTable(t)
	st, err := s.DescribeTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != "ACTIVE" || st.SchemaVersion != SchemaVersion || st.Name != s.Table() {
		t.Errorf("DescribeTable = %+v, want ACTIVE with schema version %d", st, SchemaVersion)
	}
	// Creating it again is a no-op check, not an error.
	if err := s.CreateTable(ctx); err != nil {
		t.Errorf("CreateTable on an existing table: %v", err)
	}
	out, err := s.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &s.table})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.Table.GlobalSecondaryIndexes); n != 4 {
		t.Errorf("%d GSIs, want 4", n)
	}
	if out.Table.BillingModeSummary == nil || out.Table.BillingModeSummary.BillingMode != "PAY_PER_REQUEST" {
		t.Errorf("billing mode %+v, want PAY_PER_REQUEST", out.Table.BillingModeSummary)
	}

	// A table written by another schema version is refused.
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: item{
		attrPK: str(registryPK()), attrSK: str(skVersion), "version": num(SchemaVersion + 1),
	}}); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckTable(ctx); !errors.Is(err, ErrSchemaMismatch) {
		t.Errorf("CheckTable with version %d: %v, want ErrSchemaMismatch", SchemaVersion+1, err)
	}

	// A missing table is reported as such.
	other := New(localConfig(), "tollgate-missing-"+randomHex(4), nil, atLocal)
	if err := other.CheckTable(ctx); !errors.Is(err, ErrTableNotFound) {
		t.Errorf("CheckTable of a missing table: %v, want ErrTableNotFound", err)
	}
	if err := other.DeleteTable(ctx); err != nil {
		t.Errorf("DeleteTable of a missing table: %v, want nil", err)
	}
}

func TestStreamsEnabledByDefault(t *testing.T) {
	if endpoint == "" {
		t.Skip("no DynamoDB Local")
	}
	ctx := context.Background()
	s := New(localConfig(), "tollgate-streams-"+randomHex(4), nil, atLocal)
	if err := s.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.DeleteTable(ctx)
	out, err := s.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &s.table})
	if err != nil {
		t.Fatal(err)
	}
	if spec := out.Table.StreamSpecification; spec == nil || spec.StreamEnabled == nil || !*spec.StreamEnabled || spec.StreamViewType != "NEW_AND_OLD_IMAGES" {
		t.Errorf("stream specification %+v, want NEW_AND_OLD_IMAGES", spec)
	}
}
