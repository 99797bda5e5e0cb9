package dynamodb

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/internal/ddblocal"
)

// createForeignTable creates, as CloudFormation or Terraform would, a
// table from TableDefinition, changed by edit, without TTL or version
// record, and returns a store on it.
func createForeignTable(t *testing.T, edit func(*dynamodb.CreateTableInput)) (*Store, *dynamodb.Client) {
	t.Helper()
	if endpoint == "" {
		t.Skip(ddblocal.Help)
	}
	ctx := context.Background()
	name := "tollgate-test-init-" + randomHex(6)
	db := dynamodb.NewFromConfig(localConfig(), atLocal)
	in := TableDefinition(name)
	if edit != nil {
		edit(in)
	}
	if _, err := db.CreateTable(ctx, in); err != nil {
		t.Fatal(err)
	}
	s := mustNew(t, localConfig(), name, nil, atLocal)
	t.Cleanup(func() { _ = s.Admin().DeleteTable(context.Background()) })
	if err := dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &name}, time.Minute); err != nil {
		t.Fatal(err)
	}
	return s, db
}

// InitTable makes a table another tool created one every process accepts:
// TTL on, the version record written, once; it refuses a table of another
// layout before writing anything, and a table that is not there.
func TestInitTable(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		edit    func(*dynamodb.CreateTableInput)
		initErr error // what InitTable returns
	}{
		{"as the stack makes it", nil, nil},
		{"provisioned", func(in *dynamodb.CreateTableInput) {
			in.BillingMode = types.BillingModeProvisioned
			tp := &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(5), WriteCapacityUnits: aws.Int64(5)}
			in.ProvisionedThroughput = tp
			for i := range in.GlobalSecondaryIndexes {
				in.GlobalSecondaryIndexes[i].ProvisionedThroughput = tp
			}
		}, nil},
		{"an index projects all", func(in *dynamodb.CreateTableInput) {
			in.GlobalSecondaryIndexes[1].Projection = &types.Projection{ProjectionType: types.ProjectionTypeAll}
		}, ErrSchemaMismatch},
		{"no stream", func(in *dynamodb.CreateTableInput) { in.StreamSpecification = nil }, ErrSchemaMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, db := createForeignTable(t, tc.edit)
			before := s.Admin().CheckTable(ctx)
			if tc.initErr == nil && !errors.Is(before, ErrSchemaUnversioned) {
				t.Fatalf("CheckTable before InitTable = %v, want ErrSchemaUnversioned", before)
			}
			if tc.initErr != nil && errors.Is(before, ErrSchemaUnversioned) {
				t.Fatalf("CheckTable of a table of another layout = %v: it must name the layout, not the version", before)
			}
			err := s.Admin().InitTable(ctx)
			if !errors.Is(err, tc.initErr) || (tc.initErr == nil) != (err == nil) {
				t.Fatalf("InitTable = %v, want %v", err, tc.initErr)
			}
			d, derr := s.Admin().DescribeTable(ctx)
			if derr != nil {
				t.Fatal(derr)
			}
			ttl, terr := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(s.Table())})
			if terr != nil {
				t.Fatal(terr)
			}
			ttlOn := ttl.TimeToLiveDescription != nil && ttl.TimeToLiveDescription.TimeToLiveStatus == types.TimeToLiveStatusEnabled &&
				aws.ToString(ttl.TimeToLiveDescription.AttributeName) == TTLAttribute
			if tc.initErr != nil {
				if d.SchemaVersion != 0 || ttlOn {
					t.Fatalf("InitTable refused the table but wrote version %d, TTL on %v", d.SchemaVersion, ttlOn)
				}
				return
			}
			if d.SchemaVersion != SchemaVersion || !ttlOn {
				t.Fatalf("after InitTable: version %d, TTL on %v; want %d and on", d.SchemaVersion, ttlOn, SchemaVersion)
			}
			if err := s.Admin().CheckTable(ctx); err != nil {
				t.Fatalf("CheckTable after InitTable: %v", err)
			}
			if err := s.Admin().InitTable(ctx); err != nil {
				t.Fatalf("InitTable again: %v", err)
			}
			if err := s.Admin().CreateTable(ctx); err != nil {
				t.Fatalf("CreateTable (tollgate deploy) after InitTable: %v", err)
			}
		})
	}
}

// CreateTable initialises an unversioned table it finds, and InitTable
// upgrades a version 1 record and refuses a missing table.
func TestInitTableEdges(t *testing.T) {
	ctx := context.Background()
	s, db := createForeignTable(t, nil)
	if err := s.Admin().CreateTable(ctx); err != nil {
		t.Fatalf("CreateTable on an unversioned table: %v", err)
	}
	if err := s.Admin().CheckTable(ctx); err != nil {
		t.Fatalf("CheckTable after CreateTable: %v", err)
	}

	s2, _ := createForeignTable(t, nil)
	pk, sk, attr := VersionRecord()
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s2.Table()), Item: item{
		attrPK: str(pk), attrSK: str(sk), attr: num(upgradableVersion),
	}}); err != nil {
		t.Fatal(err)
	}
	if err := s2.Admin().InitTable(ctx); err != nil {
		t.Fatalf("InitTable of a version 1 table: %v", err)
	}
	if d, _ := s2.Admin().DescribeTable(ctx); d.SchemaVersion != SchemaVersion {
		t.Fatalf("after InitTable of a version 1 table: version %d", d.SchemaVersion)
	}

	missing := mustNew(t, localConfig(), "tollgate-test-missing-"+randomHex(6), nil, atLocal)
	if err := missing.Admin().InitTable(ctx); !errors.Is(err, ErrTableNotFound) {
		t.Fatalf("InitTable of a missing table = %v, want ErrTableNotFound", err)
	}
}
