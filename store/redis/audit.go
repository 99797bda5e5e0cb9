package redis

import (
	"context"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/internal/codec"
)

// Audit events, written by both halves of the Store in the script of the
// change each records:
//
//	layout.audit(ns)            hash: event id -> the event (JSON of model.AuditEvent)
//	layout.auditAll(ns)         sorted set: every event's id, score 0
//	layout.auditOf(ns, entity)  sorted set: the ids of entity's events, score 0
//
// The events without an entity (system and resource configs, API keys)
// are indexed under layout.auditOf(ns, ""), the index ListAudit reads for
// the empty entity. Ids are ULIDs, so the lexicographic order of a sorted
// set of score 0 is the events' order, and a page is one ZRANGE BYLEX.

// luaAppendEvent defines the Lua function that appends one audit event:
//
//	append_event(audit_key, all_key, of_key, id, json)
//
// It stores json in the hash audit_key under id and adds id (score 0) to
// the sorted sets all_key and of_key (of_key may be nil or false, for
// none). A script that makes a change carrying an event concatenates this
// constant before its body and calls append_event in the same call as the
// change, with the keys and arguments auditWrite returns, so that the
// change and its event are one atomic step (on a Cluster too: the keys are
// the namespace's, in its hash slot).
const luaAppendEvent = `
local function append_event(audit_key, all_key, of_key, id, json)
  redis.call('HSET', audit_key, id, json)
  redis.call('ZADD', all_key, 0, id)
  if of_key and of_key ~= '' then redis.call('ZADD', of_key, 0, id) end
end
`

// auditWrite returns what a script needs to append ev with append_event
// (luaAppendEvent): keys are its three keys in append_event's order (the
// namespace's audit hash, its index of every event, and the index of ev's
// entity, the system's for an event without one), to go in the script's
// KEYS; args are ev's id and JSON, to go in its ARGV. The script calls
//
//	append_event(KEYS[i], KEYS[i+1], KEYS[i+2], ARGV[j], ARGV[j+1])
//
// where i and j are where it put them.
func (s *Store) auditWrite(ns string, ev model.AuditEvent) (keys, args []string, err error) {
	js, err := encoded(codec.EncodeEvent(ev))
	if err != nil {
		return nil, nil, err
	}
	return []string{s.keys.audit(ns), s.keys.auditAll(ns), s.keys.auditOf(ns, ev.Entity)},
		[]string{ev.ID, js}, nil
}

// luaRangeEvents reads a page of an index of event ids and the events, in
// one step. KEYS: 1 the index, 2 the audit hash. ARGV: 1 and 2 the
// lexicographic range, 3 at most this many (negative: all). Answers the
// events' JSON, oldest first; writes nothing.
const luaRangeEvents = `
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2], 'BYLEX', 'LIMIT', 0, ARGV[3])) do
  local v = redis.call('HGET', KEYS[2], id)
  if v then out[#out + 1] = v end
end
return out
`

var rangeEventsScript = rueidis.NewLuaScriptReadOnly(luaRangeEvents)

// ListAudit implements store.Audit. As in the memory backend, a limit of
// 0 or less lists every event after after.
func (s *Store) ListAudit(ctx context.Context, ns, entity, after string, limit int) ([]model.AuditEvent, error) {
	if limit <= 0 {
		limit = -1
	}
	return s.rangeEvents(ctx, s.keys.auditOf(ns, entity), s.keys.audit(ns), lexAfter(after), "+", limit)
}
