package dynamodb

import (
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// Bucket expiry (DESIGN 5, attribute ttl).
//
// A bucket item's ttl, in Unix seconds, is never earlier than the moment
// refill alone brings every limit of the item to capacity, plus the bucket
// TTL (WithBucketTTL). So an item past its ttl holds a full bucket, and a
// full bucket answers every request exactly as a missing one does (a
// missing bucket is created full): DynamoDB may delete it whenever its TTL
// process gets round to it, and until then every read path already treats
// it as absent, with no clock comparison. Only the speculative write, which
// does not refill, tests ttl in its condition, as DESIGN 5 asks.
//
// The bound is kept as writes land:
//   - a create or a normal write computes it from the state it writes (see
//     expiry); a normal write moves it relative to what it read, so that
//     speculative debits landing in between keep their share;
//   - a speculative debit of a rate limit postpones the full time by at
//     most the time refill takes to earn the debit back, and adds that;
//   - a debit of a concurrency limit (which never refills) and a positive
//     delta (debt, which deltas cannot time: they do not carry the rate)
//     set ttlNever; the next normal write computes the bound again;
//   - refunds only bring the full time nearer, and leave ttl alone.
//
// An expired item that is written again gets a ttl in the future, and
// DynamoDB does not delete an item whose ttl was moved past the present
// before its deletion.
//
// A bucket with a concurrency limit expires only after a normal write finds
// every slot free; its acquires are speculative writes, so in practice such
// buckets stay. They are few: one per entity and resource holding a
// concurrency limit.

// ttlNever is the ttl of an item that must not expire: 2100-01-01.
const ttlNever = 4102444800

// DefaultBucketTTL is how long a bucket item outlives the moment it is full
// again, by default.
const DefaultBucketTTL = time.Hour

// WithBucketTTL sets how long after refill has filled a bucket its items
// expire (default DefaultBucketTTL; DynamoDB deletes expired items within
// about two days). An expired bucket is a full one, so expiry never changes
// a verdict: it only frees storage. The next acquire of an expired bucket
// costs what the first acquire of a new one does. A negative d is invalid.
func WithBucketTTL(d time.Duration) Option {
	return func(s *Store) {
		if d < 0 {
			s.invalid("WithBucketTTL", d, "must not be negative")
			return
		}
		s.bucketTTL = d.Milliseconds()
	}
}

// expiry returns the ttl of an item holding rec: when every limit is full
// again, plus the bucket TTL, rounded up to a second; ttlNever if some limit
// never fills (a concurrency slot is taken).
func (s *Store) expiry(rec *store.Record) int64 {
	at := rec.Refilled
	for _, l := range rec.Limits {
		if hidden(l.Name) || l.State.Tokens >= l.Params.Capacity {
			continue
		}
		if l.Params.Amount == 0 {
			return ttlNever
		}
		d := bucket.RetryAfter(l.State, l.Params, l.Params.Capacity)
		if d == bucket.Never || d > ttlNever*1000-at {
			return ttlNever
		}
		at = max(at, rec.Refilled+d)
	}
	return min(ceilSeconds(at+s.bucketTTL), ttlNever)
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
	d := bucket.RetryAfter(bucket.State{}, bucket.Params{Capacity: amount, Amount: p.Amount, Period: p.Period}, amount)
	if d == bucket.Never {
		return ttlNever
	}
	return min(ceilSeconds(d), ttlNever)
}

// speculativeExpiry adds to e what a speculative debit of br does to the
// item's ttl, and the condition that the item has not expired at now. The
// condition also requires a ttl, so that a plain ADD is safe (an ADD to a
// missing ttl would set one near 1970): an item without one (written before
// expiry existed) takes the normal path once, which sets it. On DynamoDB
// Local this form costs measurably less than if_not_exists and an OR.
func speculativeExpiry(e *expr, br *store.BucketRequest, now int64) {
	var postpone int64
	for _, lr := range br.Limits {
		switch {
		case hidden(lr.Name) || lr.Amount <= 0:
		case lr.Params.Amount == 0:
			postpone = ttlNever
		default:
			postpone = max(postpone, refillTime(lr.Amount, lr.Params))
		}
	}
	e.where("%s > %v", attrTTL, num(now/1000))
	switch {
	case postpone >= ttlNever:
		e.setN(attrTTL, ttlNever)
	case postpone > 0:
		e.addN(attrTTL, postpone)
	}
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

// normalExpiry adds to e the ttl of a normal write that leaves the item
// holding debited, where the stored item was old (rec decoded). A finite
// ttl relies on every concurrency limit being free: the write is
// conditioned on their stored balances not having dropped since the read,
// as a concurrent speculative debit of one would make that ttl wrong.
func (s *Store) normalExpiry(e *expr, old item, rec, debited *store.Record) {
	ttl := s.expiry(debited)
	if ttl < ttlNever {
		for _, l := range rec.Limits {
			if l.Params.Amount == 0 && !hidden(l.Name) {
				e.where("%s >= %v", limitAttr(l.Name, fieldTokens), num(l.State.Tokens))
			}
		}
	}
	oldTTL, err := getN(old, attrTTL)
	switch {
	case err != nil:
		// No ttl yet: SET it, unless a speculative write sets one first.
		e.where("attribute_not_exists(%s)", attrTTL, nil)
		e.setN(attrTTL, ttl)
	case ttl != oldTTL:
		e.addN(attrTTL, ttl-oldTTL)
	}
}

// deltaExpiry adds to e what deltas do to the item's ttl: a debt postpones
// the full time by the time refill takes to earn it. A delta may land on
// any shard of a bucket split since its debit, so that time is taken at
// the rate of the smallest shard there can be. Without the parameters, the
// item must not expire until a normal write times it again.
func (s *Store) deltaExpiry(e *expr, ds []store.Delta) {
	var postpone int64
	for _, d := range ds {
		switch {
		case d.Amount <= 0:
		case d.Params.Period <= 0 || d.Params.Amount <= 0:
			postpone = ttlNever
		default:
			p := d.Params
			if s.writesPerSecond > 0 {
				p = shardParams(p, s.maxShards)
			}
			postpone = max(postpone, refillTime(d.Amount, p))
		}
	}
	addExpiry(e, postpone)
}
