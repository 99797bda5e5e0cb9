package stream

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
)

// Option configures Read.
type Option func(*options)

type options struct {
	owner  string
	lease  time.Duration
	clock  clock.Clock
	upkeep *Upkeep
	log    *slog.Logger
	stats  *Stats

	// Tests only: keepLeases makes Read stop as a crash would, releasing
	// nothing; onRound is called after every round.
	keepLeases bool
	onRound    func()
}

// WithUpkeep makes Read hand every batch it has handled to u, which
// splits the buckets the batch shows hot (see Upkeep).
func WithUpkeep(u *Upkeep) Option { return func(o *options) { o.upkeep = u } }

// WithLogger sets where Read logs what the caller does not see
// otherwise: records lost to an aged-out checkpoint (error) and splits
// (info). Default: nowhere.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithStats makes Read count its work in st.
func WithStats(st *Stats) Option { return func(o *options) { o.stats = st } }

// Stats counts what Read did. It is safe for concurrent use.
type Stats struct {
	Records atomic.Int64 // stream records read
	// Trimmed counts shards read again from their oldest record because
	// their checkpoint had aged out of the stream: the records in between
	// were lost to usage.
	Trimmed atomic.Int64
	Split   atomic.Int64 // buckets split (WithUpkeep)
}

func newOptions(opts []Option) options {
	o := options{lease: DefaultShardLease, clock: clock.Real{}}
	for _, f := range opts {
		f(&o)
	}
	if o.owner == "" {
		o.owner = randomOwner() // 64 random bits: unique among the readers of a table
	}
	if o.lease <= 0 {
		o.lease = DefaultShardLease
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	if o.stats == nil {
		o.stats = new(Stats)
	}
	return o
}

// WithShardLeaseOwner names the reader in its shard lease items (default:
// a random id per Read call). Two readers with one name share its shard
// leases, so names must be unique among the readers of a table.
func WithShardLeaseOwner(id string) Option { return func(o *options) { o.owner = id } }

// WithShardLease sets how long a shard lease lasts without renewal
// (default DefaultShardLease); it is renewed every third of that. A
// crashed reader's shards wait that long for another reader; clocks of the
// readers must agree to well within it.
func WithShardLease(d time.Duration) Option { return func(o *options) { o.lease = d } }

// WithShardLeaseClock sets the clock that dates shard leases and paces
// their renewal (default: the wall clock).
func WithShardLeaseClock(c clock.Clock) Option { return func(o *options) { o.clock = c } }

// randomOwner returns 64 random bits in hex: a reader's default name.
func randomOwner() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
