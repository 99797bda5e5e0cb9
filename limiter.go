// Package tollgate is a distributed rate limiter and quota broker.
//
// A Limiter enforces token-bucket rate limits and concurrency limits for
// entities (API keys, projects, organisations) against state shared through a
// store: memory (package store/memory) for tests and single processes, and
// other backends for durable and multi-process use. Arithmetic is exact integer
// math on millitokens.
//
// The core call is Acquire: it checks and debits every limit of a request, for
// the entity and its cascade ancestors, all or nothing, and returns a Lease.
// Consumption is written before Acquire returns. The lease can be adjusted once
// the real cost is known (possibly into debt), then committed or rolled back:
//
//	lim, _ := tollgate.New(memory.New())
//	lease, err := lim.Acquire(ctx, "key-1", "gpt-4o", tollgate.Consume{"rpm": 1, "tpm": 500},
//		tollgate.WithLimits(tollgate.PerMinute("rpm", 100), tollgate.PerMinute("tpm", 10_000)))
//	var ex *tollgate.RateLimitExceeded
//	if errors.As(err, &ex) {
//		// denied: ex.RetryAfter, ex.Statuses
//	}
//	lease.Adjust(ctx, tollgate.Consume{"tpm": used - 500})
//	err = lease.Commit(ctx)
//
// Limits are passed per call (WithLimits) or stored at four levels (see
// SetConfig), resolved most specific first: entity+resource, entity default,
// resource, system.
package tollgate

import (
	"context"
	"crypto/rand"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/internal/waitq"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// DefaultNamespace is the namespace a Limiter uses unless told otherwise.
const DefaultNamespace = "default"

// Defaults of the limiter options.
const (
	DefaultCacheTTL              = 60 * time.Second
	DefaultConcurrencyRetryAfter = 100 * time.Millisecond
	// DefaultLeaseExpiry is how long a durable lease lives unless extended
	// (WithDefaultLeaseExpiry, WithLeaseExpiry, Lease.Extend): long enough
	// for most calls, short enough that a crashed holder's slots come back
	// within minutes.
	DefaultLeaseExpiry = 5 * time.Minute
)

// A Limiter enforces limits against a store. It is safe for concurrent use.
type Limiter struct {
	store            store.Store
	ns               string
	clock            clock.Clock
	cache            *cache
	concurrencyRetry time.Duration
	// realClock is set when clock is clock.Real: acquires then read the
	// wall clock the cheap way (see leaseData.now).
	realClock bool

	nsCache atomic.Pointer[nsEntry]
	// changes tells the limiter when to drop its caches; seenGen is the
	// generation they were last dropped for (see observeChanges).
	changes         *ChangeWatch
	seenGen         atomic.Uint64
	refreshInterval time.Duration
	// fail is what the limiter knows of the unavailable mode.
	fail failMode

	leases sync.Pool // of *leaseData
	// waiting serves the callers of Wait in deadline order, one line per
	// entity and resource.
	waiting *waitq.Queue[*Lease]

	// holder names this process in durable lease records; leaseExpiry is
	// their default lifetime.
	holder      string
	leaseExpiry time.Duration

	eventIDs eventIDs
}

// Option configures a Limiter.
type Option func(*Limiter)

// WithNamespace makes the limiter use namespace ns (default "default"). The
// default namespace is created on first use; any other must be registered
// (Registry.Register), or calls fail with ErrNamespaceNotFound.
func WithNamespace(ns string) Option { return func(l *Limiter) { l.ns = ns } }

// WithClock replaces the wall clock, for tests (see clock.Fake).
func WithClock(c clock.Clock) Option { return func(l *Limiter) { l.clock = c } }

// WithCacheTTL sets how long stored limits and entities are cached (default
// 60s). Changes made through this limiter invalidate the cache at once;
// changes made elsewhere are seen within the TTL. Zero disables the cache.
func WithCacheTTL(d time.Duration) Option { return func(l *Limiter) { l.cache.ttl = d } }

// WithCacheSize bounds how many limit resolutions and entities (negative
// results included) the config cache holds (default DefaultCacheSize, 100
// 000). When it is full, expired entries go first, then entries at random.
func WithCacheSize(n int) Option { return func(l *Limiter) { l.cache.size = n } }

// WithRefreshInterval sets how often the limiter reads the change
// generation of a store shared with other processes (default
// DefaultRefreshInterval): a change of limits, entities or namespaces
// made by another process is in force here within about this long. A
// store only this process uses (memory, embedded) is read on every call.
// See ChangeWatch to share one watch among several limiters.
func WithRefreshInterval(d time.Duration) Option { return func(l *Limiter) { l.refreshInterval = d } }

// WithChangeWatch makes the limiter follow changes through w, shared with
// other limiters of the process over the same store (a server's
// namespaces), rather than through a watch of its own.
func WithChangeWatch(w *ChangeWatch) Option { return func(l *Limiter) { l.changes = w } }

// WithConcurrencyRetryAfter sets the RetryAfter of a concurrency limit in
// a refusal by concurrency or reserved limits alone when no holder's expiry
// says when a slot is due back (WaitsRelease; default 100ms). Time does not
// refill a concurrency limit, so this is a polling hint for callers; Wait
// looks again at most about once a second (SlotPoll) whatever it says,
// later only if the hint is longer.
func WithConcurrencyRetryAfter(d time.Duration) Option {
	return func(l *Limiter) { l.concurrencyRetry = d }
}

// WithHolder sets who this limiter's durable lease records say acquired
// them (default: the host name and process id, as "host/pid"), for
// operators and the reconciler's audit events. At most 256 bytes.
func WithHolder(holder string) Option { return func(l *Limiter) { l.holder = holder } }

// WithDefaultLeaseExpiry sets how long a durable lease lives unless the
// acquire says otherwise (WithLeaseExpiry) or the holder extends it
// (default DefaultLeaseExpiry); MinLeaseExpiry to MaxLeaseExpiry.
func WithDefaultLeaseExpiry(d time.Duration) Option { return func(l *Limiter) { l.leaseExpiry = d } }

// New returns a Limiter over s.
func New(s store.Store, opts ...Option) (*Limiter, error) {
	if s == nil {
		return nil, model.Invalid("store", "nil", "a store is required")
	}
	l := &Limiter{
		store:            s,
		ns:               DefaultNamespace,
		clock:            clock.Real{},
		cache:            newCache(),
		concurrencyRetry: DefaultConcurrencyRetryAfter,
		holder:           defaultHolder(),
		leaseExpiry:      DefaultLeaseExpiry,
		refreshInterval:  DefaultRefreshInterval,
	}
	for _, o := range opts {
		o(l)
	}
	l.leases.New = func() any { return newLeaseData(l) }
	// A grant whose waiting caller left meanwhile is given back.
	l.waiting = waitq.New(l.clock, func(le *Lease) { _ = le.Rollback(context.Background()) })
	_, l.realClock = l.clock.(clock.Real)
	switch {
	case model.ValidateNamespace(l.ns) != nil:
		return nil, model.ValidateNamespace(l.ns)
	case l.cache.ttl < 0:
		return nil, model.Invalid("cache_ttl", l.cache.ttl.String(), "must not be negative")
	case l.cache.size <= 0:
		return nil, model.Invalid("cache_size", strconv.Itoa(l.cache.size), "must be positive")
	case l.concurrencyRetry <= 0:
		return nil, model.Invalid("concurrency_retry_after", l.concurrencyRetry.String(), "must be positive")
	case len(l.holder) > model.MaxHolderLen:
		return nil, model.Invalid("holder", l.holder, "longer than "+strconv.Itoa(model.MaxHolderLen)+" bytes")
	}
	if err := model.CheckLeaseExpiry(l.leaseExpiry); err != nil {
		return nil, err
	}
	if l.changes == nil {
		w, err := NewChangeWatch(s, l.refreshInterval)
		if err != nil {
			return nil, err
		}
		l.changes = w
	}
	l.cache.init()
	l.fail.ttl = l.cache.ttl
	return l, nil
}

// defaultHolder names this process: its host and process id, cut to
// model.MaxHolderLen bytes (a host name may take 255).
func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	h := host + "/" + strconv.Itoa(os.Getpid())
	if len(h) > model.MaxHolderLen {
		h = h[len(h)-model.MaxHolderLen:] // keep the pid, which tells processes of one host apart
	}
	return h
}

// Namespace returns the namespace the limiter works in.
func (l *Limiter) Namespace() string { return l.ns }

// newEventID returns a sortable id (a ULID) for an audit event at t.
func (l *Limiter) newEventID(t time.Time) string { return l.eventIDs.next(t) }

// eventIDs makes the sortable ids (ULIDs) of audit events. The zero value
// is ready for use.
type eventIDs struct {
	mu      sync.Mutex
	entropy io.Reader
}

// next returns a new id for an event at t, greater than the previous one
// of the same millisecond.
func (e *eventIDs) next(t time.Time) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.entropy == nil {
		e.entropy = ulid.Monotonic(rand.Reader, 0)
	}
	id, err := ulid.New(ulid.Timestamp(t), e.entropy)
	if err != nil {
		// The monotonic entropy ran out within one millisecond (2^80 ids);
		// fall back to fresh randomness, which still sorts by time.
		id = ulid.MustNew(ulid.Timestamp(t), rand.Reader)
	}
	return id.String()
}
