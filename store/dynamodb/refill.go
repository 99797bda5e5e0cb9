package dynamodb

import (
	"context"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// Proactive refill.
//
// A hot bucket item is written mostly by speculative debits, which never
// refill it: its stored balance falls while the true one (stored plus what
// refill has earned since the item's refill time) does not, until a debit
// finds the stored balance short, fails its condition and falls back to a
// normal write (two calls instead of one). The upkeep refills such an item
// ahead of that, from what the stream shows of it:
//
//   - the observed consumption rate of each limit: the net consumed
//     counter's rise (tc) per second over the item's recent writes
//     (Heat.rate);
//   - the item is due when, for some rate limit, its stored balance will
//     not cover what that rate consumes before the next pass (the
//     lookahead), and refill has earned at least one mean acquire's worth
//     of it since the item's refill time: less would not let one more
//     acquire through on the fast path, and is not worth a write.
//
// The decision is made first on the newest image the stream shows, then
// again on a consistent read of the item just before the write.

// refillDue reports whether rec (a bucket item's stored state, every limit
// at its stored, per-shard parameters) is due a refill at `at`, given its
// pace r and lookahead ms until the next pass (see above).
func refillDue(rec *store.Record, at, lookahead int64, r itemRate) bool {
	for _, l := range rec.Limits {
		if hidden(l.Name) || l.Params.Amount <= 0 {
			continue
		}
		perSec := r.consumed[l.Name]
		if perSec <= 0 {
			continue
		}
		if float64(l.State.Tokens) >= perSec*float64(lookahead)/1000 {
			continue // the stored balance covers the lookahead
		}
		earned := bucket.Refill(l.State, l.Params, at-rec.Refilled).Tokens - l.State.Tokens
		if earned > 0 && earned >= r.debit[l.Name] {
			return true
		}
	}
	return false
}

// refill brings one bucket item's stored balances up to at, if it is due
// (refillDue, on a consistent read of the item). It reports whether it
// wrote.
func (s *Store) refill(ctx context.Context, ns string, k store.BucketKey, shard int, at, lookahead int64, r itemRate) (bool, error) {
	t := &target{key: k, shard: shard}
	old, err := s.getItem(ctx, ns, t)
	if err != nil || old == nil {
		return false, err
	}
	return s.refillFrom(ctx, ns, t, old, at, lookahead, r)
}

// refillFrom is refill from old, the item as read.
//
// The write is a normal write without debit, guarded like a client's by
// the item's refill time and version: if a client's normal write (which
// refills too) or a refund lands between the read and this write, the
// write fails its condition and refillFrom does nothing, so it never
// refills the same time twice. Speculative debits in between commute with
// it (they move the balance by ADD, and leave rf alone). Every stored limit
// is named at its stored parameters, those of its shard when the bucket is
// split, so nothing is reconfigured.
func (s *Store) refillFrom(ctx context.Context, ns string, t *target, old item, at, lookahead int64, r itemRate) (bool, error) {
	rec, err := decodeRecord(old)
	if err != nil {
		return false, err
	}
	if !refillDue(rec, at, lookahead, r) {
		return false, nil
	}
	t.shards = shardCount(old)
	t.req = store.BucketRequest{Key: t.key}
	for _, l := range rec.Limits {
		t.req.Limits = append(t.req.Limits, store.LimitRequest{Name: l.Name, Params: l.Params})
	}
	wrote, retry, err := s.writeOne(ctx, ns, t, at, old)
	return wrote && retry == nil && err == nil, err
}
