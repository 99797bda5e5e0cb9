// Package reconcile gives back what expired leases hold.
//
// A durable lease (store.Leases) holds concurrency tokens or reservations
// until its holder ends it. A holder that crashes, hangs or forgets never
// does; once the lease's expiry has passed, a Reconciler ends it in its
// place: it commits the lease (its rate consumption stays, as the call
// probably ran; its concurrency tokens come back), deletes its record and
// writes an audit event (model.ActionLeaseExpired), all in one atomic step
// of the store. The step is conditioned on the record, so a lease is
// reclaimed once however many reconcilers run (one per server replica, a
// Lambda, the library's goroutine) and whatever its holder does meanwhile.
//
// A pass also sweeps the audit log of each namespace with an audit
// retention (WithAuditSweep): the events older than it are deleted.
//
// tollgate serve, tollgate reconcile, tollgate aggregator and the Lambda run
// one; a program using the library without a server starts its own:
//
//	r, _ := reconcile.New(st)
//	go r.Run(ctx)
package reconcile

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Store is what a Reconciler needs of a store.
type Store interface {
	ListNamespaces(ctx context.Context) ([]model.Namespace, error)
	ListLeases(ctx context.Context, ns string, q store.LeaseQuery) ([]store.LeaseRecord, string, error)
	EndLease(ctx context.Context, ns string, e store.LeaseEnding) error
}

// Defaults of the options.
const (
	DefaultInterval  = 5 * time.Second
	DefaultPrincipal = "reconciler"
	// pageSize is how many expired records one ListLeases returns.
	pageSize = 100
	// DefaultAuditSweep is how often a Reconciler sweeps a namespace's
	// audit events past its retention (WithAuditSweep).
	DefaultAuditSweep = time.Minute
	// sweepBatch is how many events one SweepAudit deletes, and
	// maxSweepBatches how many a pass runs per namespace at most (the
	// rest waits for the next sweep).
	sweepBatch      = 500
	maxSweepBatches = 20
)

// A Reconciler ends expired leases. It is safe for concurrent use; several
// may run over one store.
type Reconciler struct {
	store      Store
	clock      clock.Clock
	interval   time.Duration
	namespaces []string
	principal  string
	log        *slog.Logger
	onReclaim  func(Reclaimed)
	sweepEvery time.Duration

	// swept is when each namespace (by id) was last swept.
	sweptMu sync.Mutex
	swept   map[string]time.Time

	reclaimed, skipped, failed, sweptEvents atomic.Uint64

	// unsure holds the endings whose outcome is not known yet (see
	// settle), at most maxUnsure.
	mu     sync.Mutex
	unsure []ending
}

// ending is one lease ending whose outcome is not known: its store step
// failed without saying whether it was applied.
type ending struct {
	ns  model.Namespace
	rec store.LeaseRecord
	ev  model.AuditEvent
	at  time.Time
}

// maxUnsure bounds the endings of unknown outcome a Reconciler keeps to
// settle; beyond it the oldest are forgotten (counted failed only).
const maxUnsure = 1024

// Reclaimed describes one lease a Reconciler ended.
type Reclaimed struct {
	Namespace string // the namespace's name
	Lease     store.LeaseRecord
	At        time.Time
}

// Option configures a Reconciler.
type Option func(*Reconciler)

// WithClock sets the clock that decides which leases have expired (default
// the wall clock); tests use clock.Fake.
func WithClock(c clock.Clock) Option { return func(r *Reconciler) { r.clock = c } }

// WithInterval sets how long Run waits between passes (default
// DefaultInterval, each wait jittered by up to a tenth so that reconcilers
// started together drift apart). A lease is reclaimed within its expiry
// plus about one interval.
func WithInterval(d time.Duration) Option { return func(r *Reconciler) { r.interval = d } }

// WithNamespaces limits the Reconciler to the named namespaces (default:
// every namespace of the store that is not deleted).
func WithNamespaces(names ...string) Option {
	return func(r *Reconciler) { r.namespaces = names }
}

// WithPrincipal sets the principal of the audit events (default
// DefaultPrincipal).
func WithPrincipal(p string) Option { return func(r *Reconciler) { r.principal = p } }

// WithLogger sets the logger of passes that fail (default: slog's default).
func WithLogger(l *slog.Logger) Option { return func(r *Reconciler) { r.log = l } }

// WithOnReclaim calls f for every lease the Reconciler ends (a metric, a
// log line); f must not block.
func WithOnReclaim(f func(Reclaimed)) Option { return func(r *Reconciler) { r.onReclaim = f } }

// WithAuditSweep sets how often a pass sweeps a namespace whose audit
// retention is set (model.Namespace.AuditRetention): it deletes, in
// batches, the events older than the retention (the library already hides
// them), through store.AuditLog where the store implements it. Default
// DefaultAuditSweep; a negative d never sweeps, 0 sweeps at every pass.
func WithAuditSweep(d time.Duration) Option { return func(r *Reconciler) { r.sweepEvery = d } }

// New returns a Reconciler over s.
func New(s Store, opts ...Option) (*Reconciler, error) {
	if s == nil {
		return nil, model.Invalid("store", "nil", "a store is required")
	}
	r := &Reconciler{store: s, clock: clock.Real{}, interval: DefaultInterval, principal: DefaultPrincipal, log: slog.Default(),
		sweepEvery: DefaultAuditSweep, swept: map[string]time.Time{}}
	for _, o := range opts {
		o(r)
	}
	switch {
	case r.interval <= 0:
		return nil, model.Invalid("interval", r.interval.String(), "must be positive")
	case len(r.principal) > model.MaxPrincipalLen:
		return nil, model.Invalid("principal", r.principal, "longer than "+strconv.Itoa(model.MaxPrincipalLen)+" bytes")
	}
	for _, n := range r.namespaces {
		if err := model.ValidateNamespace(n); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Stats counts what a Reconciler has done since it was made.
type Stats struct {
	// Reclaimed counts leases it ended.
	Reclaimed uint64
	// Skipped counts expired leases another ender (a reconciler, the
	// holder) ended or changed first.
	Skipped uint64
	// Failed counts endings and listings the store failed.
	Failed uint64
	// Swept counts audit events deleted past their namespace's retention.
	Swept uint64
}

// Stats returns the counts so far.
func (r *Reconciler) Stats() Stats {
	return Stats{Reclaimed: r.reclaimed.Load(), Skipped: r.skipped.Load(), Failed: r.failed.Load(), Swept: r.sweptEvents.Load()}
}

// Run makes a pass every interval until ctx ends, and returns ctx's error.
// A pass that fails is logged and counted; the next one tries again.
func (r *Reconciler) Run(ctx context.Context) error {
	for {
		if _, err := r.Once(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("reconcile: pass failed", "err", err)
		}
		jitter := time.Duration(rand.Int64N(int64(r.interval)/10 + 1))
		if err := clock.Sleep(ctx, r.clock, r.interval-jitter); err != nil {
			return err
		}
	}
}

// Once makes one pass: it ends every lease expired by now in each
// namespace, and returns how many it ended. Errors of single endings are
// counted and joined; the pass goes on past them.
func (r *Reconciler) Once(ctx context.Context) (int, error) {
	r.settleUnsure(ctx)
	nss, err := r.targets(ctx)
	if err != nil {
		r.failed.Add(1)
		return 0, err
	}
	n := 0
	var errs []error
	for _, ns := range nss {
		k, err := r.namespace(ctx, ns)
		n += k
		if err != nil {
			errs = append(errs, err)
		}
		if err := r.sweep(ctx, ns); err != nil {
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return n, errors.Join(errs...)
}

// targets returns the live namespaces of the pass.
func (r *Reconciler) targets(ctx context.Context) ([]model.Namespace, error) {
	all, err := r.store.ListNamespaces(ctx)
	if err != nil {
		return nil, fmt.Errorf("reconcile: list namespaces: %w", err)
	}
	var out []model.Namespace
	for _, n := range all {
		if n.Deleted() || r.namespaces != nil && !contains(r.namespaces, n.Name) {
			continue
		}
		out = append(out, n)
	}
	return out, nil
}

func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// namespace ends the leases of ns expired by the pass's time.
func (r *Reconciler) namespace(ctx context.Context, ns model.Namespace) (int, error) {
	now := r.clock.Now()
	q := store.LeaseQuery{ExpiredBy: now.UnixMilli(), Limit: pageSize}
	n := 0
	var errs []error
	for {
		recs, next, err := r.store.ListLeases(ctx, ns.ID, q)
		if err != nil {
			r.failed.Add(1)
			return n, errors.Join(append(errs, fmt.Errorf("reconcile: namespace %q: list leases: %w", ns.Name, err))...)
		}
		for i := range recs {
			switch err := r.end(ctx, ns, &recs[i], now); {
			case err == nil:
				n++
			case errors.Is(err, model.ErrLeaseNotFound), errors.Is(err, model.ErrLeaseConflict):
				r.skipped.Add(1)
			default:
				r.failed.Add(1)
				errs = append(errs, fmt.Errorf("reconcile: namespace %q: lease %s: %w", ns.Name, recs[i].ID, err))
			}
		}
		if next == "" || ctx.Err() != nil {
			return n, errors.Join(errs...)
		}
		q.After = next
	}
}

// end ends one expired lease with its audit event.
func (r *Reconciler) end(ctx context.Context, ns model.Namespace, rec *store.LeaseRecord, now time.Time) error {
	ev := model.AuditEvent{
		ID:        ulid.MustNew(ulid.Timestamp(now), crand.Reader).String(),
		Time:      now.UTC().Truncate(time.Millisecond),
		Action:    model.ActionLeaseExpired,
		Entity:    rec.Entity,
		Resource:  rec.Resource,
		Principal: r.principal,
		Details: map[string]string{
			"lease":   rec.ID,
			"holder":  rec.Holder,
			"expires": time.UnixMilli(rec.Expires).UTC().Format(time.RFC3339Nano),
		},
	}
	le := store.LeaseEnding{
		ID: rec.ID, Version: rec.Version, ExpiredBy: now.UnixMilli(), Deltas: rec.EndDeltas(store.Expire), Event: &ev,
		As: store.Expire, At: now.UnixMilli(), Record: rec,
		// The holder that comes back late learns its lease expired; a
		// reservation's id is free to reserve again at once.
		KeepUntil: now.Add(model.TombstoneKeep).UnixMilli(),
	}
	if id, ok := model.ReservationOf(rec.ID); ok {
		ev.Details["reservation"] = id // as the reservation's own events name it
		le.KeepUntil = 0
	}
	err := r.store.EndLease(ctx, ns.ID, le)
	switch {
	case err == nil:
		r.count(ending{ns, *rec, ev, now})
	case errors.Is(err, model.ErrDomain):
		// The store's answer: ended or changed by another.
	default:
		e := ending{ns, *rec, ev, now}
		if applied, known := r.applied(ctx, &e); !known {
			r.remember(e)
		} else if applied {
			r.count(e)
			return nil
		}
	}
	return err
}

// count counts e as reclaimed by this Reconciler.
func (r *Reconciler) count(e ending) {
	r.reclaimed.Add(1)
	if r.onReclaim != nil {
		r.onReclaim(Reclaimed{Namespace: e.ns.Name, Lease: e.rec, At: e.at})
	}
}

// Endings of unknown outcome.
//
// An ending whose store step failed without an answer (the store did not
// answer in time, the connection was reset) may have been applied. Its
// audit event says whether: it is written in the same atomic step, under
// an id of this Reconciler's making. end reads it back at once (found, the
// ending is a reclaim like any other), and each pass settles the endings
// whose reading failed too (those were counted failed, and their pass
// returned the error), so that a lease this process reclaimed is counted
// here (Stats, WithOnReclaim: the server's tollgate_leases_expired_total)
// once, however its answer was lost. An ending found not applied is a
// failure, and is forgotten: the lease is still listed, and a pass ends
// it. A store that cannot list audit events (store.Audit) leaves such
// endings counted as failed only.

// applied reports whether e's step was applied (its audit event is
// stored); known is false when the store could not tell.
func (r *Reconciler) applied(ctx context.Context, e *ending) (applied, known bool) {
	a, ok := r.store.(store.Audit)
	if !ok {
		return false, true
	}
	after, err := justBefore(e.ev.ID)
	if err != nil {
		return false, true
	}
	evs, err := a.ListAudit(ctx, e.ns.ID, e.ev.Entity, after, 1)
	if err != nil {
		return false, false
	}
	return len(evs) == 1 && evs[0].ID == e.ev.ID, true
}

// justBefore returns the ULID just below id, so that the audit events
// listed after it begin with id's, if it is stored.
func justBefore(id string) (string, error) {
	u, err := ulid.ParseStrict(id)
	if err != nil {
		return "", err
	}
	for i := len(u) - 1; i >= 0; i-- {
		u[i]--
		if u[i] != 0xff { // no borrow
			break
		}
	}
	return u.String(), nil
}

// remember keeps e to settle in a later pass.
func (r *Reconciler) remember(e ending) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.unsure) >= maxUnsure {
		r.unsure = r.unsure[1:]
	}
	r.unsure = append(r.unsure, e)
}

// settleUnsure counts the remembered endings that were applied, forgets
// those that were not, and keeps those the store cannot tell yet.
func (r *Reconciler) settleUnsure(ctx context.Context) {
	r.mu.Lock()
	pending := r.unsure
	r.unsure = nil
	r.mu.Unlock()
	for i := range pending {
		applied, known := r.applied(ctx, &pending[i])
		switch {
		case !known:
			r.remember(pending[i])
		case applied:
			r.count(pending[i])
		}
	}
}
