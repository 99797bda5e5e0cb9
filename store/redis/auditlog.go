package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/internal/codec"
)

// The namespace-wide audit log (store.AuditLog) reads layout.auditAll(ns),
// the sorted set of every event's id that each append already writes
// (audit.go): a range of ids is one ZRANGE BYLEX, as a page of one
// entity's events is.

var _ store.AuditLog = (*Store)(nil)

// ListAuditRange implements store.AuditLog.
func (s *Store) ListAuditRange(ctx context.Context, ns string, q store.AuditRange) ([]model.AuditEvent, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	after, before := q.Bounds()
	return s.rangeEvents(ctx, s.keys.auditAll(ns), s.keys.audit(ns), lexAfter(after), "("+before, q.Limit)
}

// rangeEvents returns up to limit events of the index idx (of the audit
// hash audit) from min to max, lexicographic bounds of ZRANGE BYLEX.
func (s *Store) rangeEvents(ctx context.Context, idx, audit, min, max string, limit int) ([]model.AuditEvent, error) {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	vals, err := rangeEventsScript.Exec(ctx, s.c, []string{idx, audit}, []string{min, max, strconv.Itoa(limit)}).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("redis: list audit: %w", err)
	}
	out := make([]model.AuditEvent, len(vals))
	for i, v := range vals {
		if out[i], err = decoded(codec.DecodeEvent([]byte(v))); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// luaDropEvents deletes audit events. KEYS: 1 the audit hash, 2 the index
// of every event, 3.. the indexes of the events' entities. ARGV: the
// event ids. Answers how many were in the index of every event (a sweep
// running at the same time deleted the others).
const luaDropEvents = `
local n = 0
for _, id in ipairs(ARGV) do
  n = n + redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[1], id)
  for i = 3, #KEYS do redis.call('ZREM', KEYS[i], id) end
end
return n
`

var dropEventsScript = rueidis.NewLuaScript(luaDropEvents)

// SweepAudit implements store.AuditLog: it reads the oldest events before
// before (their entities name the indexes to clean) and deletes them in
// one script.
func (s *Store) SweepAudit(ctx context.Context, ns string, before time.Time, limit int) (int, error) {
	if limit < 1 {
		return 0, ctx.Err()
	}
	evs, err := s.rangeEvents(ctx, s.keys.auditAll(ns), s.keys.audit(ns), "-", "("+store.AuditIDAt(before), limit)
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	keys := []string{s.keys.audit(ns), s.keys.auditAll(ns)}
	seen := map[string]bool{}
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
		if !seen[ev.Entity] {
			seen[ev.Entity] = true
			keys = append(keys, s.keys.auditOf(ns, ev.Entity))
		}
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	n, err := dropEventsScript.Exec(ctx, s.c, keys, ids).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("redis: sweep audit: %w", err)
	}
	return int(n), nil
}

// SetAuditRetention implements store.AuditLog.
func (s *Store) SetAuditRetention(ctx context.Context, name string, d time.Duration) error {
	return s.updateNamespace(ctx, name, func(n *model.Namespace) { n.AuditRetention = d })
}
