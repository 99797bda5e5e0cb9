package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/internal/codec"
)

// A durable lease is a hash: "rec", the record as JSON; "ver", its
// version; "ended", "1" for a tombstone; "keep", a tombstone's keep-until;
// "exp", its expiry (0: never). Open leases are indexed by id in the
// namespace's lease index and its entity's, and, when they expire, by
// expiry in the expiry index (score: Unix ms, exact below 2^53). A
// tombstone is in no index and expires a minute after its keep-until.

// leaseArgs are the keys and arguments of a lease in luaConsume: the
// lease's hash, the three lease indexes and the three audit keys, then
// the values luaConsume reads.
type leaseArgs struct {
	keys []string
	args []string
}

// newLeaseArgs encodes req's lease and event for luaConsume.
func (s *Store) newLeaseArgs(ns string, req *store.ConsumeRequest) (*leaseArgs, error) {
	rec := req.Lease
	js, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("redis: lease record: %w", err)
	}
	evID, evJS, evEntity, err := eventArgs(req.Event)
	if err != nil {
		return nil, err
	}
	return &leaseArgs{
		keys: []string{s.keys.lease(ns, rec.ID), s.keys.leases(ns), s.keys.leasesOf(ns, rec.Entity), s.keys.leaseExpiries(ns),
			s.keys.audit(ns), s.keys.auditAll(ns), s.keys.auditOf(ns, evEntity)},
		args: []string{flag(req.ReusedID), strconv.FormatInt(req.Now, 10), string(js), strconv.FormatInt(rec.Version, 10),
			flag(rec.Ended()), strconv.FormatInt(rec.KeepUntil, 10), strconv.FormatInt(rec.Expires, 10), rec.ID, evID, evJS},
	}, nil
}

// eventArgs encodes an audit event (nil: none) for the scripts.
func eventArgs(ev *model.AuditEvent) (id, js, entity string, err error) {
	if ev == nil {
		return "", "", "", nil
	}
	js, err = encoded(codec.EncodeEvent(*ev))
	if err != nil {
		return "", "", "", err
	}
	return ev.ID, js, ev.Entity, nil
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// GetLease implements store.Leases.
func (s *Store) GetLease(ctx context.Context, ns, id string) (store.LeaseRecord, error) {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	js, err := s.c.Do(ctx, s.c.B().Hget().Key(s.keys.lease(ns, id)).Field("rec").Build()).ToString()
	if isNil(err) {
		return store.LeaseRecord{}, fmt.Errorf("lease %q: %w", id, model.ErrLeaseNotFound)
	}
	if err != nil {
		return store.LeaseRecord{}, fmt.Errorf("redis: get lease: %w", err)
	}
	return decodeLease(js)
}

func decodeLease(js string) (store.LeaseRecord, error) {
	var rec store.LeaseRecord
	if err := json.Unmarshal([]byte(js), &rec); err != nil {
		return rec, fmt.Errorf("redis: lease record: %w", err)
	}
	return rec, nil
}

var updateLeaseScript = rueidis.NewLuaScript(luaUpdateLease)

// luaUpdateLease replaces an open record of version ARGV[2]-1 with
// ARGV[1] (version ARGV[2], expiry ARGV[3]) and moves it in the expiry
// index. KEYS: the lease, the expiry index. Answers 1, or 0 (no record),
// -1 (a tombstone) or -2 (another version).
const luaUpdateLease = `
local have = redis.call('HMGET', KEYS[1], 'ver', 'ended')
if not have[1] then return 0 end
if have[2] ~= '0' then return -1 end
if tonumber(have[1]) ~= tonumber(ARGV[2]) - 1 then return -2 end
redis.call('HSET', KEYS[1], 'rec', ARGV[1], 'ver', ARGV[2], 'exp', ARGV[3])
if ARGV[3] == '0' then redis.call('ZREM', KEYS[2], ARGV[4]) else redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4]) end
return 1
`

// UpdateLease implements store.Leases.
func (s *Store) UpdateLease(ctx context.Context, ns string, rec store.LeaseRecord) error {
	js, err := json.Marshal(&rec)
	if err != nil {
		return fmt.Errorf("redis: lease record: %w", err)
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	n, err := updateLeaseScript.Exec(ctx, s.c, []string{s.keys.lease(ns, rec.ID), s.keys.leaseExpiries(ns)},
		[]string{string(js), strconv.FormatInt(rec.Version, 10), strconv.FormatInt(rec.Expires, 10), rec.ID}).AsInt64()
	switch {
	case err != nil:
		return fmt.Errorf("redis: update lease: %w", err)
	case n == 0:
		return fmt.Errorf("lease %q: %w", rec.ID, model.ErrLeaseNotFound)
	case n == -1:
		return fmt.Errorf("lease %q: ended: %w", rec.ID, model.ErrLeaseConflict)
	case n == -2:
		return fmt.Errorf("lease %q: not version %d: %w", rec.ID, rec.Version-1, model.ErrLeaseConflict)
	}
	return nil
}

// luaEndLease ends a lease as store.Leases.EndLease says, all or nothing.
// KEYS: the lease, the three lease indexes, the three audit keys, then
// the deltas' buckets. ARGV: the version, expired-by, now, the record's
// JSON as the ender holds it and the tombstone's ("" and "": delete the
// record), the keep-until, the event's id and JSON ("": none), the bucket
// TTL, the deltas (luaDeltaFns), then the lease's id. Answers 1, 0 (no
// record), -1 (a tombstone), -2 (another version), -3 (not expired by
// then), -4 (the stored record is not the ender's) or {2, the ordinal of
// a delta whose limit has other parameters}.
const luaEndLease = `
b_reset()
local have = redis.call('HMGET', KEYS[1], 'ver', 'ended', 'exp', 'rec')
if not have[1] then return 0 end
if have[2] ~= '0' then return -1 end
if have[1] ~= ARGV[1] then return -2 end
local by = tonumber(ARGV[2])
if by > 0 then
  local exp = tonumber(have[3])
  if exp == 0 or exp > by then return -3 end
end
if ARGV[4] ~= '' and ARGV[4] ~= have[4] then return -4 end
local ds, bad = d_read(KEYS, ARGV, 11, tonumber(ARGV[10]))
if bad then return {2, bad} end
b_ttl = tonumber(ARGV[9])
d_apply(ds)
b_flush()
local id = ARGV[11 + 5 * tonumber(ARGV[10])]
redis.call('ZREM', KEYS[2], id)
redis.call('ZREM', KEYS[3], id)
redis.call('ZREM', KEYS[4], id)
if ARGV[5] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('HSET', KEYS[1], 'rec', ARGV[5], 'ver', tonumber(have[1]) + 1, 'ended', '1', 'keep', ARGV[6])
  local left = tonumber(ARGV[6]) - tonumber(ARGV[3])
  if left < 1 then left = 1 end
  redis.call('PEXPIRE', KEYS[1], string.format('%.0f', left + 60000))
end
if ARGV[7] ~= '' then append_event(KEYS[5], KEYS[6], KEYS[7], ARGV[7], ARGV[8]) end
return 1
`

// EndLease implements store.Leases: one call of luaEndLease (after a read
// of the record when a tombstone is kept and e.Record is not given).
func (s *Store) EndLease(ctx context.Context, ns string, e store.LeaseEnding) error {
	params := make([]bucket.Params, len(e.Deltas))
	for i, d := range e.Deltas {
		params[i] = d.Params
	}
	if err := s.storedParams(ctx, ns, e.Deltas, params, func(p bucket.Params) bool { return p == bucket.Params{} }); err != nil {
		return err
	}
	for range maxRetries {
		rec := e.Record
		if e.KeepUntil > 0 && rec == nil {
			got, err := s.GetLease(ctx, ns, e.ID)
			if err != nil {
				return err
			}
			rec = &got
		}
		retry, err := s.endLease(ctx, ns, &e, rec, params)
		switch retry {
		case retryNone:
			return err
		case retryRecord:
			e.Record = nil // read it again
		case retryParams:
			// A limit's parameters changed since the debit: convert
			// the deltas with the stored ones.
			if err := s.storedParams(ctx, ns, e.Deltas, params, func(bucket.Params) bool { return true }); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("redis: end lease %q: the record or its limits kept changing (%d tries)", e.ID, maxRetries)
}

// Why an ending is tried again.
const (
	retryNone   = iota
	retryRecord // the record changed since it was read
	retryParams // a delta's limit has other parameters
)

// endLease makes one call of luaEndLease with rec, the record as read (for
// its tombstone), and the deltas converted with params, and says whether
// and why to try again.
func (s *Store) endLease(ctx context.Context, ns string, e *store.LeaseEnding, rec *store.LeaseRecord, params []bucket.Params) (retry int, err error) {
	var tomb, recJS string
	if e.KeepUntil > 0 {
		if rec.ID != e.ID || rec.Version != e.Version {
			return retryNone, fmt.Errorf("lease %q: version %d, not %d: %w", e.ID, rec.Version, e.Version, model.ErrLeaseConflict)
		}
		t := e.Tombstone(rec)
		b, err := json.Marshal(&t)
		if err != nil {
			return retryNone, fmt.Errorf("redis: lease record: %w", err)
		}
		tomb = string(b)
		if b, err = json.Marshal(rec); err != nil {
			return retryNone, fmt.Errorf("redis: lease record: %w", err)
		}
		recJS = string(b)
	}
	evID, evJS, evEntity, err := eventArgs(e.Event)
	if err != nil {
		return retryNone, err
	}
	entity := ""
	if rec != nil {
		entity = rec.Entity
	}
	keys := []string{s.keys.lease(ns, e.ID), s.keys.leases(ns), s.keys.leasesOf(ns, entity), s.keys.leaseExpiries(ns),
		s.keys.audit(ns), s.keys.auditAll(ns), s.keys.auditOf(ns, evEntity)}
	args := []string{strconv.FormatInt(e.Version, 10), strconv.FormatInt(e.ExpiredBy, 10), strconv.FormatInt(e.At, 10),
		recJS, tomb, strconv.FormatInt(e.KeepUntil, 10), evID, evJS, strconv.FormatInt(s.opts.bucketTTL, 10)}
	keys, args = s.deltasCall(keys, args, ns, e.Deltas, params)
	args = append(args, e.ID)
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	res := s.run(ctx, endLeaseScript, keys, args)
	if arr, err := res.ToArray(); err == nil && len(arr) > 0 {
		return retryParams, nil
	}
	n, err := res.AsInt64()
	switch {
	case err != nil:
		return retryNone, fmt.Errorf("redis: end lease: %w", err)
	case n == 0:
		return retryNone, fmt.Errorf("lease %q: %w", e.ID, model.ErrLeaseNotFound)
	case n == -1:
		return retryNone, fmt.Errorf("lease %q: ended: %w", e.ID, model.ErrLeaseConflict)
	case n == -2:
		return retryNone, fmt.Errorf("lease %q: not version %d: %w", e.ID, e.Version, model.ErrLeaseConflict)
	case n == -3:
		return retryNone, fmt.Errorf("lease %q: not expired by %d: %w", e.ID, e.ExpiredBy, model.ErrLeaseConflict)
	case n == -4:
		return retryRecord, nil
	}
	return retryNone, nil
}

// ListLeases implements store.Leases: ids from the namespace's index, the
// entity's, or the expiry index, then their records, filtered.
func (s *Store) ListLeases(ctx context.Context, ns string, q store.LeaseQuery) ([]store.LeaseRecord, string, error) {
	if err := q.Validate(); err != nil {
		return nil, "", err
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	var ids []string
	var err error
	switch {
	case q.ExpiredBy > 0:
		ids, err = s.c.Do(ctx, s.c.B().Zrangebyscore().Key(s.keys.leaseExpiries(ns)).Min("1").Max(strconv.FormatInt(q.ExpiredBy, 10)).Build()).AsStrSlice()
		slices.Sort(ids)
	case q.Entity != "":
		ids, err = s.rangeAfter(ctx, s.keys.leasesOf(ns, q.Entity), q.After)
	default:
		ids, err = s.rangeAfter(ctx, s.keys.leases(ns), q.After)
	}
	if err != nil {
		return nil, "", fmt.Errorf("redis: list leases: %w", err)
	}
	var out []store.LeaseRecord
	for len(ids) > 0 && len(out) < q.Limit {
		batch := ids[:min(len(ids), 256)]
		ids = ids[len(batch):]
		cmds := make(rueidis.Commands, len(batch))
		for i, id := range batch {
			cmds[i] = s.c.B().Hget().Key(s.keys.lease(ns, id)).Field("rec").Build()
		}
		for _, res := range s.c.DoMulti(ctx, cmds...) {
			js, err := res.ToString()
			if isNil(err) {
				continue
			}
			if err != nil {
				return nil, "", fmt.Errorf("redis: list leases: %w", err)
			}
			rec, err := decodeLease(js)
			if err != nil {
				return nil, "", err
			}
			if q.Selects(&rec) {
				out = append(out, rec)
				if len(out) == q.Limit {
					break
				}
			}
		}
	}
	next := ""
	if len(out) == q.Limit {
		next = out[len(out)-1].ID
	}
	return out, next, nil
}

// rangeAfter returns the members of a score-0 sorted set after after, in
// order.
func (s *Store) rangeAfter(ctx context.Context, key, after string) ([]string, error) {
	min := "-"
	if after != "" {
		min = "(" + after
	}
	return s.c.Do(ctx, s.c.B().Zrange().Key(key).Min(min).Max("+").Bylex().Build()).AsStrSlice()
}
