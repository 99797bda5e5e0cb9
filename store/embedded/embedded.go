// Package embedded is a durable Tollgate backend for one process: everything
// lives in one local file, managed by bbolt (go.etcd.io/bbolt).
//
// Configuration, entities, audit events, the namespace registry and usage
// snapshots (store.UsageStore) are written in one committed (fsynced) bbolt
// transaction before each call returns. Bucket state, the hot path, is kept
// in memory exactly as the memory backend keeps it (sharded, locked per
// shard, cascades locking their shards in index order) and written to the
// file by a background flush every interval (WithFlushInterval, 100ms by
// default) and by Close. Every flush is one bbolt transaction over a
// consistent cut of the buckets, so a crash can forget at most the bucket
// changes of the last interval and flush (an under-count of consumption),
// never leaves half of a cascade on disk, and never loses configuration,
// entities, audit events, namespaces or usage. docs/embedded.md describes
// the file layout, the contract and its measured cost.
//
// Only one process can open the file at a time: Open fails with ErrLocked
// after the lock timeout (WithLockTimeout, 1s by default).
//
// Open refuses a damaged file (an existing file of 0 bytes, one shorter
// than its last transaction wrote, one that fails the consistency check)
// with a *DamagedError rather than start empty or panic; Check runs the
// same check on demand.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/internal/buckettable"
)

// Defaults of the options.
const (
	// DefaultFlushInterval is how often bucket state is written to the file
	// unless WithFlushInterval says otherwise.
	DefaultFlushInterval = 100 * time.Millisecond
	// DefaultLockTimeout is how long Open waits for a file held by another
	// process unless WithLockTimeout says otherwise.
	DefaultLockTimeout = time.Second
)

// Errors returned by the store; match them with errors.Is.
var (
	// ErrClosed reports a call on a closed store.
	ErrClosed = errors.New("embedded: store closed")
	// ErrLocked reports that another process (or another Store in this
	// process) holds the file.
	ErrLocked = errors.New("embedded: file in use by another process")
)

// Store is the embedded backend. Create it with Open and release it with
// Close; it is safe for concurrent use.
type Store struct {
	db   *bolt.DB
	opts options

	// buckets holds bucket state, tracking changes for the flush (see
	// buckets.go).
	buckets *buckettable.Table

	// flushMu serialises flushes with the calls that delete buckets from
	// the file (DeleteEntity, PurgeNamespace), so that a flush never writes
	// back a bucket such a call has just deleted.
	flushMu sync.Mutex
	batch   flushBatch // reused by every flush; guarded by flushMu
	// unwritten holds the audit events of lease endings whose flush
	// failed, for the next flush to write; guarded by flushMu.
	unwritten []nsEvent

	// gen is the change generation (store.Changes): raised after every
	// committed change of configs, entities, keys or namespaces. The file
	// is locked by this process, so memory is enough: no other process
	// can change the control plane while it is open.
	gen atomic.Uint64

	closed atomic.Bool
	stop   chan struct{} // closed by Close to stop the flusher
	done   chan struct{} // closed by the flusher when it has stopped
}

var _ store.Store = (*Store)(nil)

// Option configures Open.
type Option func(*options)

type options struct {
	flushInterval time.Duration
	lockTimeout   time.Duration
	observer      func(FlushInfo)
	clock         clock.Clock
	skipCheck     bool // WithOpenCheck(false)
	// beforeCommit, set by this package's tests only, runs at the end of
	// every flush transaction; an error aborts the flush.
	beforeCommit func(tx *bolt.Tx) error
}

// WithFlushInterval sets how often bucket state is written to the file. A
// crash forgets at most the consumption of one interval plus the time one
// flush takes to commit. It must be positive.
func WithFlushInterval(d time.Duration) Option {
	return func(o *options) { o.flushInterval = d }
}

// WithLockTimeout sets how long Open waits for the file lock held by another
// process before it fails with ErrLocked. It must be positive.
func WithLockTimeout(d time.Duration) Option {
	return func(o *options) { o.lockTimeout = d }
}

// WithClock sets the clock that decides which usage snapshots have expired
// (store.UsageIncrement.Expires) and may be deleted; the system clock by
// default. Give the store the clock that dates the snapshots (the usage
// aggregator's), or a fake clock in the past makes them expire at once.
// Bucket state does not read it: every request carries its own time.
func WithClock(c clock.Clock) Option {
	return func(o *options) { o.clock = c }
}

// WithFlushObserver calls f after every flush that wrote or failed (in the
// background, from Flush, Backup and Close), for metrics and for reporting
// write errors: a failed flush keeps its changes in memory and retries them
// at the next one. f runs on the flushing goroutine and must not block or
// call the Store.
func WithFlushObserver(f func(FlushInfo)) Option {
	return func(o *options) { o.observer = f }
}

// FlushInfo describes one flush of bucket state to the file.
type FlushInfo struct {
	Written int // bucket records written
	Deleted int // idle bucket records deleted
	// Pause is how long the snapshot took: cascades waited at most this
	// long (single-bucket acquires wait only while it holds their shard).
	Pause    time.Duration
	Duration time.Duration // from the start of the snapshot to the end of the commit (fsync included)
	Err      error         // nil when the flush committed
}

// WithOpenCheck sets whether Open runs the full consistency check of an
// existing file (Check) before using it; it does by default. The check
// reads every page of the file: with the page cache warm, it adds about a
// fifth to Open for a file of 100,000 buckets, and doubles it for a file
// mostly of what Open does not load (85 MiB with 100,000 audit events);
// cold, it makes Open faster, reading the file sequentially first
// (docs/embedded.md, section 5). Without it, Open still refuses
// an empty or truncated file and one whose pages fail to load, but damage
// in pages it does not load (configuration, entities, audit, usage) shows
// only when they are read, and a damaged freelist can make writes damage
// more: run Check (tollgate store check) on demand instead.
func WithOpenCheck(full bool) Option {
	return func(o *options) { o.skipCheck = !full }
}

// newOptions applies opts to the defaults and checks them.
func newOptions(opts []Option) (options, error) {
	o := options{flushInterval: DefaultFlushInterval, lockTimeout: DefaultLockTimeout, clock: clock.Real{}}
	for _, f := range opts {
		f(&o)
	}
	if o.flushInterval <= 0 {
		return o, model.Invalid("flush_interval", o.flushInterval.String(), "must be positive")
	}
	if o.lockTimeout <= 0 {
		return o, model.Invalid("lock_timeout", o.lockTimeout.String(), "must be positive")
	}
	if o.clock == nil {
		return o, model.Invalid("clock", "nil", "must not be nil")
	}
	return o, nil
}

// Open opens or creates the store file at path. Only a path that does not
// exist is created: an existing file that is empty, truncated or fails the
// consistency check (see WithOpenCheck) is refused with a *DamagedError
// (errors.Is(err, ErrDamaged)), and nothing is written to it. The file is
// locked for this Store until Close; bucket state is loaded into memory.
func Open(path string, opts ...Option) (*Store, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	exists, err := inspect(path, o.lockTimeout)
	if err != nil {
		return nil, err
	}
	db, err := openBolt(path, &bolt.Options{Timeout: o.lockTimeout, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, openErr(path, o.lockTimeout, err)
	}
	// The flusher has not started and the file is locked: no transaction
	// writes while the check reads.
	if exists && !o.skipCheck {
		if err := fullCheck(db, path); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	s := &Store{db: db, opts: o, buckets: buckettable.New(buckettable.Options{Track: true}), stop: make(chan struct{}), done: make(chan struct{})}
	if err := guard(path, s.init); err != nil {
		_ = db.Close()
		if errors.Is(err, errCorrupt) {
			return nil, damaged(path, err.Error())
		}
		if !errors.Is(err, ErrDamaged) {
			err = fmt.Errorf("embedded: open %s: %w", path, err)
		}
		return nil, err
	}
	go s.flusher()
	return s, nil
}

// Close flushes bucket state, stops the background flusher and closes the
// file. Calls after Close fail with ErrClosed; closing again returns nil.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.buckets.Close()
	close(s.stop)
	<-s.done
	// Every bucket change checks the table's closed flag under its shard
	// lock, and the final snapshot visits every shard after the table was
	// closed: nothing can change after it.
	err := s.flush()
	return errors.Join(err, s.db.Close())
}

// Flush writes every bucket change made so far to the file and returns once
// it is committed.
func (s *Store) Flush(ctx context.Context) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.flush()
}

// check returns why a call must not run: a done ctx or a closed store.
func (s *Store) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

// mapErr turns bbolt's "not open" (Close ran during the call) into ErrClosed.
func (s *Store) mapErr(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}
