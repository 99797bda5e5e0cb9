package dynamodb

import (
	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// Bucket expiry (docs/dynamodb.md 4.11, attribute ttl).
//
// A bucket item's ttl, in Unix seconds, is never earlier than the moment
// refill alone brings every limit of the item to capacity, plus the bucket
// TTL (WithBucketTTL); or it is ttlNever, once a concurrency slot has been
// taken (a slot never refills). So an item past its ttl holds a full
// bucket, and a full bucket answers every request exactly as a missing one
// does (a missing bucket is created full): DynamoDB may delete it whenever
// its TTL process gets round to it, and until then every read already
// treats it as absent, with no clock comparison.
//
// The ttl never decreases (a creation sets it; every other write adds to
// it or sets ttlNever), and each write keeps the bound for the limits it
// changes:
//   - a limit whose new full tick the write knows (a constant path:
//     rebased, or found full) needs its full time plus the bucket TTL; a
//     limit that the write moved by an addition, the greatest full time
//     its path allows (the path's upper pin, plus the addition). The
//     write adds what the image's ttl lacks for that, on condition that
//     the stored ttl is at least the image's: as the ttl never decreases,
//     only a re-created item can fail that, and it is then planned again;
//   - a limit debited without a check (no upper pin) moves its full time
//     by at most the time refill takes to earn the debit, which is added;
//   - a concurrency debit sets ttlNever;
//   - refunds only bring full times nearer, and leave ttl alone; a debt
//     (a positive delta) adds the time refill takes to earn it.
//
// An item not known to this process (a guessed image, serve) is written
// with its ttl SET to what the write needs, on condition that the stored
// one is not greater: a raise, never a decrease. A schema 1 item without a
// ttl gets one, computed from the whole item, on condition it still has
// none.
//
// So a hot bucket's ttl stays near now plus the time it takes to fill plus
// the bucket TTL, whatever its write rate. An expired item that is written
// again gets a ttl in the future, and DynamoDB does not delete an item
// whose ttl was moved past the present before its deletion.
//
// A bucket with a concurrency limit keeps ttlNever once a slot has been
// taken: such buckets are few (one per entity and resource holding a
// concurrency limit) and are deleted with their entity.

// ttlNever is the ttl of an item that must not expire: 2100-01-01.
const ttlNever = 4102444800

// expiry returns the ttl of an item whose image is img: when every limit
// is full again (not before its rf), plus the bucket TTL, rounded up to a
// second; ttlNever if a concurrency slot is taken.
func (en *engine) expiry(img *image) int64 {
	at := img.rf
	for i := range img.limits {
		l := &img.limits[i]
		switch {
		case hidden(l.name):
		case !l.refills():
			if l.tk < l.params.Capacity {
				return ttlNever
			}
		default:
			at = max(at, bucket.FullAt(img.fullTick(l), l.params))
		}
	}
	return en.ttlAfter(at)
}

// ttlAfter returns the ttl of an item full at the Unix ms full.
func (en *engine) ttlAfter(full int64) int64 {
	return min(ceilSeconds(min(full, ttlNever*1000)+en.bucketTTL), ttlNever)
}

// expiryNeeds returns what the limits a simulated write changes need of
// the item's ttl: the latest full time (ms) they can have after it, if
// known; the time to earn debits made without a check (s); whether a
// concurrency slot stays taken.
func (sim *simulation) expiryNeeds() (full int64, hasFull bool, postpone int64, never bool) {
	for j := range sim.paths {
		p := &sim.paths[j]
		switch {
		case !p.changed():
		case !p.refills():
			never = never || p.debit > 0 || p.constant && p.kt < p.params.Capacity
		case p.constant && !p.kFull:
			full, hasFull = max(full, bucket.FullAt(p.k, p.params)), true
		case p.constant:
		case p.hasHi:
			full, hasFull = max(full, bucket.FullAt(p.hi.Add(p.off), p.params)), true
		default:
			postpone = max(postpone, ceilSeconds(bucket.FullAt(p.off, p.params)))
		}
	}
	for _, i := range sim.extras {
		l := &sim.img.limits[i]
		full, hasFull = max(full, bucket.FullAt(sim.img.fullTick(l), l.params)), true
	}
	return full, hasFull, postpone, never
}

// ttlExpr adds to e the ttl update of a write planned from img (see the
// rules above), and returns it.
func (en *engine) ttlExpr(e *expr, img *image, sim *simulation) ttlOp {
	full, hasFull, postpone, never := sim.expiryNeeds()
	var need int64
	if hasFull {
		need = en.ttlAfter(full)
	}
	switch {
	case never:
		e.setN(attrTTL, ttlNever)
		return ttlOp{set: true, v: ttlNever}
	case img.guessed:
		if !hasFull {
			return ttlOp{}
		}
		e.where("%s <= %v", attrTTL, num(need))
		e.setN(attrTTL, need)
		return ttlOp{set: true, v: need}
	case !img.hasTTL:
		v := max(need, en.expiry(sim.after(img)))
		e.where("attribute_not_exists(%s)", attrTTL, nil)
		e.setN(attrTTL, v)
		return ttlOp{set: true, v: v}
	case img.ttl >= ttlNever:
		if hasFull {
			e.where("%s >= %v", attrTTL, num(ttlNever))
		}
		return ttlOp{}
	}
	x := max(postpone, need-img.ttl, 0)
	x = min(x, ttlNever-img.ttl)
	if hasFull {
		e.where("%s >= %v", attrTTL, num(img.ttl))
	}
	if x == 0 {
		return ttlOp{}
	}
	e.addN(attrTTL, x)
	return ttlOp{add: true, v: x}
}

// ceilSeconds converts Unix milliseconds to seconds, rounding up.
func ceilSeconds(ms int64) int64 {
	if ms <= 0 {
		return 0
	}
	return (ms + 999) / 1000
}

// refillTime is an upper bound of how far a debit of amount postpones a
// rate limit's full time: the time refill takes to earn amount, in whole
// seconds rounded up; ttlNever when that is beyond any clock.
func refillTime(amount int64, p bucket.Params) int64 {
	if !p.Window.IsZero() {
		// Windows to earn amount, each at most MaxMillis long.
		windows := (amount + p.Amount - 1) / p.Amount
		if windows > ttlNever*1000/p.Window.MaxMillis() {
			return ttlNever
		}
		return min(ceilSeconds(windows*p.Window.MaxMillis()), ttlNever)
	}
	d := bucket.RetryAfter(bucket.State{}, bucket.Params{Capacity: amount, Amount: p.Amount, Period: p.Period}, amount)
	if d == bucket.Never {
		return ttlNever
	}
	return min(ceilSeconds(d), ttlNever)
}

// addExpiry adds to e the postponement of the item's ttl by postpone
// seconds (ttlNever: to ttlNever).
func addExpiry(e *expr, postpone int64) {
	if postpone <= 0 {
		return
	}
	ttl := e.name(attrTTL)
	switch {
	case postpone >= ttlNever:
		e.set = append(e.set, ttl+" = "+e.value(num(ttlNever)))
	default:
		// An item without ttl (written before expiry existed) gets a
		// far-future one, never a time near 1970.
		e.set = append(e.set, ttl+" = if_not_exists("+ttl+", "+e.value(num(ttlNever))+") + "+e.value(num(postpone)))
	}
}

// deltaExpiry adds to e what deltas, written in forms, do to the item's
// ttl: a debt postpones the full time by at most the time refill takes to
// earn it, at the item's rate (which the delta's condition pins); a debt
// of a concurrency limit never refills.
func deltaExpiry(e *expr, ds []store.Delta, forms []deltaForm) {
	var postpone int64
	for i, d := range ds {
		switch {
		case d.Amount <= 0:
		case !forms[i].params.Refills():
			postpone = ttlNever
		default:
			postpone = max(postpone, refillTime(d.Amount, forms[i].params))
		}
	}
	addExpiry(e, postpone)
}

// ttlOp is what a write does to the item's ttl.
type ttlOp struct {
	set, add bool
	v        int64
}

func (o ttlOp) apply(img *image) {
	switch {
	case o.set:
		img.ttl, img.hasTTL = o.v, true
	case o.add:
		img.ttl += o.v
	}
}
