package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/internal/ddblocal"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// The stream's tests run against a DynamoDB Local of their own, as the
// backend's do (internal/ddblocal); these helpers are the backend tests'
// own, through the backend's exported API and the table's layout.

// endpoint is the DynamoDB Local of this test binary, set by TestMain.
var endpoint string

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m, &endpoint)) }

// localConfig is an aws.Config for DynamoDB Local. Every client of a test
// binary uses the same key and region, so they all see the same tables.
func localConfig() aws.Config {
	return aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("tollgate", "local", ""),
		HTTPClient:  dynamodb.NewHTTPClient(),
	}
}

func atLocal(o *ddb.Options) { o.BaseEndpoint = aws.String(endpoint) }

// mustNew is dynamodb.New for arguments a test knows to be valid.
func mustNew(t testing.TB, cfg aws.Config, table string, opts []dynamodb.Option, optFns ...func(*ddb.Options)) *dynamodb.Store {
	t.Helper()
	s, err := dynamodb.New(cfg, table, opts, optFns...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newTable creates a uniquely named table without a stream and returns a
// store on it.
func newTable(t testing.TB, opts ...dynamodb.Option) *dynamodb.Store {
	t.Helper()
	if endpoint == "" {
		t.Skip(ddblocal.Help)
	}
	s := mustNew(t, localConfig(), "tollgate-test-"+randomHex(6), append([]dynamodb.Option{dynamodb.WithoutStreams()}, opts...), atLocal)
	if err := s.Admin().CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Admin().DeleteTable(context.Background()) })
	return s
}

// newStreamTable is newTable with the stream the aggregator reads.
func newStreamTable(t *testing.T) *dynamodb.Store {
	t.Helper()
	if endpoint == "" {
		t.Skip("DynamoDB Local is not running")
	}
	s := mustNew(t, localConfig(), "tollgate-stream-"+randomHex(6), nil, atLocal)
	if err := s.Admin().CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Admin().DeleteTable(context.Background()) })
	return s
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// hotParams is a generous limit: 1,000 tokens, 100 a second.
var hotParams = bucket.Params{Capacity: 1_000_000, Amount: 100_000, Period: 1_000}

const hotEpoch = 1_700_000_000_000

// consumeReq is one request of amount of limit "rpm" at p on each of keys.
func consumeReq(now int64, p bucket.Params, amount int64, keys ...store.BucketKey) *store.ConsumeRequest {
	req := &store.ConsumeRequest{Now: now}
	for _, k := range keys {
		req.Buckets = append(req.Buckets, store.BucketRequest{Key: k, Limits: []store.LimitRequest{
			{Name: "rpm", Params: p, Check: true, Amount: amount},
		}})
	}
	return req
}

// mustConsume runs req through s and returns whether it was granted.
func mustConsume(t testing.TB, s store.Buckets, ns string, req *store.ConsumeRequest) bool {
	t.Helper()
	ok, err := s.Consume(context.Background(), ns, req)
	if err != nil {
		t.Fatalf("Consume: %v", err)
	}
	return ok
}

// getItem reads shard `shard` of bucket k consistently (nil: absent).
func getItem(t testing.TB, s *dynamodb.Store, ns string, k store.BucketKey, shard int) schema.Item {
	t.Helper()
	out, err := s.Client().GetItem(context.Background(), &ddb.GetItemInput{
		TableName: aws.String(s.Table()), ConsistentRead: aws.Bool(true),
		Key: schema.Item{schema.AttrPK: schema.Str(schema.BucketPK(ns, k, shard)), schema.AttrSK: schema.Str(schema.SKState)},
	})
	if err != nil {
		t.Fatalf("read %v shard %d: %v", k, shard, err)
	}
	return out.Item
}

// mustItem reads shard 0 of bucket k, failing if it is missing.
func mustItem(t testing.TB, s *dynamodb.Store, ns string, k store.BucketKey) schema.Item {
	t.Helper()
	it := getItem(t, s, ns, k, 0)
	if it == nil {
		t.Fatalf("read %v: missing", k)
	}
	return it
}

// shardItems reads the raw shard items of bucket k, 0 to the count shard 0
// names, failing on a missing one.
func shardItems(t testing.TB, s *dynamodb.Store, ns string, k store.BucketKey) []schema.Item {
	t.Helper()
	first := mustItem(t, s, ns, k)
	n := shardCount(first)
	its := []schema.Item{first}
	for i := 1; i < n; i++ {
		it := getItem(t, s, ns, k, i)
		if it == nil {
			t.Fatalf("shard %d of %d missing", i, n)
		}
		if got := shardCount(it); got != n {
			t.Errorf("shard %d says %d shards, shard 0 says %d", i, got, n)
		}
		its = append(its, it)
	}
	return its
}

// shardCount reads a bucket item's shard count (1 when absent).
func shardCount(it schema.Item) int {
	n, err := schema.GetN(it, schema.AttrShardCount)
	if err != nil || n < 1 {
		return 1
	}
	return int(n)
}
