package redis

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/internal/codec"
)

// A scope's config is the string layout.config(ns, scopeMember(scope))
// (JSON, package codec), and the scope's member is in the sorted set
// layout.configs(ns) (score 0), whose lexicographic order is the listing's.

// scopeSep separates a scope's entity from its resource in its member. It
// sorts before every character of an entity id, so that an entity's
// scopes come before those of the entities its id is a prefix of ("org-1"
// before "org-10") and the system and resource scopes (no entity) first:
// the members' byte order is model.CompareScopes order. Entity ids cannot
// hold it (model.ValidateEntityID); usage cursors use it for the same
// reason (store.UsageQuery.UsageCursor).
const scopeSep = "#"

// scopeMember is the member of sc in the config index.
func scopeMember(sc model.Scope) string { return sc.Entity + scopeSep + sc.Resource }

// parseScopeMember reverses scopeMember.
func parseScopeMember(m string) (model.Scope, error) {
	entity, resource, ok := strings.Cut(m, scopeSep)
	if !ok {
		return model.Scope{}, fmt.Errorf("redis: config index member %q: not a scope", m)
	}
	return model.Scope{Entity: entity, Resource: resource}, nil
}

// entityScopes returns the ZRANGE BYLEX bounds of every scope of entity
// in the config index: the members that begin with entity + scopeSep.
func entityScopes(entity string) (min, max string) {
	return "[" + entity + scopeSep, "(" + entity + string(scopeSep[0]+1)
}

// GetConfigs implements store.Configs with one MGET.
func (s *Store) GetConfigs(ctx context.Context, ns string, scopes []model.Scope) ([]*model.Config, error) {
	keys := make([]string, len(scopes))
	for i, sc := range scopes {
		keys[i] = s.keys.config(ns, scopeMember(sc))
	}
	vals, found, err := s.getValues(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("redis: get configs: %w", err)
	}
	out := make([]*model.Config, len(scopes))
	for i := range vals {
		if !found[i] {
			continue
		}
		c, err := decoded(codec.DecodeConfig([]byte(vals[i])))
		if err != nil {
			return nil, err
		}
		out[i] = &c
	}
	return out, nil
}

// luaPutConfig stores a scope's config at the version after the one it
// replaces, indexes the scope and appends the event, raising the
// generation. It refuses an entity scope whose entity does not exist
// (ENTITY_NOT_FOUND), then a precondition that does not hold
// (VERSION_MISMATCH), before writing anything. The config comes without
// a version: the script writes it in front (codec's configJSON begins
// with it). KEYS: 1 the config, 2 the config index, 3 the scope's entity
// (checked when ARGV[1] is '1'), 4-6 the event's (auditWrite). ARGV: 1
// check the entity, 2 the scope's member, 3 the config (JSON, a version
// of 0), 4-5 the event's, 6 the precondition (preconditionArg).
const luaPutConfig = `
if ARGV[1] == '1' and redis.call('EXISTS', KEYS[3]) == 0 then return ENTITY_NOT_FOUND end
local have = version_of(redis.call('GET', KEYS[1]))
local refused = version_refusal(ARGV[6], have)
if refused then return refused end
redis.call('SET', KEYS[1], '{"version":' .. string.format('%d', have + 1) .. ',' .. string.sub(ARGV[3], 2))
redis.call('ZADD', KEYS[2], 0, ARGV[2])
append_event(KEYS[4], KEYS[5], KEYS[6], ARGV[4], ARGV[5])
raise_generation(6)
return OK
`

var putConfigScript = rueidis.NewLuaScript(luaControl + luaVersion + luaAppendEvent + luaPutConfig)

// PutConfig implements store.Configs in one script.
func (s *Store) PutConfig(ctx context.Context, ns string, scope model.Scope, cfg model.Config, ev model.AuditEvent, pre ...store.Precondition) error {
	if strings.Contains(scope.Entity, scopeSep) {
		// The limiter never sends one (model.ValidateEntityID); the
		// config index could not tell its entity from its resource.
		return model.Invalid("entity", scope.Entity, "must not contain "+scopeSep)
	}
	cfg.Version = 0 // the script writes it
	js, err := encoded(codec.EncodeConfig(cfg))
	if err != nil {
		return err
	}
	evKeys, evArgs, err := s.auditWrite(ns, ev)
	if err != nil {
		return err
	}
	member := scopeMember(scope)
	keys := append([]string{s.keys.config(ns, member), s.keys.configs(ns), s.keys.entity(ns, scope.Entity)}, evKeys...)
	args := append([]string{boolArg(scope.Entity != ""), member, js}, evArgs...)
	args = append(args, preconditionArg(pre))
	code, err := s.change(ctx, putConfigScript, keys, args)
	if err != nil {
		return fmt.Errorf("redis: put config: %w", err)
	}
	return versionRefusal(code, pre)
}

// luaDeleteConfig deletes a scope's config and its index member and
// appends the event, raising the generation; a missing config is refused
// (NOT_FOUND), then a precondition that does not hold (VERSION_MISMATCH).
// KEYS: 1 the config, 2 the config index, 3-5 the event's. ARGV: 1 the
// scope's member, 2-3 the event's, 4 the precondition (preconditionArg).
const luaDeleteConfig = `
local cur = redis.call('GET', KEYS[1])
if not cur then return NOT_FOUND end
if ARGV[4] ~= '' then
  local refused = version_refusal(ARGV[4], version_of(cur))
  if refused then return refused end
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
append_event(KEYS[3], KEYS[4], KEYS[5], ARGV[2], ARGV[3])
raise_generation(5)
return OK
`

var deleteConfigScript = rueidis.NewLuaScript(luaControl + luaVersion + luaAppendEvent + luaDeleteConfig)

// DeleteConfig implements store.Configs in one script.
func (s *Store) DeleteConfig(ctx context.Context, ns string, scope model.Scope, ev model.AuditEvent, pre ...store.Precondition) error {
	evKeys, evArgs, err := s.auditWrite(ns, ev)
	if err != nil {
		return err
	}
	member := scopeMember(scope)
	keys := append([]string{s.keys.config(ns, member), s.keys.configs(ns)}, evKeys...)
	args := append([]string{member}, evArgs...)
	args = append(args, preconditionArg(pre))
	code, err := s.change(ctx, deleteConfigScript, keys, args)
	if err != nil {
		return fmt.Errorf("redis: delete config: %w", err)
	}
	return versionRefusal(code, pre)
}

// ListConfigs implements store.Configs: one page of the config index,
// whose order is the listing's (scopeSep), with the configs.
func (s *Store) ListConfigs(ctx context.Context, ns string, after *model.Scope, limit int) ([]model.ScopedConfig, error) {
	if err := store.ValidatePage(limit, store.MaxConfigPage); err != nil {
		return nil, err
	}
	min := "-"
	if after != nil {
		min = "(" + scopeMember(*after)
	}
	page, err := s.rangeGet(ctx, s.keys.configs(ns), s.keys.config(ns, ""), min, "+", limit)
	if err != nil {
		return nil, fmt.Errorf("redis: list configs: %w", err)
	}
	out := make([]model.ScopedConfig, 0, len(page))
	for _, m := range page {
		sc, err := parseScopeMember(m.name)
		if err != nil {
			return nil, err
		}
		c, err := decoded(codec.DecodeConfig([]byte(m.value)))
		if err != nil {
			return nil, err
		}
		out = append(out, model.ScopedConfig{Scope: sc, Config: c})
	}
	return out, nil
}

// boolArg is a script's boolean argument.
func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
