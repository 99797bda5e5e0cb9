package tollgate

import (
	"context"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// onlySlots reports whether every exceeded limit among sts is a
// concurrency or reserved one (and at least one is exceeded): a refusal
// that only a release can cure.
func onlySlots(sts []model.Status) bool {
	found := false
	for i := range sts {
		if !sts[i].Denies() {
			continue
		}
		if sts[i].Waits == "" {
			return false // a rate limit: refill decides
		}
		found = true
	}
	return found
}

// slotRetry sets the wait of the exceeded concurrency and reserved limits
// of the first bucket of d's request that has any, in sts (d's statuses),
// to the time until the earliest expiry among the leases holding them
// (model.WaitsExpiry), when the bucket's lease records account for every
// token in use. Every lease holding such tokens has a record, of its own
// entity and resource; holders this lookup cannot see (descendants' leases
// on a cascade ancestor, records beyond one page or that the store's index
// has not caught up with), or that expired already and await a reconciler,
// leave the limit as setRetry left it (model.WaitsRelease): its tokens may
// come back at any time. So does a store failure: the refusal stands
// without it.
//
// It costs one page of listing, on a refusal by such limits alone: never on
// the grant path.
func (l *Limiter) slotRetry(ctx context.Context, d *leaseData, sts []model.Status) {
	k := 0
	for i := range d.req.Buckets {
		b := &d.req.Buckets[i]
		first := k
		k += len(b.Limits)
		if !anyExceeded(sts[first:k]) {
			continue
		}
		q := store.LeaseQuery{Entity: b.Key.Entity, Resource: b.Key.Resource, Limit: store.MaxLeasePage}
		recs, next, err := l.store.ListLeases(ctx, d.ns, q)
		if err != nil || next != "" {
			return
		}
		for j := range b.Limits {
			s, lr := &sts[first+j], &b.Limits[j]
			if !s.Denies() {
				continue
			}
			held, earliest := holders(recs, b.Key, lr.Name)
			if held >= lr.Params.Capacity-lr.Observed.Tokens && earliest > d.req.Now {
				setWait(s, earliest-d.req.Now)
				s.Waits = model.WaitsExpiry
			}
		}
		return
	}
}

// anyExceeded reports whether a status of sts denies (exceeded, not in
// shadow).
func anyExceeded(sts []model.Status) bool {
	for i := range sts {
		if sts[i].Denies() {
			return true
		}
	}
	return false
}

// holders returns the millitokens of limit that recs hold in bucket key,
// and the earliest expiry (Unix ms) among the records holding any: 0 when
// none of them expires.
func holders(recs []store.LeaseRecord, key store.BucketKey, limit string) (held, earliest int64) {
	for i := range recs {
		rec := &recs[i]
		n := heldBy(rec, key, limit)
		if n <= 0 {
			continue
		}
		held = saturatingAdd(held, n)
		if rec.Expires > 0 && (earliest == 0 || rec.Expires < earliest) {
			earliest = rec.Expires
		}
	}
	return held, earliest
}

// heldBy returns the millitokens of limit that rec took from bucket key.
func heldBy(rec *store.LeaseRecord, key store.BucketKey, limit string) int64 {
	for _, b := range rec.Buckets {
		if b.Key != key {
			continue
		}
		for _, ll := range b.Limits {
			if ll.Name == limit && !ll.Params.Refills() {
				return ll.Amount
			}
		}
	}
	return 0
}
