package tollgate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Durable leases (docs/design/quota-broker.md): a lease that holds
// concurrency tokens, or asked for it (WithDurableLease), has a record in
// the store, written with its debit and deleted with its ending, so that a
// reconciler can end it if its holder does not, and any process can resume
// it by id. Its ending is one store step (EndLease) whose deltas come from
// the record (store.LeaseRecord.EndDeltas): it needs none of the
// bucket-by-bucket bookkeeping of a lease held in memory alone.

// newLeaseID returns a fresh lease id: 128 random bits as 32 hexadecimal
// characters (model.LeaseIDLen), unguessable, as a lease id is all another
// process needs to end the lease.
func newLeaseID() string {
	var b [model.LeaseIDLen / 2]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// consumeDurable runs d's request with a lease record, which the store
// writes if and only if it grants. The store refuses a record whose id is
// taken (model.ErrLeaseExists) having debited nothing; with 128 random
// bits that is a collision or a broken random source, so one retry with a
// fresh id settles it, and a second refusal is returned.
//
// With an idempotency key the id is the key's (IdempotentLeaseID), and a
// refusal means an earlier call with the key was granted: it is returned
// for the caller to replay. Committing at once (AcquireAndCommit) a lease
// that holds no concurrency token, the record is born ended: one store
// step grants, commits and remembers.
func (l *Limiter) consumeDurable(ctx context.Context, d *leaseData, now unixNano) (bool, error) {
	if d.opts.Reservation != "" {
		return l.consumeReservation(ctx, d, now)
	}
	expiry := l.leaseTTL
	if d.opts.LeaseTTL != 0 {
		expiry = d.opts.LeaseTTL
	}
	key := d.opts.IdempotencyKey
	id := newLeaseID()
	if key != "" {
		id = model.IdempotentLeaseID(key)
	}
	rec := store.NewLeaseRecord(id, l.holder, &d.req, now.add(expiry).milli())
	if key != "" && d.committing && !d.holds {
		rec.EndedAt, rec.EndedAs, rec.KeepUntil = now.milli(), store.Commit, now.add(model.TombstoneKeep).milli()
	}
	d.req.Lease, d.req.ReusedID = rec, key != ""
	sent := ctx.Err() == nil // a call whose context has ended sends nothing
	granted, err := l.store.Consume(ctx, d.ns, &d.req)
	if errors.Is(err, model.ErrLeaseExists) && key == "" {
		rec.ID = newLeaseID()
		granted, err = l.store.Consume(ctx, d.ns, &d.req)
	}
	d.req.Lease, d.req.ReusedID = nil, false // the request is recycled; the record stays with the lease
	if err == nil && granted {
		d.rec = rec
	}
	if key == "" && sent && unknownOutcome(err) {
		l.abandon(d.ns, rec) // it may have been written: see abandon.go
	}
	return granted, err
}

// isReservation reports whether id is a reservation's lease id.
func isReservation(id string) bool { return strings.HasPrefix(id, model.ReservationPrefix) }

// replay answers an acquire whose idempotency key an earlier call was
// granted with (its record exists): the same lease, resumed, with nothing
// debited again; an ErrIdempotencyConflict if that call asked for
// something else; a *LeaseEndedError if the lease has ended since (but a
// commit repeated: AcquireAndCommit replays its grant). d is the caller's
// state, which becomes the lease's.
func (l *Limiter) replay(ctx context.Context, d *leaseData, entity, resource string, consume Consume) (*Lease, error) {
	id := model.IdempotentLeaseID(d.opts.IdempotencyKey)
	rec, err := l.store.GetLease(ctx, d.ns, id)
	if err != nil {
		return nil, storeErr(ctx, "replay acquire", entity+"/"+resource, err)
	}
	if !sameRequest(&rec, entity, resource, consume) {
		return nil, fmt.Errorf("idempotency key of lease %s, acquired for %s/%s: %w", id, rec.Entity, rec.Resource, model.ErrIdempotencyConflict)
	}
	if rec.Ended() && !(d.committing && rec.EndedAs == store.Commit) {
		return nil, endedError(l, &rec)
	}
	committing := d.committing
	d.req.Buckets = d.req.Buckets[:0]
	d.holds = false
	d.resume(&rec)
	d.replayed, d.committing = true, committing
	return d.newLease(&model.Entity{ID: rec.Entity}, rec.Resource), nil
}

// sameRequest reports whether rec is the lease of an acquire of consume
// for entity and resource: what the entity's own bucket was debited, limit
// by limit (whole tokens), is what consume asks.
func sameRequest(rec *store.LeaseRecord, entity, resource string, consume Consume) bool {
	if rec.Entity != entity || rec.Resource != resource || len(rec.Buckets) == 0 {
		return false
	}
	n := 0
	for _, ll := range rec.Buckets[0].Limits {
		if ll.Amount == 0 {
			continue
		}
		c, ok := consume[ll.Name]
		if m, fits := bucket.Milli(c); !ok || !fits || m != ll.Amount {
			return false
		}
		n++
	}
	for _, c := range consume {
		if c == 0 {
			n++
		}
	}
	return n == len(consume)
}

// endedError describes the tombstone rec: how its lease ended, and what it
// consumed in the end.
func endedError(l *Limiter, rec *store.LeaseRecord) error {
	e := &model.LeaseEndedError{ID: rec.ID, At: time.UnixMilli(rec.EndedAt).UTC(), Entity: rec.Entity, Resource: rec.Resource,
		Consumed: Consume{}}
	switch rec.EndedAs {
	case store.Commit:
		e.How = model.EndedCommitted
	case store.Rollback:
		e.How = model.EndedRolledBack
	default:
		e.How = model.EndedExpired
	}
	if rec.EndedAs != store.Rollback {
		d := l.getLeaseData()
		d.resume(rec)
		e.Consumed = d.consumed()
		d.release()
	}
	return e
}

// ID returns the lease's id, by which any process sharing the store can
// resume it (Limiter.ResumeLease): "" for a lease without a record (a
// rate-only or degraded lease) and once the lease has ended.
func (le *Lease) ID() string {
	d, ok := le.open()
	if !ok {
		return ""
	}
	defer d.mu.Unlock()
	if d.rec == nil {
		return ""
	}
	return d.rec.ID
}

// ExpiresAt returns when a reconciler may end the lease unless it is
// extended first: the zero time for a lease without a record, which never
// expires, and once the lease has ended.
func (le *Lease) ExpiresAt() time.Time {
	d, ok := le.open()
	if !ok {
		return time.Time{}
	}
	defer d.mu.Unlock()
	if d.rec == nil || d.rec.Expires == 0 {
		return time.Time{}
	}
	return time.UnixMilli(d.rec.Expires)
}

// Extend moves the lease's expiry to now + d (MinLeaseTTL to
// MaxLeaseTTL, else a *ValidationError naming lease_ttl) and writes
// its pending adjustments to the record, as Sync does. A holder running
// long keeps its lease by extending it well before it expires (at half the
// expiry, say: clocks of holder and reconciler may disagree).
//
// A lease without a record never expires: Extend checks d and returns nil,
// so that a heartbeat can extend any lease alike, a degraded one included.
// A lease ended elsewhere is reported as by Commit; a store failure is an
// *UnavailableError and leaves the lease as it was.
func (le *Lease) Extend(ctx context.Context, d time.Duration) error {
	if err := model.CheckLeaseTTL(d); err != nil {
		return err
	}
	ld, ok := le.open()
	if !ok {
		return model.ErrLeaseClosed
	}
	defer ld.mu.Unlock()
	if ld.rec == nil {
		return nil
	}
	return le.update(ctx, ld, "extend", d)
}

// Sync writes the lease's pending adjustments (Adjust) to its record
// without changing its expiry, so that a process resuming the lease, or a
// reconciler ending it, counts them. It writes nothing when there is
// nothing new, and for a lease without a record, which no other process
// can see. A lease ended elsewhere is reported as by Commit.
func (le *Lease) Sync(ctx context.Context) error {
	d, ok := le.open()
	if !ok {
		return model.ErrLeaseClosed
	}
	defer d.mu.Unlock()
	if d.rec == nil || d.synced() {
		return nil
	}
	return le.update(ctx, d, "sync", 0)
}

// update writes d's record with its pending adjustments and, if extend is
// positive, the expiry now + extend; the caller holds d.mu. A record changed
// elsewhere is read again and written once more (see reload).
func (le *Lease) update(ctx context.Context, d *leaseData, op string, extend time.Duration) error {
	write := func() error {
		rec := *d.rec
		rec.Version++
		rec.Pending = d.pendingDeltas()
		if extend > 0 {
			rec.Expires = d.now().add(extend).milli()
		}
		if err := d.lim.store.UpdateLease(ctx, d.ns, rec); err != nil {
			return err
		}
		d.rec = &rec
		return nil
	}
	err := write()
	if errors.Is(err, model.ErrLeaseConflict) {
		if err = d.reload(ctx); err == nil {
			err = write()
		}
	}
	err = le.durableErr(ctx, d, op, err)
	if errors.Is(err, model.ErrLeaseClosed) {
		d.recycle() // ended elsewhere: over here too
	}
	return err
}

// endDurable ends a durable lease in one store step: the record deleted on
// condition of its version, the deltas of the ending (EndDeltas of the
// record with this lease's pending adjustments) applied and, for a
// reservation, its release's audit event appended. The caller holds d.mu
// and recycles d unless the error says to retry.
func (le *Lease) endDurable(ctx context.Context, d *leaseData, c endCall) error {
	end, op := store.Commit, "commit"
	if c.rollback {
		end, op = store.Rollback, "rollback"
	}
	ev, err := d.lim.releaseEvent(d.rec, c)
	if err != nil {
		return err
	}
	write := func() error {
		rec := *d.rec
		rec.Pending = d.pendingDeltas()
		d.deltas = rec.AppendEndDeltas(d.deltas[:0], end) // the recycled state's buffer
		e := store.LeaseEnding{ID: rec.ID, Version: rec.Version, Deltas: d.deltas, Event: ev, As: end, At: d.now().milli(),
			Record: d.rec}
		if !d.synced() {
			// The tombstone says what the lease consumed, adjustments made
			// here since the record was written included (not nil: none).
			e.Pending = rec.Pending
			if e.Pending == nil {
				e.Pending = []store.LeaseDelta{}
			}
		}
		if !isReservation(rec.ID) { // a reservation's id may be reserved again at once
			e.KeepUntil = max(rec.Expires, d.now().add(model.TombstoneKeep).milli())
		}
		err := d.lim.store.EndLease(ctx, d.ns, e)
		d.lim.refunded(d.ns, e.Deltas)
		return err
	}
	err = write()
	if errors.Is(err, model.ErrLeaseConflict) {
		if err = d.reload(ctx); err == nil {
			err = write()
		}
	}
	return le.durableErr(ctx, d, op, err)
}

// durableErr turns the error of a write of d's record into the caller's.
// A record that is gone means the lease ended elsewhere: a reconciler took
// it after its expiry, or another process ended it. Nothing was written,
// and the lease is over here too: the error matches ErrLeaseExpired (so
// ErrLeaseClosed) and ErrLeaseNotFound, and the caller recycles d.
func (le *Lease) durableErr(ctx context.Context, d *leaseData, op string, err error) error {
	switch {
	case err == nil:
		return nil // before the subject is built: the common case allocates nothing
	case errors.Is(err, model.ErrLeaseNotFound):
		return fmt.Errorf("%s lease %s of %s/%s: ended elsewhere (reclaimed after its expiry, or ended by another process): %w (%w)",
			op, d.rec.ID, le.key.ent.ID, le.key.resource, model.ErrLeaseExpired, err)
	case errors.As(err, new(*model.LeaseEndedError)):
		return err // it says how
	}
	return storeErr(ctx, op, le.key.ent.ID+"/"+le.key.resource, err)
}

// reload reads d's record again after a write met another version: another
// process (a server replica that resumed the lease) changed it. Adjustments
// add up, so neither side's is lost: the pending adjustments become the
// stored ones plus what this lease adjusted since it last wrote or read the
// record; the stored expiry and version are taken. The caller holds d.mu.
func (d *leaseData) reload(ctx context.Context) error {
	fresh, err := d.lim.store.GetLease(ctx, d.ns, d.rec.ID)
	switch {
	case err != nil:
		return err
	case fresh.Gone(d.now().milli()):
		return fmt.Errorf("lease %q: %w", fresh.ID, model.ErrLeaseNotFound)
	case fresh.Ended():
		return endedError(d.lim, &fresh)
	}
	merged := make([]adjustment, 0, len(fresh.Pending)+len(d.pending))
	for _, p := range fresh.Pending {
		merged = append(merged, adjustment{name: p.Limit, amount: p.Amount})
	}
	for _, a := range d.pending {
		own := a.amount - d.rec.PendingOf(a.name)
		i := 0
		for i < len(merged) && merged[i].name != a.name {
			i++
		}
		if i == len(merged) {
			merged = append(merged, adjustment{name: a.name})
		}
		merged[i].amount = saturatingAdd(merged[i].amount, own)
	}
	d.rec, d.pending = &fresh, merged
	// Two refunds, each within what the lease consumed, may together
	// exceed it: a lease gives back at most what it took (Adjust). Two
	// additions may likewise together take it above maxNet. Each was
	// accepted, so the sum is brought back within bounds rather than
	// refused.
	for i := range d.pending {
		a := &d.pending[i]
		least, most := d.initialRange(a.name)
		a.amount = min(max(a.amount, -least), maxNet-most)
	}
	return nil
}

// pendingDeltas returns d's pending adjustments as a record holds them.
func (d *leaseData) pendingDeltas() []store.LeaseDelta {
	if len(d.pending) == 0 {
		return nil
	}
	out := make([]store.LeaseDelta, 0, len(d.pending))
	for _, a := range d.pending {
		if a.amount != 0 {
			out = append(out, store.LeaseDelta{Limit: a.name, Amount: a.amount})
		}
	}
	return out
}

// synced reports whether d's record holds every pending adjustment.
func (d *leaseData) synced() bool {
	n := 0
	for _, a := range d.pending {
		if a.amount != 0 {
			n++
		}
		if d.rec.PendingOf(a.name) != a.amount {
			return false
		}
	}
	return n == len(d.rec.Pending)
}

// ResumeLease returns the durable lease id of the limiter's namespace, as
// its holder left it (pending adjustments that were synced, the expiry last
// set), to adjust, extend, sync, commit or roll back. Any process sharing
// the store can resume any lease whose id it was given: this is how a
// lease outlives the process, or the server replica, that acquired it.
//
// A lease with no record (never granted, already ended, expired and
// reclaimed, or of another namespace) is an error matching
// ErrLeaseNotFound; an id that no lease can have is a *ValidationError.
// Two handles to one lease may both act on it: the record's version
// decides, and the first ending wins (see Commit). A resumed lease reports
// no Statuses: this process did not see its grant.
func (l *Limiter) ResumeLease(ctx context.Context, id string) (*Lease, error) {
	if err := model.ValidateLeaseID(id); err != nil {
		return nil, err
	}
	ns, err := l.namespaceID(ctx, nanoOf(l.clock.Now()))
	if err != nil {
		return nil, err
	}
	return l.resumeIn(ctx, ns, id)
}

// resumeIn resumes lease id of namespace ns (an id).
func (l *Limiter) resumeIn(ctx context.Context, ns, id string) (*Lease, error) {
	d := l.getLeaseData()
	rec, err := l.store.GetLease(ctx, ns, id)
	switch {
	case err == nil && rec.Gone(d.now().milli()):
		err = fmt.Errorf("lease %q: %w", id, model.ErrLeaseNotFound)
	case err == nil && rec.Ended():
		err = endedError(l, &rec)
	}
	if err != nil {
		d.release()
		return nil, storeErr(ctx, "resume lease", id, err)
	}
	setIfChanged(&d.ns, ns)
	d.resume(&rec)
	return d.newLease(&model.Entity{ID: rec.Entity}, rec.Resource), nil
}

// resume makes d the state of rec's lease: its request rebuilt from what
// the record says was debited (the limits the acquire checked are those
// with an amount), its pending adjustments those of the record.
func (d *leaseData) resume(rec *store.LeaseRecord) {
	d.rec, d.resumed = rec, true
	d.layout.valid, d.layout.counted = false, false // the request is rebuilt below
	d.req.Now = rec.Created
	buckets := d.req.Buckets[:0]
	for _, lb := range rec.Buckets {
		var br *store.BucketRequest
		buckets, br = extend(buckets)
		*br = store.BucketRequest{Key: lb.Key, Placement: lb.Placement, Limits: make([]store.LimitRequest, len(lb.Limits))}
		for j, ll := range lb.Limits {
			br.Limits[j] = store.LimitRequest{Name: ll.Name, Params: ll.Params, Check: ll.Amount > 0, Amount: ll.Amount}
			if !ll.Params.Refills() && ll.Amount > 0 {
				d.holds = true
			}
		}
	}
	d.req.Buckets = buckets
	for _, p := range rec.Pending {
		d.pending = append(d.pending, adjustment{name: p.Limit, amount: p.Amount})
	}
}

// Replayed reports whether the lease is the grant of an earlier acquire
// with the same idempotency key (WithIdempotencyKey), handed out again:
// this call debited nothing, and the lease reports no Statuses.
func (le *Lease) Replayed() bool {
	d, ok := le.open()
	if !ok {
		return false
	}
	defer d.mu.Unlock()
	return d.replayed
}
