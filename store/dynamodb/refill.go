package dynamodb

import (
	"context"

	"github.com/tollgate-rl/tollgate/store"
)

// refillShare is how much of a limit's capacity refill must have earned
// since the item's refill time before a proactive refill writes it.
const refillShare = 10 // percent

// Refill brings one bucket item's stored balances up to now, if refill has
// earned at least a tenth of some rate limit's capacity since the item was
// last refilled. Hot buckets are mostly written by speculative debits,
// which never refill; their stored balance then lags the true one until a
// speculative debit fails and falls back to a read and a normal write.
// Refilling them ahead keeps their acquires on the one-write fast path.
//
// The write is a normal write without debit, guarded like any other by the
// item's refill time and version, so it never double-refills against
// clients: if another writer gets in first, Refill does nothing. It
// reports whether it wrote.
func (s *Store) Refill(ctx context.Context, ns string, k store.BucketKey, shard int, now int64) (bool, error) {
	t := &target{key: k, shard: shard}
	old, err := s.getItem(ctx, ns, t)
	if err != nil || old == nil {
		return false, err
	}
	rec, err := decodeRecord(old)
	if err != nil {
		return false, err
	}
	if !worthRefilling(rec, now) {
		return false, nil
	}
	t.shards = shardCount(old)
	// The request names every stored limit at its stored parameters, so
	// nothing is reconfigured, and debits nothing.
	t.req.Key = k
	for _, l := range rec.Limits {
		t.req.Limits = append(t.req.Limits, store.LimitRequest{Name: l.Name, Params: l.Params})
	}
	granted, retry, err := s.writeOne(ctx, ns, t, now, old)
	return granted && retry == nil && err == nil, err
}

// worthRefilling reports whether refill since rec's refill time has earned
// refillShare of the capacity of some rate limit not yet full.
func worthRefilling(rec *store.Record, now int64) bool {
	elapsed := now - rec.Refilled
	if elapsed <= 0 {
		return false
	}
	for _, l := range rec.Limits {
		if hidden(l.Name) || l.Params.Amount == 0 || l.State.Tokens >= l.Params.Capacity {
			continue
		}
		// credit = elapsed*Amount/Period >= Capacity*share/100, without
		// overflow for realistic values (both sides fit in float64).
		if float64(elapsed)*float64(l.Params.Amount)/float64(l.Params.Period) >= float64(l.Params.Capacity)*refillShare/100 {
			return true
		}
	}
	return false
}

// RefillHot refills (see Refill), at now, every bucket item that changes
// show written more than once: the hot ones. It returns how many it wrote;
// an error stops it, costing only the optimisation.
func (s *Store) RefillHot(ctx context.Context, changes []store.Change, now int64) (int, error) {
	type itemID struct {
		ns    string
		key   store.BucketKey
		shard int
	}
	writes := map[itemID]int{}
	var order []itemID
	for _, c := range changes {
		id := itemID{c.NS, c.Key, c.Shard}
		if writes[id]++; writes[id] == 2 {
			order = append(order, id)
		}
	}
	n := 0
	for _, id := range order {
		wrote, err := s.Refill(ctx, id.ns, id.key, id.shard, now)
		if err != nil {
			return n, err
		}
		if wrote {
			n++
		}
	}
	return n, nil
}
