package store

import (
	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
)

// PenaltyRequest empties limits of one bucket until a time: what a caller
// asks when a vendor answered 429 with its own retry-after, so that no
// process spends the limit before the vendor takes requests again.
type PenaltyRequest struct {
	Now   int64 // Unix milliseconds
	Until int64 // Unix milliseconds, after Now
	// Bucket lists every limit in effect, adopted as Consume adopts them;
	// those with Check set (refilling limits only) are emptied. Amounts
	// are ignored.
	Bucket BucketRequest
	// Event, if not nil, is appended to the audit log once the penalty is
	// applied (model.ActionLimitPenalize): who emptied the limits, and why.
	// A backend that fails after applying the penalty (DynamoDB, whose
	// shard writes and event are separate calls) may leave it without its
	// event; a penalty to the same time changes nothing a second time, so
	// the caller's retry records the event and nothing else.
	Event *model.AuditEvent
}

// Penalize applies req to r: it prepares r at req.Now as Consume does
// (refill, adopt parameters, add missing limits full), then leaves each
// checked refilling limit with at most the state that holds nothing at
// req.Until (bucket.EmptyTick): a limit already emptier keeps its state.
func Penalize(r *Record, req *PenaltyRequest) {
	br := &req.Bucket
	Prepare(r, br, req.Now)
	at := r.Refilled // the instant of the states: req.Now, or later if another request was dated later
	for i := range br.Limits {
		lr := &br.Limits[i]
		j := r.Find(lr.Name)
		if !lr.Check || !lr.Params.Refills() || j < 0 {
			continue
		}
		l := &r.Limits[j]
		empty := bucket.EmptyTick(req.Until, l.Params)
		if bucket.FullTick(l.State, l.Params, at).Cmp(empty) < 0 {
			l.State = bucket.AtTick(empty, l.Params, at)
		}
	}
}

// ResetRequest refills limits of one bucket to capacity: what an operator
// asks to lift a penalty, or to undo consumption that should not have
// counted.
type ResetRequest struct {
	Now int64 // Unix milliseconds
	// Bucket lists every limit in effect, adopted as Consume adopts them;
	// those with Check set (refilling limits only: a concurrency or
	// reserved limit is given back by ending its leases) are refilled,
	// their debt and any penalty gone. Amounts are ignored.
	Bucket BucketRequest
	// Event, if not nil, is appended to the audit log in the same atomic
	// step as the refill (model.ActionLimitReset).
	Event *model.AuditEvent
}

// Reset applies req to r: it prepares r at req.Now as Consume does
// (refill, adopt parameters, add missing limits full), then sets each
// checked refilling limit full.
func Reset(r *Record, req *ResetRequest) {
	br := &req.Bucket
	Prepare(r, br, req.Now)
	for i := range br.Limits {
		lr := &br.Limits[i]
		j := r.Find(lr.Name)
		if !lr.Check || !lr.Params.Refills() || j < 0 {
			continue
		}
		r.Limits[j].State = bucket.Full(r.Limits[j].Params)
	}
}
