package dynamodb

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// This file exports the few facts of the table's layout that tools outside
// the backend need to build infrastructure around it (package deploy: the
// CloudFormation template and the IAM policies). docs/dynamodb.md 2 and 7.

// NamespaceKeyPrefix is the prefix of every partition key the backend
// writes for the items of namespace id: the table's PK and the partition
// keys of GSI1, GSI2 and GSI3 all start with it (GSI4's are
// NamespaceIndexKeys). An IAM condition on dynamodb:LeadingKeys with
// NamespaceKeyPrefix(id)+"*" confines a principal to that namespace.
func NamespaceKeyPrefix(id string) string { return schema.NamespacePrefix(id) }

// NamespaceIndexKeys are the partition keys, in GSI4, of the items of
// namespace id: the NamespaceIndexParts parts "{id}#0" to "{id}#f" (an
// item's part is a hash of its table key), then the bare id, under which
// an older Tollgate wrote every item and which readers query until the
// table is migrated (Admin.ReindexNamespaceIndex). PurgeNamespace,
// ListEntities, ListConfigs and the audit log by time query them; an IAM
// condition on dynamodb:LeadingKeys of GSI4 names them all.
func NamespaceIndexKeys(id string) []string { return schema.NamespaceIndexKeys(id, true) }

// NamespaceIndexKeyPatterns are IAM StringLike patterns that match
// exactly the NamespaceIndexKeys of namespace id ('?' is one character:
// "{id}#?" matches the parts, and a namespace id, 16 hex digits, holds no
// '#' for another namespace's keys to match), two patterns rather than 17
// keys, so that a policy confining many namespaces stays within IAM's
// size limit.
func NamespaceIndexKeyPatterns(id string) []string { return []string{id + "#?", id} }

// NamespaceIndexParts is how many partition keys of GSI4 a namespace's
// items are spread over, besides the legacy bare id (NamespaceIndexKeys).
const NamespaceIndexParts = schema.NamespaceIndexParts

// RegistryPartitionKey is the partition key of the reserved partition
// outside every namespace: the namespace registry, the schema version and
// the stream consumer's checkpoint and lease items. Every process reads it
// (a namespace's name is resolved to its id there); only administrators
// and the aggregator write it. The change generation and the keys' records
// by hash are in partitions of their own (ChangesPartitionKey,
// KeyHashPartitionPrefix), so that each gets its own IAM statement.
func RegistryPartitionKey() string { return schema.RegistryPK() }

// ChangesPartitionKey is the partition key of the change generation item
// (store.Changes), alone in its reserved partition: every process reads it
// (about once a second), and every principal that changes configs,
// entities, keys or namespaces updates it in the same transaction.
func ChangesPartitionKey() string { return schema.ChangesPK() }

// KeyHashPartitionPrefix starts the partition key of every stored API
// key's record by hash (one reserved partition per key, outside every
// namespace): the server reads it to authenticate a request before its
// namespace is known. Only principals trusted with every namespace may
// write there; one that could would forge keys of any namespace.
func KeyHashPartitionPrefix() string { return schema.KeyHashPrefix }

// TTLAttribute is the attribute DynamoDB's time to live must be enabled on
// (Unix seconds): idle buckets, usage snapshots, lease tombstones and the
// aggregator's shard leases carry it.
const TTLAttribute = schema.AttrTTL

// IndexNames are the names of the table's global secondary indexes, in
// order (GSI1 to GSI4).
func IndexNames() []string {
	out := make([]string, len(schema.Indexes))
	for i, ix := range schema.Indexes {
		out[i] = ix.Name
	}
	return out
}

// TableDefinition is the CreateTable request that Admin.CreateTable sends
// for a table named table (with its stream): keys, attribute definitions,
// the four indexes and their projections, on-demand billing. CheckTable
// accepts a table created from it, by whatever tool, as long as it keeps
// the keys, indexes, projections and stream (billing mode, capacity,
// encryption and TTL settings are not checked).
func TableDefinition(table string) *dynamodb.CreateTableInput {
	return createTableInput(table, false)
}

// Operations are the DynamoDB operations on items that the backend calls
// (this package and package stream, through the table's client): the
// values of the Operation dimension under which CloudWatch reports
// Tollgate's requests in the table's ThrottledRequests and SystemErrors
// metrics. The table operations (CreateTable, DescribeTable,
// UpdateTimeToLive, DeleteTable) and the stream's (DescribeStream,
// GetShardIterator, GetRecords) are not among them. Alarms sum these
// metrics over this list (package deploy, deploy/terraform);
// TestOperations keeps it equal to the calls in the code.
func Operations() []string {
	return []string{"GetItem", "PutItem", "UpdateItem", "DeleteItem", "BatchGetItem", "BatchWriteItem", "Query", "TransactWriteItems"}
}

// The table's layout as data, for the Terraform module's tests
// (deploy/terraform). Each is derived from the code that creates the
// table or writes the items, so that a change here shows up in those
// artefacts' tests.

// TableLayout is the table as CreateTable makes it (docs/dynamodb.md 2).
type TableLayout struct {
	PartitionKey, SortKey string // key attribute names; both strings
	Indexes               []IndexLayout
	BillingMode           string // PAY_PER_REQUEST
	StreamViewType        string // NEW_AND_OLD_IMAGES
	TTLAttribute          string // the attribute CreateTable turns TTL on for
	// StringAttributes are the attribute definitions: every key attribute
	// of the table and its indexes, all strings.
	StringAttributes []string
}

// IndexLayout is one global secondary index as CreateTable makes it.
type IndexLayout struct {
	Name, PartitionKey, SortKey string // both keys are strings
	Projection                  string // ALL or KEYS_ONLY
}

// Layout returns the table's layout, read from the CreateTable input this
// package sends.
func Layout() TableLayout {
	in := createTableInput("layout", false)
	l := TableLayout{BillingMode: string(in.BillingMode), TTLAttribute: attrTTL}
	l.PartitionKey, l.SortKey = keyNames(in.KeySchema)
	for _, a := range in.AttributeDefinitions {
		if a.AttributeType == types.ScalarAttributeTypeS {
			l.StringAttributes = append(l.StringAttributes, aws.ToString(a.AttributeName))
		}
	}
	for _, g := range in.GlobalSecondaryIndexes {
		ix := IndexLayout{Name: aws.ToString(g.IndexName)}
		ix.PartitionKey, ix.SortKey = keyNames(g.KeySchema)
		if g.Projection != nil {
			ix.Projection = string(g.Projection.ProjectionType)
		}
		l.Indexes = append(l.Indexes, ix)
	}
	if sp := in.StreamSpecification; sp != nil && aws.ToBool(sp.StreamEnabled) {
		l.StreamViewType = string(sp.StreamViewType)
	}
	return l
}

func keyNames(ks []types.KeySchemaElement) (hash, rng string) {
	for _, k := range ks {
		switch k.KeyType {
		case types.KeyTypeHash:
			hash = aws.ToString(k.AttributeName)
		case types.KeyTypeRange:
			rng = aws.ToString(k.AttributeName)
		}
	}
	return hash, rng
}

// NamespaceIndexes returns the indexes whose partition keys begin with
// NamespaceKeyPrefix for every item that has an entry in them, in the
// order of Layout: those a tenant's LeadingKeys-conditioned queries may
// use. GSI4's partition keys are the namespace id and "{id}#{part}", so it
// is not among them (PurgeNamespace, its reader, is an operator's task).
func NamespaceIndexes() []string {
	const id = "0123456789abcdef"
	prefix := NamespaceKeyPrefix(id)
	var names []string
	for _, ix := range schema.Indexes {
		seen, all := false, true
		for _, it := range sampleItems(id) {
			if _, ok := it[ix.PK]; !ok {
				continue
			}
			seen = true
			all = all && strings.HasPrefix(getS(it, ix.PK), prefix)
		}
		if seen && all {
			names = append(names, ix.Name)
		}
	}
	return names
}

// sampleItems returns one item of each kind this package writes in
// namespace ns, made by the functions that write them.
func sampleItems(ns string) []item {
	ent, _ := encodeEntity(ns, model.Entity{ID: "child", ParentID: "parent"})
	audit, _ := encodeAudit(ns, model.AuditEvent{ID: "01J00000000000000000000000", Entity: "child"})
	lease, _ := encodeLease(ns, &store.LeaseRecord{ID: "lease", Entity: "child", Resource: "res"})
	bucket := encodeItem(itemID{ns: ns, key: store.BucketKey{Entity: "child", Resource: "res"}}, &image{}, nil)
	return []item{
		ent, audit, lease, bucket,
		encodeConfig(ns, model.Scope{}, model.Config{}),
		encodeConfig(ns, model.Scope{Resource: "res"}, model.Config{}),
		encodeConfig(ns, model.Scope{Entity: "child", Resource: "res"}, model.Config{}),
		usageKeyItem(ns, store.UsageKey{Entity: "child", Resource: "res", Window: store.Hourly}),
	}
}

// VersionRecord returns the key of the schema version record (partition
// and sort key) and the name of its number attribute, which holds
// SchemaVersion: CheckTable refuses a table without it. A table created
// other than by CreateTable (deploy/terraform) writes it itself.
func VersionRecord() (pk, sk, attr string) {
	return schema.RegistryPK(), schema.SKVersion, schema.AttrSchemaVersion
}
