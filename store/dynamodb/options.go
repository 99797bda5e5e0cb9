package dynamodb

import (
	"fmt"
	"time"

	"github.com/tollgate-rl/tollgate/model"
)

// Options of the Store (docs/dynamodb.md 8).

// Option configures a Store. An invalid option value is a
// *model.ValidationError naming the option and the value, which New and
// Connect return.
type Option func(*Store)

// options are a Store's settings, as its Options leave them. New hands
// them to the parts that use them: the client (client.go), the write
// engine (engine.go) and the Admin.
type options struct {
	speculative     bool
	maxAttempts     int
	callTimeout     time.Duration // 0: no bound
	noStreams       bool
	bucketTTL       int64 // ms
	knownBuckets    int
	writesPerSecond int64 // the pressure limit; 0: no sharding
	maxShards       int   // a power of two, at most maxShards

	sleep sleepFunc // backoff between retries; tests count it

	// err is the first invalid option met; New returns it.
	err error
}

// defaultOptions are the settings of a Store given no Option.
func defaultOptions() options {
	return options{speculative: true, maxAttempts: DefaultMaxAttempts, callTimeout: DefaultCallTimeout,
		bucketTTL: DefaultBucketTTL.Milliseconds(), knownBuckets: DefaultKnownBuckets,
		writesPerSecond: 1000, maxShards: maxShards, sleep: sleepCtx}
}

// invalid records that option was given a bad value, keeping the first
// such error for New to return.
func (o *options) invalid(option string, value any, reason string) {
	if o.err == nil {
		o.err = model.Invalid("dynamodb option "+option, fmt.Sprint(value), reason)
	}
}

// WithSpeculative turns speculation on (the default) or off: with it, a
// write is planned from the item as this process last saw it (or, for an
// item not seen, assumed full), with no read. Off, every write reads the
// item first (1 read + 1 write), and a cascade is one transaction.
func WithSpeculative(on bool) Option { return func(s *Store) { s.opts.speculative = on } }

// DefaultMaxAttempts is the default of WithMaxAttempts.
const DefaultMaxAttempts = 16

// WithMaxAttempts bounds how often one operation is tried, in all, when it
// meets lost races, changed bucket layouts, transaction conflicts or
// throttled transactions (default DefaultMaxAttempts; at least 1). Retries
// after the first few lost races back off with jitter, so one operation
// sleeps at most 5+10+20+40+80+160 ms and then 200 ms per further attempt.
// Throttling and transport errors of single calls are retried by the SDK's
// retryer, configured in the aws.Config.
func WithMaxAttempts(n int) Option {
	return func(s *Store) {
		if n < 1 {
			s.opts.invalid("WithMaxAttempts", n, "must be at least 1")
			return
		}
		s.opts.maxAttempts = n
	}
}

// WithoutStreams makes Admin.CreateTable create the table without DynamoDB
// Streams. Only for tests of the backend alone: the aggregator needs the
// stream, and DynamoDB Local slows down with every stream record it keeps.
func WithoutStreams() Option { return func(s *Store) { s.opts.noStreams = true } }

// DefaultKnownBuckets is how many bucket items a Store remembers by default
// (see WithKnownBuckets).
const DefaultKnownBuckets = 100_000

// WithKnownBuckets bounds how many bucket items the Store remembers: the
// image of each item as its last write returned it, from which the next
// write is planned without a read (default DefaultKnownBuckets; each costs
// a few hundred bytes). Beyond it, idle items are forgotten at random; the
// next acquire of a forgotten item assumes it is full, which costs one
// write when it is (an idle entity) and two otherwise. n must be at least 1.
func WithKnownBuckets(n int) Option {
	return func(s *Store) {
		if n < 1 {
			s.opts.invalid("WithKnownBuckets", n, "must be at least 1")
			return
		}
		s.opts.knownBuckets = n
	}
}

// DefaultBucketTTL is how long a bucket item outlives the moment it is full
// again, by default.
const DefaultBucketTTL = time.Hour

// WithBucketTTL sets how long after refill has filled a bucket its items
// expire (default DefaultBucketTTL; DynamoDB deletes expired items within
// about two days). An expired bucket is a full one, so expiry never changes
// a verdict: it only frees storage. The next acquire of an expired bucket
// costs what the first acquire of a new one does. A negative d is invalid.
func WithBucketTTL(d time.Duration) Option {
	return func(s *Store) {
		if d < 0 {
			s.opts.invalid("WithBucketTTL", d, "must not be negative")
			return
		}
		s.opts.bucketTTL = d.Milliseconds()
	}
}

// WithWritePressureLimit sets how many writes per second one bucket item
// takes before its bucket is split (default 1,000, DynamoDB's per-partition
// write limit; the burst is one second's worth). 0 turns sharding off;
// a negative value is invalid.
func WithWritePressureLimit(perSecond int) Option {
	return func(s *Store) {
		if perSecond < 0 {
			s.opts.invalid("WithWritePressureLimit", perSecond, "must be 0 (no sharding) or more")
			return
		}
		s.opts.writesPerSecond = int64(perSecond)
	}
}

// WithMaxShards caps how far a bucket is split: a power of two from 2 to
// 64 (the default; a split of n shards is one transaction of 2n items, and
// a transaction holds at most 100). To turn sharding off, use
// WithWritePressureLimit(0).
func WithMaxShards(n int) Option {
	return func(s *Store) {
		if n < 2 || n > maxShards || n&(n-1) != 0 {
			s.opts.invalid("WithMaxShards", n, fmt.Sprintf("must be a power of two from 2 to %d", maxShards))
			return
		}
		s.opts.maxShards = n
	}
}

// DefaultCallTimeout is the default of WithCallTimeout.
const DefaultCallTimeout = time.Second

// WithCallTimeout bounds how long one DynamoDB API call that reads or
// writes items may take, the SDK's retries and backoffs included, and how
// long an acquire waits for this process's earlier writes to the same
// bucket (default DefaultCallTimeout). When it passes the call fails with
// an error wrapping ErrTimeout, which the limiter answers in its
// unavailable mode. 0 turns the bound off (the HTTP client's timeout and
// the SDK's attempts still bound a call); a negative value is invalid.
// The table's management (Admin) is not bounded by it.
//
// Set it above the store's slowest healthy answer (DynamoDB answers in
// milliseconds; a throttled call is retried by the SDK with backoffs of up
// to seconds, which the timeout cuts short) and below what the callers of
// the limiter wait for.
func WithCallTimeout(d time.Duration) Option {
	return func(s *Store) {
		if d < 0 {
			s.opts.invalid("WithCallTimeout", d, "must not be negative")
			return
		}
		s.opts.callTimeout = d
	}
}
