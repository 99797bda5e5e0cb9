// Package aggregator turns bucket changes into usage snapshots
// (store.UsageStore): per entity, resource and hourly or daily window, a
// net-consumed counter per limit and a count of acquires.
//
// Recorder is the in-process change feed for stores without one of their
// own (memory, embedded): it wraps the store, notes what every successful
// write consumed, and writes the sums to the usage store in batches. The
// DynamoDB backend's feed is its table's stream.
package aggregator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// DefaultRetention is how long snapshots are kept.
const DefaultRetention = 90 * 24 * time.Hour

// DefaultFlushInterval is how often a Recorder writes its sums.
const DefaultFlushInterval = time.Second

// Windows are the snapshot windows every change is counted in.
var Windows = []store.Window{store.Hourly, store.Daily}

// Recorder is a store.Store that records usage of the store it wraps, and
// a store.UsageStore that reads it back.
// Consumption is dated when it happened: a granted Consume at its request
// time, a delta (adjustment, commit, rollback) when it is applied.
type Recorder struct {
	store.Store
	usage     store.UsageStore
	clock     clock.Clock
	retention time.Duration
	source    string

	mu      sync.Mutex
	pending map[usageID]*store.UsageIncrement
	seq     uint64
	// unsent holds a batch whose write failed, to be sent again as it was
	// (same sequence number), so a write that in fact applied is not
	// counted twice.
	unsent map[string][]store.UsageIncrement
	// flushing serialises flushes, so batches go out in sequence order.
	flushing sync.Mutex
}

type usageID struct {
	ns  string
	key store.UsageKey
}

// Option configures a Recorder.
type Option func(*Recorder)

// WithClock sets the clock that dates deltas and expiries.
func WithClock(c clock.Clock) Option { return func(r *Recorder) { r.clock = c } }

// WithRetention sets how long snapshots are kept after their window ends
// (default 90 days).
func WithRetention(d time.Duration) Option { return func(r *Recorder) { r.retention = d } }

// NewRecorder wraps st, recording its usage into us.
func NewRecorder(st store.Store, us store.UsageStore, opts ...Option) *Recorder {
	var b [6]byte
	_, _ = rand.Read(b[:])
	r := &Recorder{
		Store: st, usage: us, clock: clock.Real{}, retention: DefaultRetention,
		// A source per Recorder: a restarted process starts its own
		// sequence, which must not be compared with the last one's.
		source:  "local-" + hex.EncodeToString(b[:]),
		pending: map[usageID]*store.UsageIncrement{},
		unsent:  map[string][]store.UsageIncrement{},
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Consume implements store.Buckets, recording a grant's consumption.
func (r *Recorder) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	granted, err := r.Store.Consume(ctx, ns, req)
	if err != nil || !granted {
		return granted, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range req.Buckets {
		b := &req.Buckets[i]
		for _, w := range Windows {
			in := r.pendingFor(ns, b.Key, w, req.Now)
			in.Events++
			for _, lr := range b.Limits {
				if lr.Amount != 0 {
					in.Consumed[lr.Name] += lr.Amount
				}
			}
		}
	}
	return true, nil
}

// ApplyDeltas implements store.Buckets, recording the deltas. If the store
// fails, nothing is recorded: a failed call may have applied some deltas
// (backends apply them bucket by bucket), which usage then misses.
func (r *Recorder) ApplyDeltas(ctx context.Context, ns string, deltas []store.Delta) error {
	if err := r.Store.ApplyDeltas(ctx, ns, deltas); err != nil {
		return err
	}
	r.record(ns, deltas)
	return nil
}

// EndLease implements store.Leases, recording the ending's deltas as
// ApplyDeltas does: a durable lease's commit, rollback or reclaim writes
// its adjustments and returns its concurrency tokens through EndLease, not
// ApplyDeltas. An ending that failed applied nothing (it is one atomic
// step), so nothing is recorded then.
func (r *Recorder) EndLease(ctx context.Context, ns string, e store.LeaseEnding) error {
	if err := r.Store.EndLease(ctx, ns, e); err != nil {
		return err
	}
	r.record(ns, e.Deltas)
	return nil
}

// record notes deltas applied now.
func (r *Recorder) record(ns string, deltas []store.Delta) {
	now := r.clock.Now().UnixMilli()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range deltas {
		for _, w := range Windows {
			r.pendingFor(ns, d.Key, w, now).Consumed[d.Limit] += d.Amount
		}
	}
}

// pendingFor returns the pending increment of a bucket's window at t.
// r.mu is held.
func (r *Recorder) pendingFor(ns string, k store.BucketKey, w store.Window, t int64) *store.UsageIncrement {
	key := store.UsageKey{Entity: k.Entity, Resource: k.Resource, Window: w, Start: w.Start(t)}
	id := usageID{ns, key}
	in := r.pending[id]
	if in == nil {
		in = &store.UsageIncrement{Key: key, Consumed: map[string]int64{}}
		r.pending[id] = in
	}
	return in
}

// Flush writes what was recorded since the last flush. A batch that fails
// is kept and sent again, unchanged, by the next Flush.
func (r *Recorder) Flush(ctx context.Context) error {
	r.flushing.Lock()
	defer r.flushing.Unlock()
	batches := r.takeBatches()
	var errs []error
	for _, ns := range slices.Sorted(maps.Keys(batches)) {
		if err := r.usage.AddUsage(ctx, ns, batches[ns]); err != nil {
			r.mu.Lock()
			r.unsent[ns] = batches[ns]
			r.mu.Unlock()
			errs = append(errs, fmt.Errorf("aggregator: write usage of namespace %s: %w", ns, err))
		}
	}
	return errors.Join(errs...)
}

// takeBatches returns the batches to write, per namespace: first any batch
// that failed before (as it was), else the pending sums under a new
// sequence number. Pending sums of a namespace with an unsent batch wait.
func (r *Recorder) takeBatches() map[string][]store.UsageIncrement {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.unsent
	r.unsent = map[string][]store.UsageIncrement{}
	if len(r.pending) == 0 {
		return out
	}
	r.seq++
	seq := fmt.Sprintf("%020d", r.seq)
	waiting := maps.Clone(out)
	for id, in := range r.pending {
		if _, ok := waiting[id.ns]; ok {
			continue
		}
		in.Source, in.Seq = r.source, seq
		in.Expires = in.Key.Start + (in.Key.Window.Duration() + r.retention).Milliseconds()
		out[id.ns] = append(out[id.ns], *in)
		delete(r.pending, id)
	}
	return out
}

// Run flushes every interval until ctx ends, then once more with a fresh
// context of at most ten seconds. Flush errors go to onError (if not nil).
func (r *Recorder) Run(ctx context.Context, interval time.Duration, onError func(error)) {
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := r.Flush(fctx); err != nil && onError != nil {
				onError(err)
			}
			return
		case <-r.clock.After(interval):
		}
		if err := r.Flush(ctx); err != nil && onError != nil {
			onError(err)
		}
	}
}

// AddUsage implements store.UsageStore by writing to the usage store.
func (r *Recorder) AddUsage(ctx context.Context, ns string, incs []store.UsageIncrement) error {
	return r.usage.AddUsage(ctx, ns, incs)
}

// ListUsage implements store.UsageStore by reading the usage store. What
// is recorded but not yet flushed is not in it.
func (r *Recorder) ListUsage(ctx context.Context, ns string, q store.UsageQuery) ([]store.UsageSnapshot, error) {
	return r.usage.ListUsage(ctx, ns, q)
}

// ListBuckets implements store.BucketLister for stores that do, so that
// capacity reports work through the recorder.
func (r *Recorder) ListBuckets(ctx context.Context, ns, resource, after string, limit int) ([]store.ListedBucket, error) {
	bl, ok := r.Store.(store.BucketLister)
	if !ok {
		return nil, model.ErrCapacityUnsupported
	}
	return bl.ListBuckets(ctx, ns, resource, after, limit)
}

// errNoAuditLog answers the store.AuditLog methods of a recorder over a
// store that does not implement it.
var errNoAuditLog = errors.New("aggregator: the recorded store cannot list its audit log by time")

// ListAuditRange implements store.AuditLog for stores that do, so that
// audit export and retention work through the recorder.
func (r *Recorder) ListAuditRange(ctx context.Context, ns string, q store.AuditRange) ([]model.AuditEvent, error) {
	l, ok := r.Store.(store.AuditLog)
	if !ok {
		return nil, errNoAuditLog
	}
	return l.ListAuditRange(ctx, ns, q)
}

// SweepAudit implements store.AuditLog for stores that do.
func (r *Recorder) SweepAudit(ctx context.Context, ns string, before time.Time, limit int) (int, error) {
	l, ok := r.Store.(store.AuditLog)
	if !ok {
		return 0, errNoAuditLog
	}
	return l.SweepAudit(ctx, ns, before, limit)
}

// SetAuditRetention implements store.AuditLog for stores that do.
func (r *Recorder) SetAuditRetention(ctx context.Context, name string, d time.Duration) error {
	l, ok := r.Store.(store.AuditLog)
	if !ok {
		return errNoAuditLog
	}
	return l.SetAuditRetention(ctx, name, d)
}
