// Package dynamodb is the production Tollgate backend: many processes on many
// machines share one DynamoDB table (single-table design, docs/dynamodb.md).
//
// A bucket is one item per entity, resource and shard holding every limit;
// a refilling limit is stored as the instant it is full again (its full
// tick), so that a debit is one addition whose condition compares that
// instant with constants. An acquire is one conditional UpdateItem planned
// from the item as this process last saw it, with no read; a failed
// condition returns the item in the same call, from which the backend
// either refuses at once or writes again. The acquires of one process on
// one item go out together, one write at a time. Cascades write their
// buckets in parallel and give back a partial debit. Adjustments and
// returns are unconditional ADDs.
//
// The Store is the store contract. Every write of a bucket item, and what
// this process remembers of the items, is its write engine's (engine.go);
// the table's administration is an Admin's (Store.Admin); the facts of
// the table's layout that deployment tools need are package functions
// (layout.go).
//
// The table's stream is read by package stream (store/dynamodb/stream),
// a program of its own: usage from the stream, and the upkeep that splits
// hot buckets ahead of their writers through Split. The table's layout,
// which both read, is internal/schema's.
package dynamodb

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Store is the DynamoDB backend. It is safe for concurrent use.
//
// Its methods are the store contract, and what the stream reader needs of
// the same table (Client, Table, Split, SplitDue). Every write of a bucket
// item is its engine's (engine.go), which it reaches through bucketEngine
// alone; the table's administration is Admin's.
type Store struct {
	*client // the table, shared with the engine and the Admin
	opts    options
	engine  bucketEngine
}

var (
	_ store.Store        = (*Store)(nil)
	_ store.ChangeFeeder = (*Store)(nil)
)

// New returns a Store using table through a client made from cfg (region,
// credentials, endpoint, HTTP client and middleware come from cfg and
// optFns). It makes no call to DynamoDB: call Admin().CreateTable or
// Admin().CheckTable before use. An empty table name or an invalid option
// is a *model.ValidationError naming it.
func New(cfg aws.Config, table string, opts []Option, optFns ...func(*dynamodb.Options)) (*Store, error) {
	if table == "" {
		return nil, model.Invalid("dynamodb table", "", "a table name is required")
	}
	s := &Store{opts: defaultOptions()}
	for _, o := range opts {
		o(s)
	}
	if s.opts.err != nil {
		return nil, s.opts.err
	}
	optFns = append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		// DynamoDB Local omits the CRC32 header on error responses; the
		// transport's own integrity checks are enough.
		o.DisableValidateResponseChecksum = true
	}, s.boundCalls}, optFns...)
	s.client = &client{db: dynamodb.NewFromConfig(cfg, optFns...), table: table,
		maxAttempts: s.opts.maxAttempts, sleep: s.opts.sleep}
	s.engine = newEngine(s.client, &s.opts)
	return s, nil
}

// ConnectConfig names a table and how to reach it.
type ConnectConfig struct {
	Table    string
	Region   string // default: from the AWS configuration chain
	Endpoint string // e.g. http://127.0.0.1:8000 for DynamoDB Local; empty for AWS
}

// Connect loads the standard AWS configuration (environment, shared files,
// instance roles), applies c, and returns a Store. It does not touch the
// table; call Admin().CheckTable (or CreateTable).
//
// An Endpoint on this machine (a loopback address: 127.0.0.0/8, ::1 or
// localhost; DynamoDB Local, say) needs no AWS account: when the
// configuration names no credentials, Connect uses static local ones
// (access key "local", secret "local") rather than the chain's last resort,
// the EC2 instance metadata service, which off EC2 answers nothing after
// seconds of retries; and when it names no region, us-east-1. It decides
// without a network call, from what the chain found: credentials in the
// environment, a profile of the shared files (keys, SSO, a role, a
// process), web identity or a container endpoint are kept, so that a proxy
// on the loopback address can still sign with real ones.
func Connect(ctx context.Context, c ConnectConfig, opts ...Option) (*Store, error) {
	if c.Table == "" {
		return nil, model.Invalid("dynamodb table", "", "a table name is required")
	}
	loadOpts := []func(*awsconfig.LoadOptions) error{
		// A buildable client, so that the configuration chain can still
		// apply a custom CA bundle (AWS_CA_BUNDLE) to it.
		awsconfig.WithHTTPClient(awshttp.NewBuildableClient().
			WithTransportOptions(tuneTransport).WithTimeout(httpTimeout)),
	}
	if c.Region != "" {
		loadOpts = append(loadOpts, awsconfig.WithRegion(c.Region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("dynamodb: load AWS configuration: %w", err)
	}
	var optFns []func(*dynamodb.Options)
	if c.Endpoint != "" {
		optFns = append(optFns, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(c.Endpoint) })
		if isLoopback(c.Endpoint) {
			localDefaults(&cfg)
		}
	}
	return New(cfg, c.Table, opts, optFns...)
}

// The credentials and region Connect uses for an endpoint on this machine
// when the configuration names none. DynamoDB Local keeps the tables of
// each access key and region apart (unless started with -sharedDb): these
// are the ones the CLI has always used, so that its tables stay in view.
const (
	localAccessKey = "local"
	localSecretKey = "local"
	localRegion    = "us-east-1"
)

// localDefaults gives cfg the local credentials if the configuration chain
// fell through to the instance metadata service, and the local region if
// it found none.
func localDefaults(cfg *aws.Config) {
	if cfg.Credentials == nil || aws.IsCredentialsProvider(cfg.Credentials, (*ec2rolecreds.Provider)(nil)) {
		cfg.Credentials = credentials.NewStaticCredentialsProvider(localAccessKey, localSecretKey, "")
	}
	if cfg.Region == "" {
		cfg.Region = localRegion
	}
}

// isLoopback reports whether endpoint's host is a loopback address or
// localhost.
func isLoopback(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// NewHTTPClient returns an HTTP client suited to many concurrent DynamoDB
// calls: the default transport keeps too few idle connections per host.
func NewHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	tuneTransport(t)
	return &http.Client{Transport: t, Timeout: httpTimeout}
}

// httpTimeout bounds one HTTP attempt; the SDK's retryer bounds the
// attempts, and the call timeout (WithCallTimeout, shorter by default) the
// call.
const httpTimeout = 10 * time.Second

func tuneTransport(t *http.Transport) {
	t.MaxIdleConns = 512
	t.MaxIdleConnsPerHost = 512
	t.IdleConnTimeout = 90 * time.Second
}

// Table returns the table name.
func (s *Store) Table() string { return s.table }

// Client returns the DynamoDB client the store uses. The stream consumer
// (package stream) keeps its checkpoint and lease items in the store's
// table through it, and reaches DynamoDB Streams with its endpoint, region
// and credentials.
func (s *Store) Client() *dynamodb.Client { return s.db }

// FeedsChanges reports true (store.ChangeFeeder): every write of the store
// reaches its table's stream, which package stream (`tollgate aggregator`,
// or the Lambda function) turns into usage, so a process writing the table
// records none itself. A table made WithoutStreams (tests) has no stream,
// and its usage is recorded by nothing.
func (s *Store) FeedsChanges() bool { return true }
