// Package stream is the DynamoDB backend's change feed: it reads the
// table's DynamoDB stream, turns the records of bucket items into
// store.Changes (what each write consumed, exactly once per record), and
// hands every batch to the stream's upkeep, which splits hot buckets ahead
// of their writers.
//
// It is a program of its own beside the backend (store/dynamodb): the
// backend writes the table, this package reads its stream, as `tollgate
// aggregator` (Read) or the AWS Lambda function cmd/tollgate-lambda
// (ChangeOf, Source, Upkeep, Heat) does. The two share the table's layout
// through store/dynamodb/internal/schema; the backend exports only what
// the consumer needs of it (Store.Client, Store.SplitDue, Store.Split,
// dynamodb.Image).
//
// Readers in several processes divide the stream's shards between them
// with shard leases kept in the table (shardlease.go). "Lease" in this
// package always means such a shard lease, never a rate-limiter lease.
//
// Files: read.go reads the stream (Read), checkpoint.go keeps each shard's
// position, shardlease.go divides the shards between readers, record.go
// turns a record into a change, heat.go and upkeep.go split hot buckets.
package stream
