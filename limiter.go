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
// Limits are passed per call (WithLimits) or stored at four levels,
// resolved most specific first: entity+resource, entity default, resource,
// system.
//
// Two types split the work, as two planes (docs/architecture.md): a Limiter
// is the data plane, what a service calls on every request (acquire, wait,
// do, slot, reserve, release, penalize); an Admin is the control plane,
// what an operator or a tool calls (entities, stored limits, API keys,
// namespaces, audit, usage, capacity, listings, reset). Make both from one
// store and one option list; share a ChangeWatch between them so that the
// Admin's changes are in force in the Limiter at its next call:
//
//	st := memory.New()
//	w, _ := tollgate.NewChangeWatch(st, tollgate.DefaultRefreshInterval)
//	opts := []tollgate.Option{tollgate.WithChangeWatch(w)}
//	adm, _ := tollgate.NewAdmin(st, opts...)
//	lim, _ := tollgate.New(st, opts...)
//	adm.SetLimits(ctx, tollgate.ResourceScope("gpt-4o"), tollgate.Config{Limits: limits})
//
// The same two planes are the interfaces Acquirer and Administrator, which
// the Go client (package client) satisfies too.
package tollgate

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/internal/waitq"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// A Limiter enforces limits against a store. It is safe for concurrent use.
type Limiter struct {
	store store.Store
	ns    string
	clock clock.Clock
	cache *cache
	// deny remembers refusals (nil: WithDenyCache was not given).
	deny             *denyCache
	concurrencyRetry time.Duration
	// realClock is set when clock is clock.Real: acquires then read the
	// wall clock the cheap way (see leaseData.now).
	realClock bool

	nsCache atomic.Pointer[nsEntry]
	// changes tells the limiter when to drop its caches; seenGen is the
	// generation they were last dropped for (see observeChanges).
	changes *ChangeWatch
	seenGen atomic.Uint64
	// modeSeq numbers the Admin's note of the unavailable mode last
	// adopted (see ChangeWatch.changed).
	modeSeq atomic.Uint64
	// fail is what the limiter knows of the unavailable mode.
	fail failMode
	// shadow counts the decisions shadow limits would have denied.
	shadow shadowCounts
	// decisions counts decisions per resource and limit, topDenied the
	// entities refused most, alerts the thresholds crossed (alertFn).
	decisions decisionCounts
	topDenied topDenied
	alerts    alertTracker
	alertFn   func(Alert)
	// abandoning looks for the records of durable acquires of unknown
	// outcome (abandon.go).
	abandoning *abandonments

	leases sync.Pool // of *leaseData
	// stripes counts the lease states made, to give each a counter
	// stripe in turn (leaseData.stripe).
	stripes atomic.Uint32
	// waiting serves the callers of Wait in deadline order, one line per
	// entity and resource.
	waiting *waitq.Queue[*Lease]

	// holder names this process in durable lease records; leaseTTL is
	// their default lifetime.
	holder   string
	leaseTTL time.Duration
}

// New returns a Limiter over s.
func New(s store.Store, opts ...Option) (*Limiter, error) {
	o, err := newOptions(s, opts)
	if err != nil {
		return nil, err
	}
	if err := o.checkAcquire(); err != nil {
		return nil, err
	}
	l := &Limiter{
		store:            s,
		ns:               o.ns,
		clock:            o.clock,
		cache:            newCache(o.cacheTTL, o.cacheSize),
		concurrencyRetry: o.concurrencyRetry,
		holder:           o.holder,
		leaseTTL:         o.leaseTTL,
		changes:          o.changes,
		alertFn:          o.alertFn,
		abandoning:       newAbandonments(o.clock, o.abandonFn),
	}
	if o.denyMaxAge > 0 {
		l.deny = newDenyCache(o.denyMaxAge, o.denySize)
	}
	l.leases.New = func() any { return newLeaseData(l) }
	// A grant whose waiting caller left meanwhile is given back.
	l.waiting = waitq.New(l.clock, func(le *Lease) { _ = le.Rollback(context.Background()) })
	_, l.realClock = l.clock.(clock.Real)
	l.fail.ttl = o.cacheTTL
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

// Stats are a limiter's counters, for metrics.
type Stats struct {
	// Cache counts the config cache's entries, hits and misses.
	Cache CacheStats
	// Degraded counts the degraded leases granted because the store was
	// unavailable in Allow mode.
	Degraded uint64
	// Shadow counts, per resource and limit enforced in shadow, the
	// decisions it would have denied: at most MaxDecisionSeries pairs,
	// further ones under OtherSeries.
	Shadow []ShadowDenials
	// Decisions counts, per resource and limit, the decisions it took
	// part in, by outcome, and those near it.
	Decisions []LimitDecisions
	// TopDenied are the entities refused most, by resource and limit,
	// most refused first: TopDeniedSize entity, resource and limit
	// triples of all resources, followed since the limiter was made
	// (DeniedEntity.Error says how far a count may be over). A limit in
	// shadow refuses nobody. Filter them with the function TopDenied.
	TopDenied []DeniedEntity
	// Deny counts the refusals the deny cache served (WithDenyCache;
	// zero without it).
	Deny DenyCacheStats
	// Abandoned counts the durable acquires of unknown outcome the
	// limiter abandoned, by outcome (WithOnAbandon).
	Abandoned AbandonStats
}

// Stats returns the limiter's counters.
func (l *Limiter) Stats() Stats {
	return Stats{Cache: l.cacheStats(), Degraded: l.fail.degraded.Load(), Shadow: l.shadow.snapshot(),
		Decisions: l.decisions.snapshot(), TopDenied: l.topDenied.snapshot(),
		Deny: l.deny.stats(), Abandoned: l.abandoning.stats()}
}
