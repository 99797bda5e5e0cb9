package tollgate

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// A Lease is a granted acquire whose consumption is already written. Adjust
// it when the real cost is known, then end it with Commit or Rollback. A Lease
// is safe for concurrent use.
//
// Once a lease has ended, every method except Entity, Resource, Degraded and
// Cause reports it closed: Adjust, Commit and Rollback return ErrLeaseClosed,
// and Consumed and Statuses return nil. Read them before ending the lease.
type Lease struct {
	// The lease's state is recycled when it ends (an acquire then needs
	// only this small handle, see leaseData.newLease); the state's
	// current handle (leaseData.handles) tells the live one from stale
	// ones. key is the lease's state, entity and resource, shared with
	// the state's other leases of the same pair: 8 bytes a handle, so
	// that the collector runs as seldom as it can on the acquire path.
	key *leaseKey
}

// leaseData is the recyclable state of a lease: the request it wrote and its
// pending adjustments. handles[next] is the handle of its lease, and moves
// on when it is recycled; other fields may be touched only by the holder
// of that handle, under mu.
//
// handles and next are written under mu only (recycle), and read under
// it by the handles (open); the owner of state fresh from the pool, which
// no live handle points to, reads them without. Plain fields, not atomic
// ones nor a generation count: ending a lease costs the lock alone (no
// locked instruction besides), and a handle has no count to carry (a
// smaller handle, less for the collector).
type leaseData struct {
	lim  *Limiter
	ns   string // the namespace id the request was written in
	mu   sync.Mutex
	opts model.AcquireSettings
	req  store.ConsumeRequest
	// holds is set when req takes concurrency tokens, which the ending
	// returns: without it and without adjustments, Commit writes nothing.
	// It makes the lease durable.
	holds bool
	// rec is the durable lease's record as this lease last wrote or read
	// it (nil: the lease has none, and lives in this process alone). Its
	// Pending is what the store holds; pending may have more (Sync).
	rec *store.LeaseRecord
	// resumed is set for a lease that ResumeLease loaded: req was rebuilt
	// from the record, without the balances Statuses reports. replayed is
	// set, with it, for the grant of an earlier acquire with the same
	// idempotency key; committing is set while AcquireAndCommit acquires.
	resumed, replayed, committing bool
	// shadow is set when plan found a limit in shadow that the request
	// names (noteShadow).
	shadow bool
	limits []store.LimitRequest // the array of req's limits
	kinds  []planned            // the kind of each limit of req, in order, and its shadow (plan)
	// counters remembers the decision counters of each limit of the last
	// requests (noteDecision), kept across recycling: they are the
	// limiter's for good.
	counters []counterRef
	amounts  []int64 // scratch: the entity's amounts per limit, millitokens
	// explicit is WithLimits' limits prepared, for the option slice
	// explicitOf (explicitLimits).
	explicit   []prepared
	explicitOf []model.Limit
	pending    []adjustment // unwritten adjustments, millitokens
	deltas     []store.Delta
	applied    []int64 // deltas already written, per limit of req in order
	// handles is the batch of lease handles; handles[next] is the
	// current one (given out if issued), those after it were never given
	// out.
	handles []Lease
	next    int
	issued  bool
	// wall is the reading of the wall clock that now derives the time
	// from, with its monotonic part; wallNano is its Unix time.
	wall     time.Time
	wallNano unixNano
	// cause is the store error behind a degraded lease. It is set only in
	// state made for that lease, which is never recycled, so the handle
	// reports it for good.
	cause error
	// denyStamp is the deny cache's count of forgettings before the store
	// was asked; denyNoted says it is set (see refusesFromMemory).
	denyStamp uint64
	denyNoted bool
	// entities remembers the config cache's entry of each entity of the
	// last request's cascade, kept across recycling (cache.entityVia).
	entities [model.MaxCascadeDepth]entityMemo
	// chain is plan's buffer of the request's cascade of entities, kept
	// across recycling so that an entity already in place is not stored
	// again.
	chain [model.MaxCascadeDepth]*model.Entity
	// resolutions does the same for the resolved limits of each level
	// (cache.resolutionVia).
	resolutions [model.MaxCascadeDepth]resolutionMemo
	// layout is what the request's layout was last planned from, kept
	// across recycling (see layoutMemo).
	layout layoutMemo
	// memoHits counts the config cache hits that entities and resolutions
	// remembered served the request being planned, not yet counted in
	// the cache's stats: the decision's count of a grant counts one of
	// them with it (noteDecision), in the same atomic add, and
	// countMemoHits the rest.
	memoHits uint64
	// validEntity and validResource are the entity and resource that
	// plan last found valid, kept across recycling: plan checks again
	// only a different one.
	validEntity, validResource string
	// stripe is the stripe of the counters every acquire counts in
	// (decision counts, config cache hits) that this state counts in,
	// given out in turn as states are made: the pool keeps a state with
	// one processor mostly, so processors mostly count in stripes of
	// their own.
	stripe uint8
}

type adjustment struct {
	name   string
	amount int64
}

func newLeaseData(l *Limiter) *leaseData {
	d := &leaseData{lim: l, limits: make([]store.LimitRequest, 0, 4), kinds: make([]planned, 0, 4),
		stripe: uint8(l.stripes.Add(1) % counterStripes)}
	d.req.Buckets = make([]store.BucketRequest, 0, model.MaxCascadeDepth)
	d.nextHandle()
	return d
}

// wallResync is how long now derives the wall-clock time from one reading
// of the wall clock before it reads it again.
const wallResync = time.Millisecond

// now returns the time for an acquire or a peek: the
// limiter's clock, read the cheap way when it is the real clock. time.Now
// reads two clocks, the wall clock and the monotonic one (about 25 ns each
// on a Linux VM with the TSC), where the time elapsed since an earlier
// time.Now needs only the monotonic one. So now reads the wall clock at most once every wallResync
// (per recycled lease state, so that nothing is shared between goroutines)
// and in between adds the monotonic time elapsed since that reading.
//
// The two clocks advance together: the kernel slews both alike for NTP
// (on Linux; elsewhere they may drift apart by NTP's slew rate, at most
// 0.5 microseconds per wallResync). They part only when the wall clock is
// stepped (set by hand, a large NTP correction) or the machine was
// suspended; the derived time then lags the wall clock for at most
// wallResync, under the millisecond that bucket times are counted in.
func (d *leaseData) now() unixNano {
	if !d.lim.realClock {
		return nanoOf(d.lim.clock.Now())
	}
	// The zero wall (fresh state) has no monotonic reading: Since then
	// measures on the wall clock, decades, and the clock is read.
	if e := time.Since(d.wall); e >= 0 && e < wallResync {
		return d.wallNano.add(e)
	}
	d.wall = time.Now()
	d.wallNano = nanoOf(d.wall)
	return d.wallNano
}

// maxNet bounds a lease's net consumption of a limit, in millitokens, in
// both directions: model.MaxTokens, the most one acquire may take. Within
// it an adjustment cannot saturate a bucket that is not already deep in
// debt, and the lease's record and Consumed stay exact.
const maxNet = model.MaxTokens * bucket.MilliPerToken

// netRange returns the least and the greatest net consumption of limit
// name so far, in millitokens (the initial amount plus pending
// adjustments), over the buckets of the cascade that have it (every bucket
// with the limit receives the same adjustments); both are the pending
// adjustments alone for a lease without buckets (a degraded one).
func (d *leaseData) netRange(name string) (least, most int64) {
	least, most = d.initialRange(name)
	p := d.pendingOf(name)
	return saturatingAdd(least, p), saturatingAdd(most, p)
}

// initialRange returns the least and the greatest initial amount of limit
// name over the buckets of the cascade that have it, 0 and 0 if none has.
func (d *leaseData) initialRange(name string) (least, most int64) {
	least = -1
	for i := range d.req.Buckets {
		if j := d.req.Buckets[i].Find(name); j >= 0 {
			a := d.req.Buckets[i].Limits[j].Amount
			if least < 0 || a < least {
				least = a
			}
			most = max(most, a)
		}
	}
	return max(least, 0), most
}

func (d *leaseData) pendingOf(name string) int64 {
	for _, a := range d.pending {
		if a.name == name {
			return a.amount
		}
	}
	return 0
}

// Entity returns the entity the lease was acquired for.
func (le *Lease) Entity() string { return le.key.ent.ID }

// Resource returns the resource the lease was acquired for.
func (le *Lease) Resource() string { return le.key.resource }

// Degraded reports whether the lease was granted without the store (Allow
// mode while the store was unavailable): nothing was consumed, and Commit and
// Rollback write nothing.
func (le *Lease) Degraded() bool { return le.key.d.cause != nil }

// Cause returns the store error that made the lease degraded, or nil.
func (le *Lease) Cause() error { return le.key.d.cause }

// Statuses reports every limit the lease debited, with balances just after
// the grant. A degraded or ended lease has none, nor has a resumed one
// (ResumeLease), whose grant this process did not see.
func (le *Lease) Statuses() []Status {
	d, ok := le.open()
	if !ok {
		return nil
	}
	defer d.mu.Unlock()
	if len(d.req.Buckets) == 0 || d.resumed {
		return nil
	}
	return d.lim.statuses(d, true)
}

// Adjust records a change to the lease's consumption, e.g. the difference
// between an estimate and the real cost. Positive amounts consume more and
// may drive a bucket into debt; negative amounts give back. Adjustments never
// fail for lack of tokens; they are written by Commit, and applied to every
// bucket of the cascade that has the limit.
//
// A lease gives back at most what it took: its net consumption of a limit
// (the initial amount plus every adjustment) never goes below zero, so that
// a lease cannot refund consumption it did not make (another caller's). Nor
// does it go above MaxTokens, the most one acquire may take, so that no
// adjustment saturates a bucket's balance silently. An adjustment that
// would take it out of [0, MaxTokens], like naming a limit the lease does
// not have or a concurrency limit, is a *ValidationError naming the field
// consume.NAME. A rejected call changes nothing: the whole delta applies, or
// none of it. A degraded lease, which wrote nothing and will write nothing,
// accepts any adjustment that keeps the sum of its adjustments of each limit
// within [-MaxTokens, MaxTokens].
//
// It takes a context as the Go client's Lease.Adjust does (that one writes
// through the server at once), so that code written against Acquirer runs
// on either; this one writes nothing until Commit (or Sync), and does not
// read ctx.
func (le *Lease) Adjust(_ context.Context, delta Consume) error {
	d, ok := le.open()
	if !ok {
		return model.ErrLeaseClosed
	}
	defer d.mu.Unlock()
	for name, n := range delta {
		if err := d.checkAdjust(name, n); err != nil {
			return err
		}
	}
	for name, n := range delta {
		i := 0
		for i < len(d.pending) && d.pending[i].name != name {
			i++
		}
		if i == len(d.pending) {
			d.pending = append(d.pending, adjustment{name: name})
		}
		d.pending[i].amount = saturatingAdd(d.pending[i].amount, n*bucket.MilliPerToken) // checked above
	}
	return nil
}

// checkAdjust checks an adjustment of n whole tokens of limit name (see
// Adjust). The caller holds d.mu.
func (d *leaseData) checkAdjust(name string, n int64) error {
	milli, ok := bucket.Milli(n)
	if !ok {
		return model.Invalid("consume."+name, strconv.FormatInt(n, 10), "exceeds "+strconv.FormatInt(model.MaxTokens, 10)+" in magnitude")
	}
	least, most := d.netRange(name)
	if len(d.req.Buckets) == 0 { // degraded: nothing to check against, nothing will be written
		if p := least + milli; p > maxNet || p < -maxNet { // |least|, |milli| <= maxNet: no overflow
			return model.Invalid("consume."+name, strconv.FormatInt(n, 10), "would take the adjustments of "+strconv.Quote(name)+
				" beyond "+strconv.FormatInt(model.MaxTokens, 10)+" in magnitude")
		}
		return nil
	}
	switch i := d.req.Buckets[0].Find(name); {
	case i < 0:
		return model.Invalid("consume."+name, strconv.FormatInt(n, 10), "the lease has no limit named "+strconv.Quote(name))
	case d.req.Buckets[0].Limits[i].Params.Amount == 0:
		return model.Invalid("consume."+name, strconv.FormatInt(n, 10), "concurrency limit "+strconv.Quote(name)+
			" cannot be adjusted: its tokens are held for the whole lease and returned when it ends")
	}
	// least, most and milli are at most bucket.MaxTokens in magnitude:
	// their sums fit in int64.
	switch {
	case least+milli < 0:
		return model.Invalid("consume."+name, strconv.FormatInt(n, 10), "would make the lease's net consumption of "+
			strconv.Quote(name)+" negative: a lease gives back at most what it consumed, "+
			strconv.FormatInt(bucket.Available(bucket.State{Tokens: least}), 10)+" so far")
	case most+milli > maxNet:
		return model.Invalid("consume."+name, strconv.FormatInt(n, 10), "would take the lease's net consumption of "+
			strconv.Quote(name)+" above "+strconv.FormatInt(model.MaxTokens, 10)+", the most one acquire may take: "+
			strconv.FormatInt(bucket.Available(bucket.State{Tokens: most}), 10)+" so far")
	}
	return nil
}

// Consumed returns what the lease has consumed so far, initial amounts plus
// adjustments, per limit: what the caller asked, once, however many levels
// of the cascade it debited (an acquire of 1 request that cascades to a
// parent consumed 1; Statuses show each level's debit, Requested). Amounts
// are whole tokens, rounded down. It returns nil once the lease has ended.
func (le *Lease) Consumed() Consume {
	d, ok := le.open()
	if !ok {
		return nil
	}
	defer d.mu.Unlock()
	return d.consumed()
}

// consumed is what d's lease holds, whole tokens per limit, pending
// adjustments included: the caller's amount, once per limit. Every level
// of the cascade that names a limit is debited the same amount, so the
// largest level's is it (the levels differ only where a level does not
// hold the limit at all).
func (d *leaseData) consumed() Consume {
	out := make(Consume)
	for _, b := range d.req.Buckets {
		for _, lr := range b.Limits {
			if p := d.pendingOf(lr.Name); lr.Check || p != 0 {
				if n, seen := out[lr.Name]; !seen || lr.Amount+p > n {
					out[lr.Name] = lr.Amount + p
				}
			}
		}
	}
	for name, n := range out {
		out[name] = bucket.Available(bucket.State{Tokens: n})
	}
	return out
}

// Commit writes pending adjustments and returns the lease's concurrency
// tokens. If the store fails, Commit returns the error and the lease stays
// open, so Commit (or Rollback) can be called again.
//
// A durable lease ends in one atomic step that leaves its record's
// tombstone. If the lease has ended elsewhere (a reconciler took it after
// its expiry, or another process ended it), Commit writes nothing and
// returns a *LeaseEndedError saying how (it matches ErrLeaseClosed, and
// ErrLeaseExpired if it expired), or, once the tombstone is forgotten, an
// error matching ErrLeaseExpired and ErrLeaseNotFound; the lease is ended
// here too.
func (le *Lease) Commit(ctx context.Context) error { return le.end(ctx, endCall{}) }

// Rollback gives back everything the lease consumed, in every bucket, and
// discards pending adjustments. If the store fails, Rollback returns the error
// and the lease stays open. A durable lease ended elsewhere is reported as
// by Commit.
func (le *Lease) Rollback(ctx context.Context) error { return le.end(ctx, endCall{rollback: true}) }

// endCall says how a lease is ended: by its Commit or Rollback, or by
// Limiter.Release (a commit) with the caller's write options, which the
// audit event of a reservation's ending records.
type endCall struct {
	rollback, release bool
	opts              []WriteOption
}

// end ends the lease: it writes what the outcome (commit, or rollback)
// needs, then recycles the lease's state. An error that says the lease
// ended elsewhere (ErrLeaseClosed) recycles it too: there is nothing left
// to retry.
func (le *Lease) end(ctx context.Context, c endCall) error {
	d, ok := le.open()
	if !ok {
		return model.ErrLeaseClosed
	}
	var err error
	switch {
	case d.rec != nil && d.rec.Ended():
		// Born committed (AcquireAndCommit with an idempotency key), or
		// the replay of one: committing again changes nothing.
		if c.rollback {
			err = endedError(d.lim, d.rec)
		}
	case d.rec != nil:
		err = le.endDurable(ctx, d, c)
	// A commit without adjustments, of a lease that holds no concurrency
	// tokens and has written nothing yet, wants no change anywhere (see
	// outcome): the common lease ends without looking at its limits.
	case c.rollback || d.holds || len(d.pending) > 0 || len(d.applied) > 0:
		err = le.write(ctx, d, c.rollback)
	}
	if err != nil && !errors.Is(err, model.ErrLeaseClosed) {
		d.mu.Unlock()
		return err
	}
	if err == nil && d.holds {
		d.lim.wakeWaiters(d) // its slots came back: waiters here try at once
	}
	d.recycle()
	d.mu.Unlock()
	return err
}

// outcome returns the net change that ending the lease wants for lr,
// relative to its initial debit, given its pending adjustment.
func outcome(lr *store.LimitRequest, pending int64, rollback bool) int64 {
	if rollback || lr.Params.Amount == 0 {
		// Rollback, or concurrency tokens: give back what was taken;
		// adjustments cancel.
		return -lr.Amount
	}
	return pending
}

// write writes, for each limit, the difference between its outcome and what
// was written already. Deltas go out one bucket at a time, and what each
// bucket has received is recorded, so that after a partial failure a
// retried (or different) ending writes only the difference and nothing is
// applied twice. The caller holds d.mu.
func (le *Lease) write(ctx context.Context, d *leaseData, rollback bool) error {
	applied := d.appliedFor()
	k := 0 // index into applied, across buckets
	for i := range d.req.Buckets {
		b := &d.req.Buckets[i]
		deltas, first := d.deltas[:0], k
		for j := range b.Limits {
			lr := &b.Limits[j]
			if n := outcome(lr, d.pendingOf(lr.Name), rollback) - applied[k]; n != 0 {
				deltas = append(deltas, store.Delta{Key: b.Key, Limit: lr.Name, Amount: n, Placement: b.Placement, Params: lr.Params})
			}
			k++
		}
		d.deltas = deltas
		if len(deltas) == 0 {
			continue
		}
		err := d.lim.store.ApplyDeltas(ctx, d.ns, deltas)
		d.lim.refunded(d.ns, deltas)
		if err != nil {
			op := "commit"
			if rollback {
				op = "rollback"
			}
			return storeErr(ctx, op, le.key.ent.ID+"/"+le.key.resource, err)
		}
		for j := range b.Limits {
			applied[first+j] = outcome(&b.Limits[j], d.pendingOf(b.Limits[j].Name), rollback)
		}
	}
	return nil
}

// appliedFor returns the per-limit record of deltas written so far, sized to
// the request (all zero for a lease that has written none).
func (d *leaseData) appliedFor() []int64 {
	n := 0
	for i := range d.req.Buckets {
		n += len(d.req.Buckets[i].Limits)
	}
	if len(d.applied) != n { // first ending of this lease
		if cap(d.applied) >= n {
			d.applied = d.applied[:n]
			clear(d.applied)
		} else {
			d.applied = make([]int64, n)
		}
	}
	return d.applied
}

// saturatingAdd adds two balances of magnitude at most bucket.MaxTokens
// (their sum fits in int64) and clamps the result to that range.
func saturatingAdd(a, b int64) int64 {
	return min(max(a+b, -bucket.MaxTokens), bucket.MaxTokens)
}
