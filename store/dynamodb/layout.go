package dynamodb

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// This file exports the few facts of the table's layout that tools outside
// the backend need to build infrastructure around it (package deploy: the
// CloudFormation template and the IAM policies). docs/dynamodb.md 2 and 7.

// NamespaceKeyPrefix is the prefix of every partition key the backend
// writes for the items of namespace id: the table's PK and the partition
// keys of GSI1, GSI2 and GSI3 all start with it (GSI4's is
// NamespaceIndexKey). An IAM condition on dynamodb:LeadingKeys with
// NamespaceKeyPrefix(id)+"*" confines a principal to that namespace.
func NamespaceKeyPrefix(id string) string { return id + "/" }

// NamespaceIndexKey is the partition key, in GSI4, of every item of
// namespace id: the bare id (PurgeNamespace, ListEntities and ListConfigs
// query it).
func NamespaceIndexKey(id string) string { return id }

// RegistryPartitionKey is the partition key of the reserved partition
// outside every namespace: the namespace registry, the schema version and
// the stream consumer's checkpoint and lease items. Every process reads it
// (a namespace's name is resolved to its id there); only administrators
// and the aggregator write it. The change generation and the keys' records
// by hash are in partitions of their own (ChangesPartitionKey,
// KeyHashPartitionPrefix), so that each gets its own IAM statement.
func RegistryPartitionKey() string { return registryPK() }

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
const TTLAttribute = attrTTL

// IndexNames are the names of the table's global secondary indexes, in
// order (GSI1 to GSI4).
func IndexNames() []string {
	out := make([]string, len(indexes))
	for i, ix := range indexes {
		out[i] = ix.name
	}
	return out
}

// TableDefinition is the CreateTable request that Store.CreateTable sends
// for a table named table (with its stream): keys, attribute definitions,
// the four indexes and their projections, on-demand billing. CheckTable
// accepts a table created from it, by whatever tool, as long as it keeps
// the keys, indexes, projections and stream (billing mode, capacity,
// encryption and TTL settings are not checked).
func TableDefinition(table string) *dynamodb.CreateTableInput {
	return (&Store{table: table}).createTableInput()
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
