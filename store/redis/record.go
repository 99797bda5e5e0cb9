package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/internal/codec"
)

// A bucket's hash read whole, for the rare writes that need Go's
// arithmetic on the record (new parameters, penalties, resets): the
// record is read, changed by the store package's helpers as every backend
// changes it, and written back by luaRewrite on condition that no limit
// changed meanwhile.

// snapshot is a bucket's hash as read: its limits' fields, and the record
// they make.
type snapshot struct {
	fields map[string]string // "p|...", "v|..." and "a|..." only
	rec    *store.Record     // nil: no bucket
}

// readBucket reads one bucket's hash.
func (s *Store) readBucket(ctx context.Context, key string) (snapshot, error) {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	m, err := s.c.Do(ctx, s.c.B().Hgetall().Key(key).Build()).AsStrMap()
	if err != nil {
		return snapshot{}, fmt.Errorf("redis: read bucket: %w", err)
	}
	return snapshotOf(m)
}

// snapshotOf makes the record of a bucket's hash: each limit's state at
// the hash's time "r", as stored (not refilled).
func snapshotOf(m map[string]string) (snapshot, error) {
	snap := snapshot{fields: make(map[string]string, len(m))}
	if len(m) == 0 {
		return snap, nil
	}
	r, _ := strconv.ParseInt(m["r"], 10, 64)
	rec := &store.Record{Refilled: r}
	for f, sig := range m {
		name, ok := strings.CutPrefix(f, "p|")
		if !ok {
			continue
		}
		v, ok := m["v|"+name]
		if !ok {
			return snap, fmt.Errorf("redis: bucket limit %q has parameters and no number", name)
		}
		p, err := parseSig(sig)
		if err != nil {
			return snap, err
		}
		var a int64
		if as, ok := m["a|"+name]; ok {
			if a, err = strconv.ParseInt(as, 10, 64); err != nil {
				return snap, fmt.Errorf("redis: bucket limit %q anchored at %q", name, as)
			}
			snap.fields["a|"+name] = as
		}
		st, err := stateOf(v, a, p, r)
		if err != nil {
			return snap, err
		}
		snap.fields[f], snap.fields["v|"+name] = sig, v
		rec.Limits = append(rec.Limits, store.LimitState{Name: name, Params: p, State: st})
	}
	snap.rec = rec
	return snap, nil
}

// ReadBuckets implements store.Buckets: one HGETALL per bucket, in one
// round trip.
func (s *Store) ReadBuckets(ctx context.Context, ns string, keys []store.BucketKey) ([]*store.Record, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	cmds := make(rueidis.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = s.c.B().Hgetall().Key(s.keys.bucket(ns, k.Entity, k.Resource)).Build()
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	out := make([]*store.Record, len(keys))
	for i, res := range s.c.DoMulti(ctx, cmds...) {
		m, err := res.AsStrMap()
		if err != nil {
			return nil, fmt.Errorf("redis: read buckets: %w", err)
		}
		snap, err := snapshotOf(m)
		if err != nil {
			return nil, err
		}
		out[i] = snap.rec
	}
	return out, nil
}

var rewriteScript = rueidis.NewLuaScript(luaRewrite)

// luaRewrite writes a bucket's record as Go changed it, if its limits are
// still as read. KEYS: the bucket, the namespace's bucket index, and, with
// an event, the audit hash and its two indexes. ARGV: the index member,
// the number of fields read and those fields and values, the number of
// fields to write and those, the expiry (ms from now; -1: none), and the
// event's id and JSON ("" for no event).
const luaRewrite = luaAppendEvent + `
local a = 2
local n = tonumber(ARGV[a]); a = a + 1
local want = {}
for i = 1, n do want[ARGV[a]] = ARGV[a + 1]; a = a + 2 end
local have = redis.call('HGETALL', KEYS[1])
local seen = 0
for i = 1, #have, 2 do
  local f = have[i]
  local kind = string.sub(f, 1, 2)
  if kind == 'p|' or kind == 'v|' or kind == 'a|' then
    if want[f] ~= have[i + 1] then return 0 end
    seen = seen + 1
  end
end
if seen ~= n then return 0 end
local fresh = #have == 0
local m = tonumber(ARGV[a]); a = a + 1
local set = {}
for i = 1, m do set[#set + 1] = ARGV[a]; set[#set + 1] = ARGV[a + 1]; a = a + 2 end
if #set > 0 then redis.call('HSET', KEYS[1], unpack(set)) end
local ttl = tonumber(ARGV[a]); a = a + 1
if ttl < 0 then redis.call('PERSIST', KEYS[1]) elseif #set > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[a - 1]) end
if fresh and #set > 0 then redis.call('ZADD', KEYS[2], 0, ARGV[1]) end
if ARGV[a] ~= '' then append_event(KEYS[3], KEYS[4], KEYS[5], ARGV[a], ARGV[a + 1]) end
return 1
`

// maxRewrites bounds the rounds of a rewrite that other writers keep
// changing under it.
const maxRewrites = 20

// rewrite reads bucket k, lets change modify its record (a new one, at
// now, if there is none) and writes it back, with event if not nil, in
// one step conditioned on the limits being as read; it retries when
// another writer got there first.
func (s *Store) rewrite(ctx context.Context, ns string, k store.BucketKey, now int64, event *model.AuditEvent, change func(*store.Record)) error {
	key := s.keys.bucket(ns, k.Entity, k.Resource)
	for range maxRewrites {
		snap, err := s.readBucket(ctx, key)
		if err != nil {
			return err
		}
		rec := snap.rec
		if rec == nil {
			rec = store.NewRecord(now)
		}
		change(rec)
		keys := []string{key, s.keys.buckets(ns), s.keys.audit(ns), s.keys.auditAll(ns)}
		args := []string{indexMember(k), strconv.Itoa(len(snap.fields))}
		for f, v := range snap.fields {
			args = append(args, f, v)
		}
		set, ttl := s.recordFields(rec, now)
		args = append(args, strconv.Itoa(len(set)/2))
		args = append(args, set...)
		args = append(args, strconv.FormatInt(ttl, 10))
		if event != nil {
			js, err := encoded(codec.EncodeEvent(*event))
			if err != nil {
				return err
			}
			keys = append(keys, s.keys.auditOf(ns, event.Entity))
			args = append(args, event.ID, js)
		} else {
			keys = append(keys, key) // unused
			args = append(args, "", "")
		}
		cctx, cancel := s.callContext(ctx)
		ok, err := rewriteScript.Exec(cctx, s.c, keys, args).AsInt64()
		cancel()
		if err != nil {
			return fmt.Errorf("redis: write bucket: %w", err)
		}
		if ok == 1 {
			return nil
		}
	}
	return fmt.Errorf("redis: write bucket %s/%s: changed by others %d times in a row", k.Entity, k.Resource, maxRewrites)
}

// recordFields returns the hash fields of rec (its limits' parameters and
// numbers, "r", "cu", "dl") and its expiry in ms from now (-1: none).
func (s *Store) recordFields(rec *store.Record, now int64) ([]string, int64) {
	set := make([]string, 0, 6*len(rec.Limits)+6)
	cu, dl := 0, int64(0)
	for _, l := range rec.Limits {
		set = append(set, "p|"+l.Name, paramsSig(l.Params))
		set = storedFields(set, l.Name, l.State, l.Params, rec.Refilled)
		if !l.Params.Refills() {
			if l.State.Tokens < l.Params.Capacity {
				cu++
			}
		} else {
			dl = max(dl, bucket.FullAt(bucket.FullTick(l.State, l.Params, rec.Refilled), l.Params))
		}
	}
	set = append(set, "r", strconv.FormatInt(rec.Refilled, 10), "cu", strconv.Itoa(cu), "dl", strconv.FormatInt(dl, 10))
	if cu > 0 || dl > 9e15 {
		return set, -1
	}
	return set, max(dl-max(now, rec.Refilled), 0) + s.opts.bucketTTL + 1
}

// reconfigure adopts br's parameters in its bucket (store.Prepare), so
// that the acquire script finds them as it expects.
func (s *Store) reconfigure(ctx context.Context, ns string, br *store.BucketRequest, now int64) error {
	return s.rewrite(ctx, ns, br.Key, now, nil, func(r *store.Record) {
		probe := *br
		probe.Limits = append([]store.LimitRequest(nil), br.Limits...)
		store.Prepare(r, &probe, now)
	})
}

// Penalize implements store.Buckets (store.Penalize on the record).
func (s *Store) Penalize(ctx context.Context, ns string, req *store.PenaltyRequest) error {
	return s.rewrite(ctx, ns, req.Bucket.Key, req.Now, req.Event, func(r *store.Record) { store.Penalize(r, req) })
}

// Reset implements store.Buckets (store.Reset on the record, with its
// event in the same step).
func (s *Store) Reset(ctx context.Context, ns string, req *store.ResetRequest) error {
	return s.rewrite(ctx, ns, req.Bucket.Key, req.Now, req.Event, func(r *store.Record) { store.Reset(r, req) })
}
