package faultsuite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/internal/ddblocal"
	"github.com/tollgate-rl/tollgate/internal/faultproxy"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
)

// endpoint is the DynamoDB Local of this test binary, set by TestMain.
var endpoint string

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m, &endpoint)) }

// scene is a table on DynamoDB Local, a fault proxy in front of it, the
// store under test that reaches the table through the proxy (with the
// default call timeout), and a limiter that reaches it directly, for the
// checks.
type scene struct {
	proxy  *faultproxy.Proxy
	store  *dynamodb.Store   // through the proxy
	direct *tollgate.Limiter // not through it
}

func newScene(t *testing.T) *scene {
	t.Helper()
	if endpoint == "" {
		t.Skip(ddblocal.Help)
	}
	table := "tollgate-faults-" + randomHex(6)
	// The table's creation and the checks are no part of the test: DynamoDB
	// Local, cold, takes more than a second over some of their calls.
	admin := dynamoStore(t, endpoint, table, dynamodb.WithCallTimeout(30*time.Second))
	ctx := context.Background()
	if err := admin.Admin().CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Admin().DeleteTable(context.Background()) })
	p, err := faultproxy.Start(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	direct, err := tollgate.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	s := &scene{proxy: p, store: dynamoStore(t, p.URL(), table), direct: direct}
	if got := s.store.CallTimeout(); got != callTimeout {
		t.Fatalf("the store's call timeout is %v: the suite's bounds assume %v", got, callTimeout)
	}
	return s
}

// dynamoStore is a store on table at url, as tollgate serve makes one but
// for the credentials (DynamoDB Local takes any), without streams.
func dynamoStore(t *testing.T, url, table string, opts ...dynamodb.Option) *dynamodb.Store {
	t.Helper()
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("tollgate", "local", ""),
		HTTPClient: dynamodb.NewHTTPClient()}
	s, err := dynamodb.New(cfg, table, append([]dynamodb.Option{dynamodb.WithoutStreams()}, opts...),
		func(o *awsddb.Options) { o.BaseEndpoint = aws.String(url) })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// available returns the tokens of k's bucket, read directly.
func (s *scene) available(t *testing.T) func(bucketKey) int64 {
	return func(k bucketKey) int64 {
		st, err := s.direct.Available(context.Background(), k.entity, resource, tollgate.WithLimits(k.limit))
		if err != nil || len(st) != 1 {
			t.Fatalf("Available %s: %v, %v", k.entity, st, err)
		}
		return st[0].Available
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
