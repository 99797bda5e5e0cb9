package securitytest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tollgate-rl/tollgate/internal/ddblocal"
	"github.com/tollgate-rl/tollgate/internal/redislocal"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
	"github.com/tollgate-rl/tollgate/store/embedded"
	"github.com/tollgate-rl/tollgate/store/memory"
	"github.com/tollgate-rl/tollgate/store/redis"
)

// endpoint is the DynamoDB Local of this test binary, and redisURL its
// redis-server, set by TestMain.
var endpoint, redisURL string

// runner is a test binary's Run as a function.
type runner func() int

func (r runner) Run() int { return r() }

func TestMain(m *testing.M) {
	os.Exit(ddblocal.Main(runner(func() int { return redislocal.Main(m, &redisURL) }), &endpoint))
}

// backend opens two handles on one fresh store, as two replicas over it
// would hold: the same store for the in-process backends, two clients of
// one table for DynamoDB, of one key prefix for Redis.
type backend struct {
	name string
	open func(t *testing.T) (a, b store.Store)
}

var backends = []backend{
	{"memory", func(t *testing.T) (store.Store, store.Store) {
		s := memory.New()
		return s, s
	}},
	{"embedded", func(t *testing.T) (store.Store, store.Store) {
		s, err := embedded.Open(filepath.Join(t.TempDir(), "t.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, s
	}},
	{"dynamodb", func(t *testing.T) (store.Store, store.Store) {
		if endpoint == "" {
			t.Skip(ddblocal.Help)
		}
		table := "tollgate-sec-" + randomHex(6)
		a, b := dynamoStore(t, table), dynamoStore(t, table)
		if err := a.Admin().CreateTable(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.Admin().DeleteTable(context.Background()) })
		return a, b
	}},
	{"redis", func(t *testing.T) (store.Store, store.Store) {
		if redisURL == "" {
			t.Skip(redislocal.Help)
		}
		prefix := "sec" + randomHex(6) // a deployment of its own on the shared server
		return redisStore(t, prefix), redisStore(t, prefix)
	}},
}

func redisStore(t *testing.T, prefix string) *redis.Store {
	t.Helper()
	s, err := redis.Open(context.Background(), redisURL, redis.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func dynamoStore(t *testing.T, table string) *dynamodb.Store {
	t.Helper()
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("tollgate", "local", ""),
		HTTPClient: dynamodb.NewHTTPClient()}
	s, err := dynamodb.New(cfg, table, []dynamodb.Option{dynamodb.WithoutStreams()},
		func(o *awsddb.Options) { o.BaseEndpoint = aws.String(endpoint) })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// forEachBackend runs probe once per backend, in parallel.
func forEachBackend(t *testing.T, probe func(t *testing.T, open func(t *testing.T) (a, b store.Store))) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			probe(t, b.open)
		})
	}
}

// forEachBackendAlone runs probe once per backend, one at a time, and
// never beside another test: for probes that measure the process.
func forEachBackendAlone(t *testing.T, probe func(t *testing.T, open func(t *testing.T) (a, b store.Store))) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { probe(t, b.open) })
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// serve serves h until the test ends.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}
