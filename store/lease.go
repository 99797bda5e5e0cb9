package store

import (
	"context"
	"slices"
	"strconv"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
)

// Leases holds durable lease records: the leases that hold something to give
// back (concurrency tokens, reservations), written in the same atomic step as
// their debit (ConsumeRequest.Lease) and ended in the same atomic step as the
// give-back (EndLease). Because every ending replaces the record on the
// condition that it is still as the ender read it, a lease ends exactly once
// however many processes (its holder, servers, reconcilers) try at the same
// time. docs/design/quota-broker.md gives the design.
//
// An ending may keep the record as a tombstone (LeaseEnding.KeepUntil):
// it then says how the lease ended to whoever asks again (a repeated
// commit, the retry of an acquire made with an idempotency key) until
// KeepUntil. A tombstone is never listed, never changed, and never ended
// again; a backend may delete it at any time after KeepUntil, and readers
// treat one past KeepUntil as absent (LeaseRecord.Gone).
type Leases interface {
	// GetLease returns the record of lease id, a tombstone included, or an
	// error matching model.ErrLeaseNotFound.
	GetLease(ctx context.Context, ns, id string) (LeaseRecord, error)
	// UpdateLease replaces the stored record rec.ID with rec (pending
	// adjustments, expiry) if the stored version is rec.Version-1 and it
	// is not a tombstone; else it fails with model.ErrLeaseConflict, or
	// model.ErrLeaseNotFound if there is no record. As with ConsumeRequest.Lease, the backend may keep
	// what rec's slices point to: the caller must not change them.
	UpdateLease(ctx context.Context, ns string, rec LeaseRecord) error
	// EndLease deletes the record e.ID, or replaces it with its tombstone
	// when e.KeepUntil > 0 (e.Tombstone), applies e.Deltas (as ApplyDeltas
	// does) and appends e.Event (if not nil), all or nothing, if the
	// stored record has version e.Version, is not a tombstone and, when
	// e.ExpiredBy > 0, has expired by then. Otherwise it writes nothing and
	// fails with model.ErrLeaseConflict, or model.ErrLeaseNotFound if there
	// is no record.
	EndLease(ctx context.Context, ns string, e LeaseEnding) error
	// ListLeases returns up to q.Limit records of open leases (never a
	// tombstone) that q selects, sorted by id, and the id to pass as
	// q.After for the next page ("" after the last).
	ListLeases(ctx context.Context, ns string, q LeaseQuery) ([]LeaseRecord, string, error)
}

// LeaseRecord is a durable lease as stored: what it debited from each
// bucket of its cascade, its pending adjustments, and its expiry.
type LeaseRecord struct {
	ID       string // model.ValidateLeaseID
	Entity   string
	Resource string
	// Holder names who acquired the lease (a host and process, a server),
	// for operators and audit events.
	Holder  string
	Created int64 // Unix milliseconds
	// Expires is when the reconciler may end the lease (Unix
	// milliseconds); 0 means never.
	Expires int64
	// Version is 1 when the record is created and grows by one with each
	// UpdateLease; every change and ending is conditioned on it.
	Version int64
	Buckets []LeaseBucket
	// Pending lists adjustments not yet written to the buckets, one per
	// limit name (see EndDeltas).
	Pending []LeaseDelta
	// EndedAt is when the lease ended (Unix ms), 0 while it is open. A
	// record with EndedAt set is a tombstone (see Leases): EndedAs says how
	// the lease ended, KeepUntil until when the store keeps it (Unix ms).
	// Buckets and Pending are those the lease ended with: its consumption
	// is what they say (Consumed).
	EndedAt   int64
	EndedAs   LeaseEnd
	KeepUntil int64
}

// Ended reports whether rec is a tombstone.
func (rec *LeaseRecord) Ended() bool { return rec.EndedAt > 0 }

// Gone reports whether rec is a tombstone past its KeepUntil at now (Unix
// ms): a backend may have deleted it, so it reads as absent.
func (rec *LeaseRecord) Gone(now int64) bool { return rec.Ended() && rec.KeepUntil <= now }

// LeaseBucket is what a lease debited from one bucket: every limit in effect
// there (an adjustment may name one the acquire did not debit), with its
// parameters and the amount debited.
type LeaseBucket struct {
	Key       BucketKey
	Placement int // the BucketRequest.Placement of the debit
	Limits    []LeaseLimit
}

// LeaseLimit is one limit of a LeaseBucket.
type LeaseLimit struct {
	Name   string
	Params bucket.Params
	Amount int64 // millitokens debited by the acquire, >= 0
}

// LeaseDelta is a pending adjustment of one limit, in millitokens; it
// applies to every bucket of the lease that has the limit.
type LeaseDelta struct {
	Limit  string
	Amount int64
}

// LeaseEnding is an EndLease request.
type LeaseEnding struct {
	ID      string
	Version int64
	// ExpiredBy, when positive, makes the ending conditional on the
	// record expiring (0 < Expires <= ExpiredBy): the reconciler's ending.
	ExpiredBy int64
	Deltas    []Delta
	Event     *model.AuditEvent
	// As is how the lease ends, and At when (Unix ms). With KeepUntil > 0
	// the record stays as a tombstone until then (Tombstone), else it is
	// deleted (a reservation's, whose id may be reserved again at once).
	As        LeaseEnd
	At        int64
	KeepUntil int64
	// Record, if not nil, is the record the ending ends as the ender last
	// wrote or read it (version Version). A backend that cannot copy a
	// record into its tombstone in one step (DynamoDB) makes the tombstone
	// from it, on condition that the stored record is still it; without
	// it, the backend reads the record first.
	Record *LeaseRecord
	// Pending, if not nil, are the lease's pending adjustments as the
	// ending writes them (its Deltas): the ender's, which the record may
	// not hold yet (a library lease adjusted since it last wrote its
	// record). A commit's tombstone keeps them, so that it says what the
	// lease consumed in the end. Nil: the record's.
	Pending []LeaseDelta
}

// Tombstone returns the tombstone e leaves of rec, the record it ends: rec
// with EndedAt, EndedAs and KeepUntil set and its version one more (so
// that a handle still holding the open record can change it no more).
// Pending adjustments stay (the ending's, if it gives them): a commit
// wrote them, and Consumed counts them.
func (e *LeaseEnding) Tombstone(rec *LeaseRecord) LeaseRecord {
	t := *rec
	t.Version++
	t.EndedAt, t.EndedAs, t.KeepUntil = e.At, e.As, e.KeepUntil
	switch {
	case e.As == Rollback:
		t.Pending = nil
	case e.Pending != nil:
		t.Pending = slices.Clone(e.Pending)
	}
	return t
}

// LeaseQuery selects lease records for ListLeases.
type LeaseQuery struct {
	// Entity, if set, selects its leases; Resource, with Entity, narrows
	// them to one bucket.
	Entity, Resource string
	// ExpiredBy, if positive, selects the records with 0 < Expires <=
	// ExpiredBy.
	ExpiredBy int64
	After     string // ids greater than this
	Limit     int    // 1 to MaxLeasePage
}

// MaxLeasePage bounds LeaseQuery.Limit.
const MaxLeasePage = 1000

// Selects reports whether q selects rec, After and Limit aside: never a
// tombstone.
func (q *LeaseQuery) Selects(rec *LeaseRecord) bool {
	switch {
	case rec.Ended(),
		q.Entity != "" && rec.Entity != q.Entity,
		q.Resource != "" && rec.Resource != q.Resource,
		q.ExpiredBy > 0 && (rec.Expires == 0 || rec.Expires > q.ExpiredBy):
		return false
	}
	return rec.ID > q.After
}

// Validate checks q's bounds.
func (q *LeaseQuery) Validate() error {
	switch {
	case q.Limit < 1 || q.Limit > MaxLeasePage:
		return model.Invalid("limit", strconv.Itoa(q.Limit), "must be 1 to "+strconv.Itoa(MaxLeasePage))
	case q.Resource != "" && q.Entity == "":
		return model.Invalid("resource", q.Resource, "selects leases only together with an entity")
	}
	return nil
}

// Ends reports whether e may end rec, whose id is e.ID: it is open, the
// version matches and, for a reconciler's ending, the lease has expired.
func (e *LeaseEnding) Ends(rec *LeaseRecord) bool {
	return !rec.Ended() && rec.Version == e.Version && (e.ExpiredBy <= 0 || rec.Expires > 0 && rec.Expires <= e.ExpiredBy)
}

// LeaseEnd is how a lease ends.
type LeaseEnd int

// The ways a lease ends.
const (
	// Commit keeps the consumption, writes pending adjustments and gives
	// back concurrency tokens.
	Commit LeaseEnd = iota
	// Rollback gives back everything the acquire debited and drops
	// pending adjustments.
	Rollback
	// Expire is the reconciler's Commit of a lease whose holder did not
	// end it in time: the call probably ran, so its consumption stays and
	// only concurrency tokens come back.
	Expire
)

// NewLeaseRecord returns the record of a lease that req grants: each
// bucket's key, placement and limits with their amounts. id, holder and the
// times are the caller's; Version is 1.
func NewLeaseRecord(id, holder string, req *ConsumeRequest, expires int64) *LeaseRecord {
	n := 0
	for i := range req.Buckets {
		n += len(req.Buckets[i].Limits)
	}
	rec, limits := allocLease(len(req.Buckets), n)
	rec.ID, rec.Holder, rec.Created, rec.Expires, rec.Version = id, holder, req.Now, expires, 1
	for i := range req.Buckets {
		b := &req.Buckets[i]
		lb := &rec.Buckets[i]
		lb.Key, lb.Placement = b.Key, b.Placement
		lb.Limits, limits = limits[:len(b.Limits):len(b.Limits)], limits[len(b.Limits):]
		for j := range b.Limits {
			lr := &b.Limits[j]
			lb.Limits[j] = LeaseLimit{Name: lr.Name, Params: lr.Params, Amount: lr.Amount}
		}
	}
	if len(req.Buckets) > 0 {
		rec.Entity, rec.Resource = req.Buckets[0].Key.Entity, req.Buckets[0].Key.Resource
	}
	return rec
}

// leaseAlloc holds a record with room for two buckets and a few
// limits, so that a record costs one allocation when it fits (one is made
// on every durable acquire, and kept as it is by the memory backends).
type leaseAlloc struct {
	rec     LeaseRecord
	buckets [2]LeaseBucket
	limits  [4]LeaseLimit
}

// allocLease returns an empty record with nb buckets and room for nl
// limits in all, which the caller slices for its buckets.
func allocLease(nb, nl int) (*LeaseRecord, []LeaseLimit) {
	a := &leaseAlloc{}
	if nb <= len(a.buckets) {
		a.rec.Buckets = a.buckets[:nb:nb]
	} else {
		a.rec.Buckets = make([]LeaseBucket, nb)
	}
	if nl <= len(a.limits) {
		return &a.rec, a.limits[:nl:nl]
	}
	return &a.rec, make([]LeaseLimit, nl)
}

// EndDeltas returns the deltas that end the lease: for each limit of each
// bucket, what the ending wants relative to the acquire's debit. A
// concurrency limit gets its amount back however the lease ends; a limit
// that refills gets its pending adjustment (Commit, Expire) or its amount
// back (Rollback). Limits that want nothing are left out.
func (r *LeaseRecord) EndDeltas(end LeaseEnd) []Delta { return r.AppendEndDeltas(nil, end) }

// AppendEndDeltas is EndDeltas appending to out.
func (r *LeaseRecord) AppendEndDeltas(out []Delta, end LeaseEnd) []Delta {
	for _, b := range r.Buckets {
		for _, l := range b.Limits {
			var n int64
			switch {
			case end == Rollback || !l.Params.Refills():
				n = -l.Amount
			default:
				n = r.PendingOf(l.Name)
			}
			if n != 0 {
				out = append(out, Delta{Key: b.Key, Limit: l.Name, Amount: n, Placement: b.Placement, Params: l.Params})
			}
		}
	}
	return out
}

// PendingOf returns the pending adjustment of limit name, in millitokens.
func (r *LeaseRecord) PendingOf(name string) int64 {
	for _, p := range r.Pending {
		if p.Limit == name {
			return p.Amount
		}
	}
	return 0
}

// HoldsTokens reports whether ending the lease gives something back
// however it ends: a concurrency token.
func (r *LeaseRecord) HoldsTokens() bool {
	for _, b := range r.Buckets {
		for _, l := range b.Limits {
			if !l.Params.Refills() && l.Amount > 0 {
				return true
			}
		}
	}
	return false
}

// Clone returns a deep copy of r.
func (r *LeaseRecord) Clone() LeaseRecord {
	n := 0
	for i := range r.Buckets {
		n += len(r.Buckets[i].Limits)
	}
	c, limits := allocLease(len(r.Buckets), n)
	buckets := c.Buckets
	*c = *r
	c.Buckets = buckets
	for i, b := range r.Buckets {
		lb := &c.Buckets[i]
		*lb = b
		lb.Limits, limits = limits[:len(b.Limits):len(b.Limits)], limits[len(b.Limits):]
		copy(lb.Limits, b.Limits)
	}
	c.Pending = slices.Clone(r.Pending)
	return *c
}
