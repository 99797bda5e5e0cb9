package dynamodb

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/internal/ddblocal"
)

func TestTableLifecycle(t *testing.T) {
	ctx := context.Background()
	s := newTable(t)
	st, err := s.Admin().DescribeTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != "ACTIVE" || st.SchemaVersion != SchemaVersion || st.Name != s.Table() {
		t.Errorf("DescribeTable = %+v, want ACTIVE with schema version %d", st, SchemaVersion)
	}
	// Creating it again is a no-op check, not an error.
	if err := s.Admin().CreateTable(ctx); err != nil {
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

	setVersion := func(v int64) {
		t.Helper()
		if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: item{
			attrPK: str(registryPK()), attrSK: str(skVersion), "version": num(v),
		}}); err != nil {
			t.Fatal(err)
		}
	}
	// A table of schema version 1 is refused by CheckTable, naming the
	// upgrade, and upgraded by CreateTable.
	setVersion(upgradableVersion)
	if err := s.Admin().CheckTable(ctx); !errors.Is(err, ErrSchemaUpgradable) || !errors.Is(err, ErrSchemaMismatch) || !strings.Contains(err.Error(), "upgrade") {
		t.Errorf("CheckTable with version %d: %v, want ErrSchemaMismatch naming the upgrade", upgradableVersion, err)
	}
	if err := s.Admin().CreateTable(ctx); err != nil {
		t.Fatalf("CreateTable upgrading version %d: %v", upgradableVersion, err)
	}
	if err := s.Admin().CheckTable(ctx); err != nil {
		t.Errorf("CheckTable after the upgrade: %v", err)
	}

	// A table written by a later schema version is refused, and left alone.
	setVersion(SchemaVersion + 1)
	if err := s.Admin().CheckTable(ctx); !errors.Is(err, ErrSchemaMismatch) || errors.Is(err, ErrSchemaUpgradable) {
		t.Errorf("CheckTable with version %d: %v, want ErrSchemaMismatch, not upgradable", SchemaVersion+1, err)
	}
	if err := s.Admin().CreateTable(ctx); !errors.Is(err, ErrSchemaMismatch) {
		t.Errorf("CreateTable over version %d: %v, want ErrSchemaMismatch", SchemaVersion+1, err)
	}
	if st, err := s.Admin().DescribeTable(ctx); err != nil || st.SchemaVersion != SchemaVersion+1 {
		t.Errorf("CreateTable over version %d: %+v, %v; want the version kept", SchemaVersion+1, st, err)
	}

	// A missing table is reported as such.
	other := mustNew(t, localConfig(), "tollgate-missing-"+randomHex(4), nil, atLocal)
	if err := other.Admin().CheckTable(ctx); !errors.Is(err, ErrTableNotFound) {
		t.Errorf("CheckTable of a missing table: %v, want ErrTableNotFound", err)
	}
	if err := other.Admin().DeleteTable(ctx); err != nil {
		t.Errorf("DeleteTable of a missing table: %v, want nil", err)
	}
}

func TestStreamsEnabledByDefault(t *testing.T) {
	if endpoint == "" {
		t.Skip("no DynamoDB Local")
	}
	ctx := context.Background()
	s := mustNew(t, localConfig(), "tollgate-streams-"+randomHex(4), nil, atLocal)
	if err := s.Admin().CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Admin().DeleteTable(ctx)
	out, err := s.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &s.table})
	if err != nil {
		t.Fatal(err)
	}
	if spec := out.Table.StreamSpecification; spec == nil || spec.StreamEnabled == nil || !*spec.StreamEnabled || spec.StreamViewType != "NEW_AND_OLD_IMAGES" {
		t.Errorf("stream specification %+v, want NEW_AND_OLD_IMAGES", spec)
	}
}

// CreateTable turns TTL on for the attribute ttl.
func TestTableTTLEnabled(t *testing.T) {
	ctx := context.Background()
	s := newTable(t)
	out, err := s.db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &s.table})
	if err != nil {
		t.Fatal(err)
	}
	d := out.TimeToLiveDescription
	if d == nil || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != attrTTL {
		t.Errorf("TTL %+v, want ENABLED on %q", d, attrTTL)
	}
}

// A table of the same name but another layout is refused, by CheckTable
// and by CreateTable, with ErrSchemaMismatch naming what differs; and
// CreateTable writes nothing to it (no version record, TTL left off).
func TestForeignTableRefused(t *testing.T) {
	if endpoint == "" {
		t.Skip(ddblocal.Help)
	}
	ctx := context.Background()
	tests := []struct {
		name    string
		streams bool // the Store expects a stream
		edit    func(in *dynamodb.CreateTableInput)
		want    []string // in the error
	}{
		{"key schema", false, func(in *dynamodb.CreateTableInput) {
			in.KeySchema = []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}}
			in.AttributeDefinitions = append(in.AttributeDefinitions[2:], // not PK, SK
				types.AttributeDefinition{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS})
		}, []string{"key schema is [id HASH S], want [PK HASH S, SK RANGE S]"}},
		{"key type", false, func(in *dynamodb.CreateTableInput) {
			in.AttributeDefinitions[1].AttributeType = types.ScalarAttributeTypeN // SK
		}, []string{"key schema is [PK HASH S, SK RANGE N]"}},
		// The GSI2 of tables created by commit b91eeeb (docs/dynamodb.md 2.3).
		{"projection", false, func(in *dynamodb.CreateTableInput) {
			in.GlobalSecondaryIndexes[1].Projection.ProjectionType = types.ProjectionTypeAll
		}, []string{"index GSI2 projects ALL, want KEYS_ONLY"}},
		{"missing index", false, func(in *dynamodb.CreateTableInput) {
			in.GlobalSecondaryIndexes = in.GlobalSecondaryIndexes[:2]
			in.AttributeDefinitions = in.AttributeDefinitions[:6] // PK, SK, GSI1 and GSI2 keys
		}, []string{"index GSI3 is missing", "index GSI4 is missing"}},
		{"index keys", false, func(in *dynamodb.CreateTableInput) {
			in.GlobalSecondaryIndexes[0].KeySchema = keySchema(attrGSI1SK, attrGSI1PK)
		}, []string{"index GSI1 keys are [GSI1SK HASH S, GSI1PK RANGE S], want [GSI1PK HASH S, GSI1SK RANGE S]"}},
		{"no stream", true, func(in *dynamodb.CreateTableInput) {
			in.StreamSpecification = nil
		}, []string{"stream is none, want NEW_AND_OLD_IMAGES"}},
		{"stream view", true, func(in *dynamodb.CreateTableInput) {
			in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeKeysOnly}
		}, []string{"stream is KEYS_ONLY, want NEW_AND_OLD_IMAGES"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var opts []Option
			if !tt.streams {
				opts = append(opts, WithoutStreams())
			}
			// A foreign table's stream, where there is one, never gets
			// records here: it cannot slow DynamoDB Local down.
			s := mustNew(t, localConfig(), "tollgate-foreign-"+randomHex(4), opts, atLocal)
			in := createTableInput(s.table, s.opts.noStreams)
			tt.edit(in)
			if _, err := s.db.CreateTable(ctx, in); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Admin().DeleteTable(context.Background()) })
			for name, call := range map[string]func(context.Context) error{"CheckTable": s.Admin().CheckTable, "CreateTable": s.Admin().CreateTable} {
				err := call(ctx)
				if !errors.Is(err, ErrSchemaMismatch) {
					t.Fatalf("%s of a foreign table: %v, want ErrSchemaMismatch", name, err)
				}
				for _, w := range tt.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %q does not say %q", name, err, w)
					}
				}
			}
			scan, err := s.db.Scan(ctx, &dynamodb.ScanInput{TableName: &s.table, Select: types.SelectCount})
			if err != nil {
				t.Fatal(err)
			}
			if scan.Count != 0 {
				t.Errorf("%d items after CreateTable refused the table; want nothing written (no version record)", scan.Count)
			}
			ttl, err := s.db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &s.table})
			if err != nil {
				t.Fatal(err)
			}
			if st := ttl.TimeToLiveDescription.TimeToLiveStatus; st != types.TimeToLiveStatusDisabled {
				t.Errorf("TTL %s after CreateTable refused the table; want it left DISABLED", st)
			}
		})
	}
}

// A table that exists but is not ACTIVE (DynamoDB Local creates and
// updates tables at once, so the transport rewrites the status it reports)
// is refused with ErrTableNotActive.
func TestTableNotActive(t *testing.T) {
	tt := newTestTable(t)
	c := tt.client(t, 5*time.Second)
	c.net.editResponse("DescribeTable", func(body []byte) []byte {
		return bytes.ReplaceAll(body, []byte(`"TableStatus":"ACTIVE"`), []byte(`"TableStatus":"UPDATING"`))
	})
	if err := c.Admin().CheckTable(context.Background()); !errors.Is(err, ErrTableNotActive) || !strings.Contains(err.Error(), "UPDATING") {
		t.Errorf("CheckTable of an UPDATING table: %v, want ErrTableNotActive naming the status", err)
	}
}
