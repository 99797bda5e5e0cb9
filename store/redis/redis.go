// Package redis is the Tollgate backend for Redis 7 and Valkey: many
// processes on many machines share one Redis server or Cluster (docs/redis.md).
//
// A bucket is one hash per namespace, entity and resource; each refilling
// limit is stored as a small excess over the instant it was last written
// (its anchor), from which its full tick follows (package bucket: the
// instant refill alone fills it, in ticks of the limit's own rate), and
// each concurrency limit as the millitokens in use. An acquire is one
// function call (FCALL; EVALSHA where functions are refused) that, for
// every limit of every bucket of the request, refills the excess to the
// bucket's time, compares it with the cover the process computed and adds
// the debit: the 128-bit arithmetic is done in Go by package bucket, and
// the script computes in doubles only while that is exact, in decimal
// limbs beyond (docs/redis.md proves each script). The acquires of one
// process on one bucket share a call, which reads and writes the bucket
// once.
//
// Every key of a namespace carries the namespace's id as its hash tag, so
// that on a Cluster a namespace lives in one hash slot and every script
// touches one slot: a cascade, a lease record written with its debit, an
// audit event written with its change are atomic as on a single server.
// Namespaces spread over the Cluster's nodes; one namespace's load is one
// node's (docs/redis.md, "Hash slots").
//
// The client is rueidis (github.com/redis/rueidis): RESP3, automatic
// pipelining of concurrent calls on shared connections, and Cluster
// support with slot routing; the Store never writes RESP itself.
package redis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/model"
)

// Store is the Redis backend: the store contract (store.Store) and the
// optional usage, bucket-listing and change-feed contracts.
type Store struct {
	c      rueidis.Client
	opts   options
	keys   layout
	lanes  *lanes
	closed func()
	// evalOnly is set when the server refuses functions (functions.go).
	evalOnly atomic.Bool
}

// options are a Store's settings (Option).
type options struct {
	prefix      string
	bucketTTL   int64 // ms
	callTimeout time.Duration
	err         error
}

// An Option configures a Store.
type Option func(*options)

// DefaultKeyPrefix begins every key the Store writes (WithKeyPrefix).
const DefaultKeyPrefix = "tg"

// DefaultBucketTTL is how long a bucket's hash outlives the moment every
// limit in it is full again, by default: a full bucket answers as a
// missing one, so its expiry frees memory and never changes a verdict.
const DefaultBucketTTL = time.Hour

// DefaultCallTimeout bounds one call to Redis by default (WithCallTimeout).
const DefaultCallTimeout = time.Second

// WithKeyPrefix sets what every key begins with (default "tg"), so that
// several deployments or other applications can share one Redis. It must be
// 1 to 32 bytes of letters, digits, '.', '_' or '-'.
func WithKeyPrefix(p string) Option {
	return func(o *options) {
		if p == "" || len(p) > 32 || strings.IndexFunc(p, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
		}) >= 0 {
			o.err = model.Invalid("key_prefix", p, "must be 1 to 32 letters, digits, '.', '_' or '-'")
			return
		}
		o.prefix = p
	}
}

// WithBucketTTL sets how long after every limit of a bucket is full again
// its hash expires (default DefaultBucketTTL). A bucket holding
// concurrency tokens never expires. A negative d is invalid.
func WithBucketTTL(d time.Duration) Option {
	return func(o *options) {
		if d < 0 {
			o.err = model.Invalid("bucket_ttl", d.String(), "must not be negative")
			return
		}
		o.bucketTTL = d.Milliseconds()
	}
}

// WithCallTimeout bounds how long one call to Redis may take (default
// DefaultCallTimeout); when it passes the call fails with an error the
// limiter answers in its unavailable mode. 0 turns the bound off; a
// negative value is invalid.
func WithCallTimeout(d time.Duration) Option {
	return func(o *options) {
		if d < 0 {
			o.err = model.Invalid("call_timeout", d.String(), "must not be negative")
			return
		}
		o.callTimeout = d
	}
}

// New returns a Store over client c, which the Store then owns: Close
// closes it.
func New(c rueidis.Client, opts ...Option) (*Store, error) {
	if c == nil {
		return nil, model.Invalid("client", "nil", "a Redis client is required")
	}
	o := options{prefix: DefaultKeyPrefix, bucketTTL: DefaultBucketTTL.Milliseconds(), callTimeout: DefaultCallTimeout}
	for _, f := range opts {
		f(&o)
	}
	if o.err != nil {
		return nil, o.err
	}
	return &Store{c: c, opts: o, keys: layout{prefix: o.prefix}, lanes: newLanes(), closed: c.Close}, nil
}

// Open connects to the Redis the URL names and returns a Store over it:
//
//	redis://[user:password@]host:port[/db]     one server (or a primary)
//	rediss://[user:password@]host:port[/db]    the same over TLS
//	redis+cluster://[user:password@]host:port[,host:port...]   a Cluster
//	rediss+cluster://...                       a Cluster over TLS
//
// A Cluster is found from any of its nodes; it has no database number.
// Over TLS the server's certificate is checked against the system's roots
// and the host name, or, with ?ca=/path/ca.pem, against the CAs of that
// PEM file (a private CA).
func Open(ctx context.Context, rawURL string, opts ...Option) (*Store, error) {
	co, err := ClientOption(rawURL)
	if err != nil {
		return nil, err
	}
	c, err := rueidis.NewClient(co)
	if err != nil {
		return nil, fmt.Errorf("redis: connect to %s: %w", redactURL(rawURL), err)
	}
	s, err := New(c, opts...)
	if err != nil {
		c.Close()
		return nil, err
	}
	if err := s.ping(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("redis: %s: %w", redactURL(rawURL), err)
	}
	return s, nil
}

// ClientOption parses a store URL (see Open) into the client's options.
func ClientOption(rawURL string) (rueidis.ClientOption, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rueidis.ClientOption{}, model.Invalid("store", redactURL(rawURL), "not a URL")
	}
	var co rueidis.ClientOption
	cluster := false
	switch u.Scheme {
	case "redis":
	case "rediss":
		co.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	case "redis+cluster":
		cluster = true
	case "rediss+cluster":
		cluster = true
		co.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	default:
		return co, model.Invalid("store", redactURL(rawURL), "the scheme must be redis, rediss, redis+cluster or rediss+cluster")
	}
	if err := applyQuery(&co, u, rawURL); err != nil {
		return co, err
	}
	if co.TLSConfig != nil && !cluster {
		// A Cluster's nodes are each checked against their own address,
		// which the TLS dialer takes as the name when none is set.
		co.TLSConfig.ServerName = u.Hostname()
	}
	if u.User != nil {
		co.Username = u.User.Username()
		co.Password, _ = u.User.Password()
		if co.Password == "" && co.Username != "" {
			// redis://:password@host and redis://password@host both
			// name a password alone (Redis before ACLs).
			co.Password, co.Username = co.Username, ""
		}
	}
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			continue
		}
		if !strings.Contains(h, ":") {
			h += ":6379"
		}
		co.InitAddress = append(co.InitAddress, h)
	}
	if len(co.InitAddress) == 0 {
		return co, model.Invalid("store", redactURL(rawURL), "no host")
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 {
			return co, model.Invalid("store", redactURL(rawURL), "the database must be a number")
		}
		if cluster {
			return co, model.Invalid("store", redactURL(rawURL), "a Cluster has no database number")
		}
		co.SelectDB = n
	}
	if !cluster {
		co.ForceSingleClient = true
		if len(co.InitAddress) > 1 {
			return co, model.Invalid("store", redactURL(rawURL), "one host, or redis+cluster:// for a Cluster")
		}
	}
	// The Store keeps nothing in the client's cache: every read must see
	// the server's value.
	co.DisableCache = true
	co.ClientName = "tollgate"
	return co, nil
}

// applyQuery reads the URL's parameters: only ca, the PEM file of the CAs
// that sign a TLS server's certificate.
func applyQuery(co *rueidis.ClientOption, u *url.URL, rawURL string) error {
	for k, v := range u.Query() {
		if k != "ca" || len(v) != 1 {
			return model.Invalid("store", redactURL(rawURL), fmt.Sprintf("unknown parameter %q (want ca, with rediss://)", k))
		}
		if co.TLSConfig == nil {
			return model.Invalid("store", redactURL(rawURL), "ca is for TLS: use rediss://")
		}
		pem, err := os.ReadFile(v[0])
		if err != nil {
			return fmt.Errorf("redis: the CA file of %s: %w", redactURL(rawURL), err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return model.Invalid("store", redactURL(rawURL), "ca "+v[0]+" holds no PEM certificate")
		}
		co.TLSConfig.RootCAs = pool
	}
	return nil
}

// redactURL returns rawURL without its password, for messages.
func redactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// Close closes the Store's client.
func (s *Store) Close() error {
	s.closed()
	return nil
}

// ping checks that the server answers and runs Lua scripts.
func (s *Store) ping(ctx context.Context) error {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	return s.c.Do(ctx, s.c.B().Ping().Build()).Error()
}

// callContext bounds one call by the call timeout.
func (s *Store) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.opts.callTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.opts.callTimeout)
}

// isNil reports whether err is Redis's nil answer (a missing key or field).
func isNil(err error) bool { return rueidis.IsRedisNil(err) }

// errNotFound is returned by helpers when a key is missing.
var errNotFound = errors.New("redis: not found")
