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

	reclaimed, skipped, failed atomic.Uint64
}

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

// New returns a Reconciler over s.
func New(s Store, opts ...Option) (*Reconciler, error) {
	if s == nil {
		return nil, model.Invalid("store", "nil", "a store is required")
	}
	r := &Reconciler{store: s, clock: clock.Real{}, interval: DefaultInterval, principal: DefaultPrincipal, log: slog.Default()}
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
}

// Stats returns the counts so far.
func (r *Reconciler) Stats() Stats {
	return Stats{Reclaimed: r.reclaimed.Load(), Skipped: r.skipped.Load(), Failed: r.failed.Load()}
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
	e := store.LeaseEnding{
		ID: rec.ID, Version: rec.Version, ExpiredBy: now.UnixMilli(), Deltas: rec.EndDeltas(store.Expire), Event: &ev,
		As: store.Expire, At: now.UnixMilli(), Record: rec,
		// The holder that comes back late learns its lease expired; a
		// reservation's id is free to reserve again at once.
		KeepUntil: now.Add(model.TombstoneKeep).UnixMilli(),
	}
	if id, ok := model.ReservationOf(rec.ID); ok {
		ev.Details["reservation"] = id // as the reservation's own events name it
		e.KeepUntil = 0
	}
	err := r.store.EndLease(ctx, ns.ID, e)
	if err != nil {
		return err
	}
	r.reclaimed.Add(1)
	if r.onReclaim != nil {
		r.onReclaim(Reclaimed{Namespace: ns.Name, Lease: *rec, At: now})
	}
	return nil
}
