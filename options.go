package tollgate

import (
	"strconv"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// DefaultNamespace is the namespace a Limiter or an Admin works in unless
// told otherwise.
const DefaultNamespace = "default"

// Defaults of the options.
const (
	DefaultCacheTTL              = 60 * time.Second
	DefaultConcurrencyRetryAfter = 100 * time.Millisecond
	// DefaultLeaseTTL is how long a durable lease lives unless extended
	// (WithDefaultLeaseTTL, WithLeaseTTL, Lease.Extend): long enough
	// for most calls, short enough that a crashed holder's slots come back
	// within minutes.
	DefaultLeaseTTL = 5 * time.Minute
)

// Option configures a Limiter (New) or an Admin (NewAdmin). WithNamespace,
// WithClock, WithCacheTTL, WithRefreshInterval and WithChangeWatch apply
// to both; the others configure acquires, and an Admin ignores them.
type Option func(*options)

// options is what a constructor's options say.
type options struct {
	ns               string
	clock            clock.Clock
	cacheTTL         time.Duration
	cacheSize        int
	refreshInterval  time.Duration
	changes          *ChangeWatch
	concurrencyRetry time.Duration
	holder           string
	leaseTTL         time.Duration
	alertFn          func(Alert)
	abandonFn        func(Abandoned)
	denyMaxAge       time.Duration
	denySize         int
}

// WithNamespace makes the limiter or admin work in namespace ns (default
// "default"). The default namespace is created on first use; any other
// must be registered (Admin.RegisterNamespace), or calls fail with
// ErrNamespaceNotFound.
func WithNamespace(ns string) Option { return func(o *options) { o.ns = ns } }

// WithClock replaces the wall clock, for tests (see clock.Fake).
func WithClock(c clock.Clock) Option { return func(o *options) { o.clock = c } }

// WithCacheTTL sets how long stored limits, entities and the namespace's
// id are cached (default 60s) when no change is seen meanwhile (see
// WithRefreshInterval, ChangeWatch). Zero disables the cache.
func WithCacheTTL(d time.Duration) Option { return func(o *options) { o.cacheTTL = d } }

// WithCacheSize bounds how many limit resolutions and entities (negative
// results included) a limiter's config cache holds (default
// DefaultCacheSize, 100 000). When it is full, expired entries go first,
// then entries at random.
func WithCacheSize(n int) Option {
	return func(o *options) { o.cacheSize = n }
}

// WithRefreshInterval sets how often the change generation of a store
// shared with other processes is read (default DefaultRefreshInterval): a
// change of limits, entities or namespaces made by another process is in
// force here within about this long. A store only this process uses
// (memory, embedded) is read on every call. See ChangeWatch to share one
// watch among limiters and admins.
func WithRefreshInterval(d time.Duration) Option { return func(o *options) { o.refreshInterval = d } }

// WithChangeWatch makes the limiter or admin follow changes through w,
// shared with the other limiters and admins of the process over the same
// store, rather than through a watch of its own. An Admin's changes are
// then in force at once in every limiter sharing its watch, rather than
// after the next read of a shared store's generation.
func WithChangeWatch(w *ChangeWatch) Option { return func(o *options) { o.changes = w } }

// WithConcurrencyRetryAfter sets the RetryAfter of a concurrency limit in
// a refusal by concurrency or reserved limits alone when no holder's expiry
// says when a slot is due back (WaitsRelease; default 100ms). Time does not
// refill a concurrency limit, so this is a polling hint for callers; Wait
// looks again at most about once a second (SlotPoll) whatever it says,
// later only if the hint is longer.
func WithConcurrencyRetryAfter(d time.Duration) Option {
	return func(o *options) { o.concurrencyRetry = d }
}

// WithHolder sets who this limiter's durable lease records say acquired
// them (default: the host name and process id, as "host/pid"), for
// operators and the reconciler's audit events. At most 256 bytes.
func WithHolder(holder string) Option {
	return func(o *options) { o.holder = holder }
}

// WithDefaultLeaseTTL sets how long a durable lease lives unless the
// acquire says otherwise (WithLeaseTTL) or the holder extends it
// (default DefaultLeaseTTL); MinLeaseTTL to MaxLeaseTTL.
func WithDefaultLeaseTTL(d time.Duration) Option {
	return func(o *options) { o.leaseTTL = d }
}

// WithDenyCache makes the limiter answer from memory the acquires that a
// refusal of the store, at most maxAge ago, shows cannot be granted yet
// (docs/semantics.md, "Refusals from memory"). It is off unless this
// option is given with a positive maxAge; DefaultDenyCacheMaxAge (1s) is
// the usual choice.
//
// A refused acquire tells the limiter the state of its buckets; until
// refill alone could cover an amount, an acquire of it is refused without
// asking the store, with the statuses and retry-after the store would have
// given, and counted (Stats().Deny.Served). Only refusals come from
// memory, and only while time cannot have refilled enough: debits made
// elsewhere only delay a grant, so no acquire is refused that the store
// would grant, except after tokens were given back. Tokens given back
// through this limiter (a rollback, an adjustment down, a lease's end)
// and a reset by an Admin sharing its ChangeWatch are seen at once; a
// refund or reset made by another process or limiter can delay an
// admission here by at most maxAge (and never beyond the retry-after of
// the refusal remembered). Concurrency and reserved limits, whose tokens
// come back when a holder ends its lease, anywhere, at any moment, never
// refuse from memory, nor do limits in shadow; acquires with an
// idempotency key or a reservation always go to the store.
//
// It is off by default because it trades that bound for fewer store
// calls, which matters on DynamoDB, where each refusal of an exhausted
// bucket costs a consistent read (500 refusals, 500 calls; with the cache
// at most a few): turn it on for a limiter that faces clients who may
// keep asking once refused. A memory or embedded store answers a refusal
// from memory already, and gains little.
func WithDenyCache(maxAge time.Duration) Option { return func(o *options) { o.denyMaxAge = maxAge } }

// WithDenyCacheSize bounds how many buckets the deny cache (WithDenyCache)
// remembers (default DefaultDenyCacheSize, 10 000; positive): beyond it,
// expired entries go first, then entries at random.
func WithDenyCacheSize(n int) Option { return func(o *options) { o.denySize = n } }

// newOptions applies opts over the defaults and checks what both a
// Limiter and an Admin use; it makes the change watch unless one was
// given.
func newOptions(s store.Store, opts []Option) (*options, error) {
	if s == nil {
		return nil, model.Invalid("store", "nil", "a store is required")
	}
	o := &options{
		ns:               DefaultNamespace,
		clock:            clock.Real{},
		cacheTTL:         DefaultCacheTTL,
		cacheSize:        DefaultCacheSize,
		refreshInterval:  DefaultRefreshInterval,
		concurrencyRetry: DefaultConcurrencyRetryAfter,
		holder:           defaultHolder(),
		leaseTTL:         DefaultLeaseTTL,
		denySize:         DefaultDenyCacheSize,
	}
	for _, opt := range opts {
		opt(o)
	}
	switch {
	case model.ValidateNamespace(o.ns) != nil:
		return nil, model.ValidateNamespace(o.ns)
	case o.clock == nil:
		return nil, model.Invalid("clock", "nil", "a clock is required")
	case o.cacheTTL < 0:
		return nil, model.Invalid("cache_ttl", o.cacheTTL.String(), "must not be negative")
	}
	if o.changes == nil {
		w, err := NewChangeWatch(s, o.refreshInterval)
		if err != nil {
			return nil, err
		}
		o.changes = w
	}
	return o, nil
}

// checkAcquire checks the options that configure acquires.
func (o *options) checkAcquire() error {
	switch {
	case o.cacheSize <= 0:
		return model.Invalid("cache_size", strconv.Itoa(o.cacheSize), "must be positive")
	case o.concurrencyRetry <= 0:
		return model.Invalid("concurrency_retry_after", o.concurrencyRetry.String(), "must be positive")
	case o.denyMaxAge < 0:
		return model.Invalid("deny_cache_max_age", o.denyMaxAge.String(), "must not be negative")
	case o.denySize <= 0:
		return model.Invalid("deny_cache_size", strconv.Itoa(o.denySize), "must be positive")
	case len(o.holder) > model.MaxHolderLen:
		return model.Invalid("holder", o.holder, "longer than "+strconv.Itoa(model.MaxHolderLen)+" bytes")
	}
	return model.CheckLeaseTTL(o.leaseTTL)
}
