package dynamodb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tollgate-rl/tollgate/internal/ddblocal"
	"github.com/tollgate-rl/tollgate/limitertest"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/storetest"
)

// endpoint is the DynamoDB Local of this test binary, set by TestMain.
var endpoint string

func TestMain(m *testing.M) {
	if os.Getenv(mpWorkerEnv) != "" {
		os.Exit(runWorker())
	}
	if os.Getenv(reclaimRoleEnv) != "" {
		os.Exit(runReclaimWorker())
	}
	os.Exit(ddblocal.Main(m, &endpoint))
}

// localConfig is an aws.Config for DynamoDB Local. Every client of a test
// binary uses the same key and region, so they all see the same tables.
func localConfig(opts ...func(*aws.Config)) aws.Config {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("tollgate", "local", ""),
		HTTPClient:  NewHTTPClient(),
	}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

func atLocal(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) }

// testCallTimeout is the call timeout of this package's tests, but for
// those of the call timeout itself (timeout_test.go), which set their own:
// DynamoDB Local on a loaded 2-core machine answers some calls of the
// heaviest tests (48 goroutines in 3 processes on one sharded bucket,
// transactions of the conformance suite's concurrency cases) after more
// than the default second.
const testCallTimeout = 30 * time.Second

// mustNew is New for arguments a test knows to be valid, with the tests'
// call timeout unless opts set one.
func mustNew(t testing.TB, cfg aws.Config, table string, opts []Option, optFns ...func(*dynamodb.Options)) *Store {
	t.Helper()
	s, err := New(cfg, table, append([]Option{WithCallTimeout(testCallTimeout)}, opts...), optFns...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newTable creates a uniquely named table and returns a store on it.
func newTable(t testing.TB, opts ...Option) *Store {
	t.Helper()
	if endpoint == "" {
		t.Skip(ddblocal.Help)
	}
	s := mustNew(t, localConfig(), "tollgate-test-"+randomHex(6), append([]Option{WithoutStreams()}, opts...), atLocal, func(o *dynamodb.Options) {
		if os.Getenv("TOLLGATE_TEST_NO_SDK_RETRY") != "" {
			o.RetryMaxAttempts = 1
		}
	})
	ctx := context.Background()
	if err := s.Admin().CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Admin().DeleteTable(context.Background()) })
	return s
}

// eng is the store's write engine, for the tests of its machinery.
func (s *Store) eng() *engine { return s.engine.(*engine) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func TestConformance(t *testing.T) {
	s := newTable(t)
	storetest.Run(t, func(t *testing.T) store.Store { return s })
}

func TestLimiterConformance(t *testing.T) {
	s := newTable(t)
	limitertest.Run(t, func(t *testing.T) store.Store { return s })
}

// Without speculation every write takes the read path; its concurrency
// cases are covered by the main run (whose speculative writes fall back to
// the same path), and would only repeat its slowest minute.
func TestConformanceWithoutSpeculation(t *testing.T) {
	s := newTable(t, WithSpeculative(false))
	storetest.Run(t, func(t *testing.T) store.Store { return s },
		storetest.Groups("Buckets", "Configs", "Entities", "Audit", "Namespaces", "Cascade"))
}

// The limiter's suite without speculation, as TestConformanceWithoutSpeculation.
func TestLimiterConformanceWithoutSpeculation(t *testing.T) {
	s := newTable(t, WithSpeculative(false))
	limitertest.Run(t, func(t *testing.T) store.Store { return s },
		limitertest.Groups("Limiter", "Namespaces", "Cascade"))
}
