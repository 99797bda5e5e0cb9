package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Usage snapshots (store.UsageStore). A snapshot is a hash, under
// layout.usage(ns) + ":" + its id ("<window>|<entity>|<resource>|<start>",
// the start as 20 digits):
//
//	"c|<limit>"   the millitokens consumed of the limit (HINCRBY)
//	"n"           the acquires (HINCRBY)
//	"x"           the expiry, Unix ms, 0 for none: the greatest given
//	"s|<source>"  the Seq of the last increment applied from the source
//
// It is indexed twice, with members that are the listings' cursors
// (store.UsageQuery.UsageCursor), so that a listing is a ZRANGE BYLEX
// from its cursor: by entity ("<resource>#<start>" in
// layout.usage(ns) + "e:<window>|<entity>") and by resource
// ("<start>#<entity>" in layout.usage(ns) + "r:<window>|<resource>").
//
// Sums are Redis's own 64-bit integer arithmetic (HINCRBY), exact;
// the scripts never do arithmetic on a number, and compare the Seqs and
// expiries as strings, byte by byte (Lua's own string comparison follows
// the server's locale).
//
// A snapshot that expires is deleted by Redis at its expiry, but never
// sooner than usageKeep after its last write (Redis's clock need not be
// the one that dated it: a snapshot whose retention has passed by Redis's
// clock is still readable for a while, and a query hides it by its own
// Now). Its index entries, by that time too: layout.usage(ns) + "x" holds
// the ids of the snapshots that expire, scored by that time, and every
// AddUsage first deletes up to usageSweep of those whose time has come,
// with their index entries (as the memory backend's AddUsage sweeps). The
// indexes expire with the last of their snapshots, so that a namespace
// nobody writes any more leaves nothing behind; an index that holds a
// snapshot kept for ever is kept for ever.

const (
	// usageKeep is the least a snapshot is kept after its last write.
	usageKeep = time.Hour
	// usageSweep bounds the expired snapshots one AddUsage deletes.
	usageSweep = 64
	// usageChunk bounds the increments of one script call: a call of
	// AddUsage with more is several, each atomic (store.UsageStore allows
	// increments to be applied independently, in the order given).
	usageChunk = 128
	// usageLatest is the latest expiry given to a key (the end of the
	// year 9999), so that no retention overflows PEXPIREAT; the snapshot's
	// "x" keeps the one given.
	usageLatest int64 = 253402300799999
)

// usageSnapshot is the key of the snapshot of k; usageOfEntity and
// usageOfResource are the indexes; usageExpiries the snapshots that
// expire, by when their keys do.
func (l layout) usageSnapshot(ns string, k store.UsageKey) string {
	return l.usage(ns) + ":" + usageID(k)
}
func (l layout) usageOfEntity(ns string, w model.Window, entity string) string {
	return l.usage(ns) + "e:" + string(w) + "|" + entity
}
func (l layout) usageOfResource(ns string, w model.Window, resource string) string {
	return l.usage(ns) + "r:" + string(w) + "|" + resource
}
func (l layout) usageExpiries(ns string) string { return l.usage(ns) + "x" }

// usageID names a snapshot within its namespace.
func usageID(k store.UsageKey) string {
	return string(k.Window) + "|" + k.Entity + "|" + k.Resource + "|" + usageStart(k.Start)
}

// usageStart is a start as the indexes and cursors write it.
func usageStart(start int64) string { return fmt.Sprintf("%020d", start) }

// usageLayoutArgs are the arguments usage_layout reads: the prefixes of
// the snapshots and of the two indexes (to which the ids and the rest of
// the index names are appended), and the expiry index.
func (s *Store) usageLayoutArgs(ns string) []string {
	return []string{s.keys.usage(ns) + ":", s.keys.usage(ns) + "e:", s.keys.usage(ns) + "r:", s.keys.usageExpiries(ns)}
}

// usageDropArgs are the arguments of drop_usage_of after the entity: the
// layout, then the windows.
func (s *Store) usageDropArgs(ns string) []string {
	return append(s.usageLayoutArgs(ns), string(store.Hourly), string(store.Daily))
}

// luaUsage defines the Lua functions that read the layout and delete
// snapshots: usage_layout(i) reads usageLayoutArgs from ARGV[i];
// drop_snapshot deletes one snapshot with its index entries;
// drop_usage_of every snapshot of an entity in the windows given (as
// DeleteEntity does, as the other backends do), with its indexes. The keys
// are the namespace's, in the slot of the keys the script declares.
const luaUsage = `
local function usage_layout(i)
  return {snap = ARGV[i], ent = ARGV[i + 1], res = ARGV[i + 2], exp = ARGV[i + 3]}
end

local function drop_snapshot(u, w, e, r, s)
  local id = w .. '|' .. e .. '|' .. r .. '|' .. s
  redis.call('DEL', u.snap .. id)
  redis.call('ZREM', u.ent .. w .. '|' .. e, r .. '#' .. s)
  redis.call('ZREM', u.res .. w .. '|' .. r, s .. '#' .. e)
  redis.call('ZREM', u.exp, id)
end

local function drop_usage_of(u, e, windows)
  for _, w in ipairs(windows) do
    local index = u.ent .. w .. '|' .. e
    for _, m in ipairs(redis.call('ZRANGE', index, 0, -1)) do
      local r, s = string.match(m, '^([^#]*)#(.*)$')
      if r then drop_snapshot(u, w, e, r, s) end
    end
    redis.call('DEL', index)
  end
end
`

// luaAddUsage first deletes up to ARGV[8] snapshots whose keys' time came
// by ARGV[5] (the sweep), then applies each increment to its snapshot
// unless the snapshot applied one of the same source with a Seq not
// less: it records the Seq, adds the consumed millitokens and the events
// with HINCRBY, raises the expiry to the one given if greater, indexes
// the snapshot, and makes the snapshot and its indexes expire no sooner
// than the greater of the expiry and ARGV[6] (now plus usageKeep), at
// most ARGV[7] (usageLatest); a snapshot without expiry makes its indexes
// permanent. Seqs and expiries are compared as strings (bytes_less,
// dec_less): exact whatever their size.
//
// KEYS: for each increment, its snapshot and the entity's and resource's
// indexes. ARGV: 1-4 usageLayoutArgs, 5 now, 6 the least expiry, 7 the
// latest, 8 the sweep's bound, then for each increment: the source, the
// Seq, the events, the expiry, its members in the entity's and the
// resource's indexes, its id, the number of limits, and each limit's
// name and millitokens.
const luaAddUsage = `
local function bytes_less(a, b)
  if a == b then return false end
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

local function dec_less(a, b)
  if #a ~= #b then return #a < #b end
  return bytes_less(a, b)
end

local function expire_at(key, at, fresh)
  if fresh then
    redis.call('PEXPIREAT', key, at)
  elseif redis.call('PTTL', key) >= 0 then
    redis.call('PEXPIREAT', key, at, 'GT')
  end
end

local u = usage_layout(1)
local now, least, latest = ARGV[5], ARGV[6], ARGV[7]
for _, id in ipairs(redis.call('ZRANGE', u.exp, '-inf', now, 'BYSCORE', 'LIMIT', 0, ARGV[8])) do
  local w, e, r, s = string.match(id, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)$')
  if w then drop_snapshot(u, w, e, r, s) else redis.call('ZREM', u.exp, id) end
end

local a, k = 9, 1
while a <= #ARGV do
  local source, seq, events, expires = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local n = tonumber(ARGV[a + 7])
  local snap, by_entity, by_resource = KEYS[k], KEYS[k + 1], KEYS[k + 2]
  local last = redis.call('HGET', snap, 's|' .. source)
  if not last or bytes_less(last, seq) then
    local x = redis.call('HGET', snap, 'x') or '0'
    if dec_less(x, expires) then x = expires end
    redis.call('HSET', snap, 's|' .. source, seq, 'x', x)
    for i = a + 8, a + 6 + 2 * n, 2 do
      redis.call('HINCRBY', snap, 'c|' .. ARGV[i], ARGV[i + 1])
    end
    redis.call('HINCRBY', snap, 'n', events)
    local fresh_entity = redis.call('EXISTS', by_entity) == 0
    local fresh_resource = redis.call('EXISTS', by_resource) == 0
    redis.call('ZADD', by_entity, 0, ARGV[a + 4])
    redis.call('ZADD', by_resource, 0, ARGV[a + 5])
    if x == '0' then
      redis.call('PERSIST', by_entity)
      redis.call('PERSIST', by_resource)
    else
      local at = x
      if dec_less(at, least) then at = least end
      if dec_less(latest, at) then at = latest end
      expire_at(snap, at, redis.call('PTTL', snap) == -1)
      expire_at(by_entity, at, fresh_entity)
      expire_at(by_resource, at, fresh_resource)
      redis.call('ZADD', u.exp, 'GT', at, ARGV[a + 6])
      expire_at(u.exp, at, redis.call('PTTL', u.exp) == -1)
    end
  end
  a = a + 8 + 2 * n
  k = k + 3
end
return OK
`

var addUsageScript = rueidis.NewLuaScript(luaControl + luaUsage + luaAddUsage)

// AddUsage implements store.UsageStore: every increment is checked first,
// then applied by scripts of up to usageChunk increments each, in order.
func (s *Store) AddUsage(ctx context.Context, ns string, incs []store.UsageIncrement) error {
	for _, in := range incs {
		if err := in.Key.Validate(); err != nil {
			return err
		}
	}
	for len(incs) > 0 {
		n := min(len(incs), usageChunk)
		if err := s.addUsage(ctx, ns, incs[:n]); err != nil {
			return err
		}
		incs = incs[n:]
	}
	return nil
}

// addUsage applies incs in one script.
func (s *Store) addUsage(ctx context.Context, ns string, incs []store.UsageIncrement) error {
	now := time.Now()
	keys := make([]string, 0, 3*len(incs))
	args := append(s.usageLayoutArgs(ns), strconv.FormatInt(now.UnixMilli(), 10),
		strconv.FormatInt(now.Add(usageKeep).UnixMilli(), 10), strconv.FormatInt(usageLatest, 10), strconv.Itoa(usageSweep))
	for _, in := range incs {
		k := in.Key
		start := usageStart(k.Start)
		keys = append(keys, s.keys.usageSnapshot(ns, k), s.keys.usageOfEntity(ns, k.Window, k.Entity),
			s.keys.usageOfResource(ns, k.Window, k.Resource))
		// A negative expiry is none, as in the memory backend, where
		// the greatest given starts from 0.
		args = append(args, in.Source, in.Seq, strconv.FormatInt(in.Events, 10), strconv.FormatInt(max(in.Expires, 0), 10),
			k.Resource+"#"+start, start+"#"+k.Entity, usageID(k), strconv.Itoa(len(in.Consumed)))
		for limit, v := range in.Consumed {
			args = append(args, limit, strconv.FormatInt(v, 10))
		}
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	if err := addUsageScript.Exec(ctx, s.c, keys, args).Error(); err != nil {
		return fmt.Errorf("redis: add usage: %w", err)
	}
	return nil
}

// ListUsage implements store.UsageStore: pages of the query's index from
// its cursor, bounded by the window's range where the index's order
// allows, then the snapshots in one round trip, each checked as the
// memory backend checks it (store.UsageQuery.Matches), until the page is
// full or the index ends.
func (s *Store) ListUsage(ctx context.Context, ns string, q store.UsageQuery) ([]store.UsageSnapshot, error) {
	limit, err := q.Validate()
	if err != nil {
		return nil, err
	}
	index, min, max := s.usageRange(ns, q)
	if q.After != "" && (min == "-" || q.After >= min[1:]) {
		min = "(" + q.After
	}
	var out []store.UsageSnapshot
	for len(out) < limit {
		members, err := s.usageMembers(ctx, index, min, max, limit)
		if err != nil {
			return nil, err
		}
		snaps, err := s.usageSnapshots(ctx, ns, q, members)
		if err != nil {
			return nil, err
		}
		for _, sn := range snaps {
			if len(out) < limit && q.Matches(sn.Key, sn.Expires) && q.IsAfter(sn.Key) {
				out = append(out, sn)
			}
		}
		if len(members) < limit {
			break
		}
		min = "(" + members[len(members)-1]
	}
	return out, nil
}

// usageRange returns the index q lists and the ZRANGE BYLEX bounds of
// the snapshots it selects, as narrow as the index's order allows (a
// start before 0 would not sort by its digits: such bounds are open).
func (s *Store) usageRange(ns string, q store.UsageQuery) (index, min, max string) {
	from, to := "-", "+"
	if q.ByEntity() {
		index = s.keys.usageOfEntity(ns, q.Window, q.Entity)
		if q.Resource == "" {
			return index, from, to
		}
		from, to = "["+q.Resource+"#", "("+q.Resource+"$"
		if q.From >= 0 {
			from = "[" + q.Resource + "#" + usageStart(q.From)
		}
		if q.To >= 0 {
			to = "(" + q.Resource + "#" + usageStart(q.To)
		}
		return index, from, to
	}
	index = s.keys.usageOfResource(ns, q.Window, q.Resource)
	if q.From >= 0 {
		from = "[" + usageStart(q.From) + "#"
	}
	if q.To >= 0 {
		to = "(" + usageStart(q.To) + "#"
	}
	return index, from, to
}

// usageMembers returns up to limit members of index in [min, max].
func (s *Store) usageMembers(ctx context.Context, index, min, max string, limit int) ([]string, error) {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	members, err := s.c.Do(ctx, s.c.B().Zrange().Key(index).Min(min).Max(max).Bylex().Limit(0, int64(limit)).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("redis: list usage: %w", err)
	}
	return members, nil
}

// usageSnapshots reads the snapshots that members of q's index name, in
// their order; those deleted since (expired) are left out.
func (s *Store) usageSnapshots(ctx context.Context, ns string, q store.UsageQuery, members []string) ([]store.UsageSnapshot, error) {
	if len(members) == 0 {
		return nil, nil
	}
	keys := make([]store.UsageKey, len(members))
	cmds := make(rueidis.Commands, len(members))
	for i, m := range members {
		k, err := usageKeyOf(q, m)
		if err != nil {
			return nil, err
		}
		keys[i] = k
		cmds[i] = s.c.B().Hgetall().Key(s.keys.usageSnapshot(ns, k)).Build()
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	out := make([]store.UsageSnapshot, 0, len(members))
	for i, res := range s.c.DoMulti(ctx, cmds...) {
		fields, err := res.AsStrMap()
		if err != nil {
			return nil, fmt.Errorf("redis: list usage: %w", err)
		}
		if len(fields) == 0 {
			continue
		}
		sn, err := usageSnapshotOf(keys[i], fields)
		if err != nil {
			return nil, err
		}
		sn.Cursor = q.UsageCursor(keys[i])
		out = append(out, sn)
	}
	return out, nil
}

// usageKeyOf returns the key of the snapshot that member names in q's
// index.
func usageKeyOf(q store.UsageQuery, member string) (store.UsageKey, error) {
	a, b, ok := strings.Cut(member, "#")
	k := store.UsageKey{Window: q.Window, Entity: q.Entity, Resource: q.Resource}
	start := a
	if q.ByEntity() {
		k.Resource, start = a, b
	} else {
		k.Entity = b
	}
	n, err := strconv.ParseInt(start, 10, 64)
	if !ok || err != nil {
		return store.UsageKey{}, fmt.Errorf("redis: usage index member %q: not a snapshot's", member)
	}
	k.Start = n
	return k, nil
}

// usageSnapshotOf decodes the fields of the snapshot of k.
func usageSnapshotOf(k store.UsageKey, fields map[string]string) (store.UsageSnapshot, error) {
	sn := store.UsageSnapshot{Key: k, Consumed: make(map[string]int64)}
	for f, v := range fields {
		limit, consumed := strings.CutPrefix(f, "c|")
		if f != "n" && f != "x" && !consumed {
			continue // an "s|<source>" field
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return store.UsageSnapshot{}, fmt.Errorf("redis: usage snapshot %s field %s: %w", usageID(k), f, err)
		}
		switch {
		case consumed:
			sn.Consumed[limit] = n
		case f == "n":
			sn.Events = n
		default:
			sn.Expires = n
		}
	}
	return sn, nil
}
