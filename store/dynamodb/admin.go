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

	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// SchemaVersion is the layout of items this package reads and writes. A table
// whose version record differs is refused, except one of version 1, which
// CreateTable upgrades (see upgradableVersion).
//
// Version 2 stores a refilling limit as its full tick (docs/dynamodb.md
// 4.1); version 1 stored its balance at the item's refill time. This
// package reads version 1 bucket items and converts each at its next
// write; a process of version 1 cannot read a converted item, so every
// process of an older Tollgate must be stopped before the upgrade.
const SchemaVersion = schema.Version

// upgradableVersion is the schema version CreateTable upgrades in place:
// its items differ only in bucket items, which are converted as they are
// written.
const upgradableVersion = 1

// ErrSchemaMismatch is returned by CheckTable and CreateTable when the
// table is not one this package can use: its key schema, its indexes or its
// stream differ from what CreateTable makes (the error names what differs),
// or it was written by an incompatible version of Tollgate.
var ErrSchemaMismatch = errors.New("dynamodb: incompatible table schema")

// ErrSchemaUpgradable is returned by CheckTable for a table of an earlier
// schema version that CreateTable upgrades in place (see SchemaVersion).
// It matches ErrSchemaMismatch too.
var ErrSchemaUpgradable = fmt.Errorf("%w (upgradable)", ErrSchemaMismatch)

// ErrSchemaUnversioned is returned by CheckTable for a table of the right
// layout without a schema version record: one another tool created (the
// CloudFormation template deployed by hand, Terraform without its
// aws_dynamodb_table_item). InitTable (tollgate deploy) writes the record.
// It matches ErrSchemaMismatch too.
var ErrSchemaUnversioned = fmt.Errorf("%w (no schema version record)", ErrSchemaMismatch)

// ErrTableNotFound is returned by CheckTable when the table does not exist.
var ErrTableNotFound = errors.New("dynamodb: table not found")

// ErrTableNotActive is returned by CheckTable when the table exists but is
// not ACTIVE (being created, updated or deleted).
var ErrTableNotActive = errors.New("dynamodb: table not active")

// Admin manages a Store's table: it creates the table, prepares one
// another tool created, checks it, describes it and deletes it. These are
// an operator's calls (tollgate deploy, status and destroy; a process's
// check at startup), which DynamoDB may take seconds over: the call
// timeout (WithCallTimeout) does not bound them. Store.Admin returns it.
type Admin struct {
	*client
	noStreams bool // see WithoutStreams: no stream made, none checked
}

// Admin returns the administration of the store's table.
func (s *Store) Admin() *Admin { return &Admin{client: s.client, noStreams: s.opts.noStreams} }

// CreateTable creates the table (keys, the four GSIs, streams with new and
// old images, TTL on "ttl", on-demand billing), waits until it is active and
// writes the schema version record. An existing table (perhaps created by
// another process) is checked instead, before anything is written to it: a
// table of another layout is refused with ErrSchemaMismatch, and one of
// this layout is initialised as InitTable does (a table CloudFormation or
// Terraform made gets its version record). An existing table of schema
// version 1 is upgraded to SchemaVersion (stop the processes of older
// versions first: see SchemaVersion).
func (a *Admin) CreateTable(ctx context.Context) error {
	ctx = unbounded(ctx) // an operator's: not bounded by the call timeout
	_, err := a.db.CreateTable(ctx, createTableInput(a.table, a.noStreams))
	var inUse *types.ResourceInUseException
	existed := errors.As(err, &inUse)
	if err != nil && !existed {
		return fmt.Errorf("dynamodb: create table %s: %w", a.table, err)
	}
	if err := dynamodb.NewTableExistsWaiter(a.db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &a.table}, 5*time.Minute); err != nil {
		return fmt.Errorf("dynamodb: wait for table %s: %w", a.table, err)
	}
	if existed {
		return a.InitTable(ctx)
	}
	if err := a.enableTTL(ctx); err != nil {
		return err
	}
	if err := a.writeVersion(ctx, true); err != nil {
		return err
	}
	return a.CheckTable(ctx)
}

// InitTable prepares a table another tool created (CloudFormation,
// Terraform) for this package, without creating anything: it checks the
// table's layout (ErrSchemaMismatch, naming what differs, before anything
// is written), turns TTL on, and writes the schema version record unless
// one is there (a version 1 record is upgraded, as CreateTable does). It
// needs dynamodb:UpdateTimeToLive, DescribeTable, GetItem and PutItem on the
// table, not CreateTable. A missing table is ErrTableNotFound. Running it
// again changes nothing.
func (a *Admin) InitTable(ctx context.Context) error {
	ctx = unbounded(ctx) // an operator's: not bounded by the call timeout
	desc, err := a.describe(ctx)
	if err != nil {
		return err
	}
	if desc.TableStatus != types.TableStatusActive {
		return fmt.Errorf("%w: table %s is %s", ErrTableNotActive, a.table, desc.TableStatus)
	}
	if err := a.verifyLayout(desc); err != nil {
		return err
	}
	if err := a.enableTTL(ctx); err != nil {
		return err
	}
	if err := a.writeVersion(ctx, false); err != nil {
		return err
	}
	return a.CheckTable(ctx)
}

func keySchema(pk, sk string) []types.KeySchemaElement {
	return []types.KeySchemaElement{
		{AttributeName: aws.String(pk), KeyType: types.KeyTypeHash},
		{AttributeName: aws.String(sk), KeyType: types.KeyTypeRange},
	}
}

// createTableInput is the CreateTable request of table, with a stream
// unless noStreams.
func createTableInput(table string, noStreams bool) *dynamodb.CreateTableInput {
	streams := &types.StreamSpecification{
		StreamEnabled:  aws.Bool(true),
		StreamViewType: types.StreamViewTypeNewAndOldImages,
	}
	if noStreams {
		streams = nil
	}
	attrs := []types.AttributeDefinition{
		{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
		{AttributeName: aws.String(attrSK), AttributeType: types.ScalarAttributeTypeS},
	}
	var gsis []types.GlobalSecondaryIndex
	for _, ix := range schema.Indexes {
		attrs = append(attrs,
			types.AttributeDefinition{AttributeName: aws.String(ix.PK), AttributeType: types.ScalarAttributeTypeS},
			types.AttributeDefinition{AttributeName: aws.String(ix.SK), AttributeType: types.ScalarAttributeTypeS})
		gsis = append(gsis, types.GlobalSecondaryIndex{
			IndexName:  aws.String(ix.Name),
			KeySchema:  keySchema(ix.PK, ix.SK),
			Projection: &types.Projection{ProjectionType: ix.Projection},
		})
	}
	return &dynamodb.CreateTableInput{
		TableName:              &table,
		AttributeDefinitions:   attrs,
		KeySchema:              keySchema(attrPK, attrSK),
		BillingMode:            types.BillingModePayPerRequest,
		GlobalSecondaryIndexes: gsis,
		StreamSpecification:    streams,
	}
}

// verifyLayout compares a table's description with what CreateTable makes:
// the key schema, the four GSIs (keys and projections; other indexes are
// allowed) and, unless the Store was made WithoutStreams, a stream with new
// and old images. It returns ErrSchemaMismatch naming every difference.
func (a *Admin) verifyLayout(d *types.TableDescription) error {
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, def := range d.AttributeDefinitions {
		attrTypes[aws.ToString(def.AttributeName)] = def.AttributeType
	}
	var diffs []string
	if got, want := describeKeys(d.KeySchema, attrTypes), describeKeys(keySchema(attrPK, attrSK), nil); got != want {
		diffs = append(diffs, fmt.Sprintf("key schema is %s, want %s", got, want))
	}
	found := map[string]bool{}
	for _, g := range d.GlobalSecondaryIndexes {
		for _, ix := range schema.Indexes {
			if aws.ToString(g.IndexName) != ix.Name {
				continue
			}
			found[ix.Name] = true
			if got, want := describeKeys(g.KeySchema, attrTypes), describeKeys(keySchema(ix.PK, ix.SK), nil); got != want {
				diffs = append(diffs, fmt.Sprintf("index %s keys are %s, want %s", ix.Name, got, want))
			}
			var got types.ProjectionType
			if g.Projection != nil {
				got = g.Projection.ProjectionType
			}
			if got != ix.Projection {
				diffs = append(diffs, fmt.Sprintf("index %s projects %s, want %s", ix.Name, orNone(string(got)), ix.Projection))
			}
		}
	}
	for _, ix := range schema.Indexes {
		if !found[ix.Name] {
			diffs = append(diffs, "index "+ix.Name+" is missing")
		}
	}
	if !a.noStreams {
		view := "none"
		if sp := d.StreamSpecification; sp != nil && aws.ToBool(sp.StreamEnabled) {
			view = string(sp.StreamViewType)
		}
		if view != string(types.StreamViewTypeNewAndOldImages) {
			diffs = append(diffs, fmt.Sprintf("stream is %s, want %s", view, types.StreamViewTypeNewAndOldImages))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w: table %s: %s", ErrSchemaMismatch, a.table, strings.Join(diffs, "; "))
	}
	return nil
}

// describeKeys renders a key schema as "[PK HASH S, SK RANGE S]", with the
// attribute types where types is not nil (key attributes must be strings).
func describeKeys(ks []types.KeySchemaElement, attrTypes map[string]types.ScalarAttributeType) string {
	parts := make([]string, len(ks))
	for i, k := range ks {
		name := aws.ToString(k.AttributeName)
		typ := types.ScalarAttributeTypeS
		if attrTypes != nil {
			typ = attrTypes[name]
		}
		parts[i] = fmt.Sprintf("%s %s %s", name, k.KeyType, orNone(string(typ)))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func (a *Admin) enableTTL(ctx context.Context) error {
	_, err := a.db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: &a.table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(attrTTL), Enabled: aws.Bool(true),
		},
	})
	// Enabling TTL twice is refused ("already enabled"): that is success.
	var invalid *types.ResourceInUseException
	if err != nil && !errors.As(err, &invalid) && !isAlreadyEnabled(err) {
		return fmt.Errorf("dynamodb: enable TTL on %s: %w", a.table, err)
	}
	return nil
}

func isAlreadyEnabled(err error) bool {
	var apiErr interface{ ErrorMessage() string }
	return errors.As(err, &apiErr) && strings.Contains(strings.ToLower(apiErr.ErrorMessage()), "already enabled")
}

// writeVersion records SchemaVersion unless a version is already
// recorded, or upgrades a recorded upgradableVersion to it. A new table
// (created) holds no item an older Tollgate wrote, so its record says
// that the namespace index is spread (nsindex.go); a table another tool
// made may be an old one, and gets that from ReindexNamespaceIndex.
func (a *Admin) writeVersion(ctx context.Context, created bool) error {
	it := item{
		attrPK:            str(registryPK()),
		attrSK:            str(skVersion),
		attrSchemaVersion: num(SchemaVersion),
	}
	if created {
		it[schema.AttrNamespaceIndex] = num(schema.NamespaceIndexParts)
	}
	_, err := a.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 &a.table,
		Item:                      it,
		ConditionExpression:       aws.String("attribute_not_exists(PK) OR version = :old"),
		ExpressionAttributeValues: item{":old": num(upgradableVersion)},
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
func (a *Admin) DescribeTable(ctx context.Context) (TableStatus, error) {
	ctx = unbounded(ctx) // an operator's: not bounded by the call timeout
	d, err := a.describe(ctx)
	if err != nil {
		return TableStatus{}, err
	}
	st := TableStatus{
		Name:      a.table,
		Status:    string(d.TableStatus),
		ItemCount: aws.ToInt64(d.ItemCount),
		SizeBytes: aws.ToInt64(d.TableSizeBytes),
		StreamARN: aws.ToString(d.LatestStreamArn),
	}
	st.SchemaVersion, err = a.readVersion(ctx)
	return st, err
}

// describe returns the table's description, or ErrTableNotFound.
func (a *Admin) describe(ctx context.Context) (*types.TableDescription, error) {
	out, err := a.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &a.table})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil, fmt.Errorf("%w: %s", ErrTableNotFound, a.table)
	}
	if err != nil {
		return nil, fmt.Errorf("dynamodb: describe table %s: %w", a.table, err)
	}
	return out.Table, nil
}

// readVersion returns the recorded schema version, 0 if none is recorded.
func (a *Admin) readVersion(ctx context.Context) (int64, error) {
	v, err := a.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &a.table,
		Key:            item{attrPK: str(registryPK()), attrSK: str(skVersion)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return 0, fmt.Errorf("dynamodb: read schema version: %w", err)
	}
	n, _ := getN(v.Item, attrSchemaVersion)
	return n, nil
}

// CheckTable verifies that the table exists (else ErrTableNotFound), is
// active (else ErrTableNotActive), has the layout CreateTable makes and this
// package's schema version (else ErrSchemaMismatch, naming what differs).
func (a *Admin) CheckTable(ctx context.Context) error {
	ctx = unbounded(ctx) // an operator's: not bounded by the call timeout
	d, err := a.describe(ctx)
	if err != nil {
		return err
	}
	if d.TableStatus != types.TableStatusActive {
		return fmt.Errorf("%w: table %s is %s", ErrTableNotActive, a.table, d.TableStatus)
	}
	if err := a.verifyLayout(d); err != nil {
		return err
	}
	v, err := a.readVersion(ctx)
	if err != nil {
		return err
	}
	switch v {
	case SchemaVersion:
		return nil
	case 0:
		return fmt.Errorf("%w: table %s has no schema version record: initialise it once with InitTable "+
			"(tollgate deploy --store 'dynamodb://%s?region=...')", ErrSchemaUnversioned, a.table, a.table)
	case upgradableVersion:
		return fmt.Errorf("%w: table %s has schema version %d, this Tollgate needs %d: stop the processes of older "+
			"Tollgate versions, then upgrade the table with CreateTable (tollgate deploy); its buckets are converted as they are written",
			ErrSchemaUpgradable, a.table, v, SchemaVersion)
	}
	return fmt.Errorf("%w: table %s has schema version %d, this Tollgate needs %d",
		ErrSchemaMismatch, a.table, v, SchemaVersion)
}

// DeleteTable deletes the table and waits until it is gone.
func (a *Admin) DeleteTable(ctx context.Context) error {
	ctx = unbounded(ctx) // an operator's: not bounded by the call timeout
	_, err := a.db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &a.table})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dynamodb: delete table %s: %w", a.table, err)
	}
	return dynamodb.NewTableNotExistsWaiter(a.db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &a.table}, 5*time.Minute)
}
