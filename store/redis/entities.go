package redis

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/internal/codec"
)

// An entity is the string layout.entity(ns, id) (JSON, entityJSON, whose
// "parent_id" the scripts read); its id is in the sorted set
// layout.entities(ns) and, when it has a parent, in
// layout.children(ns, parent) (score 0: ids in byte order).

// GetEntity implements store.Entities.
func (s *Store) GetEntity(ctx context.Context, ns, id string) (model.Entity, error) {
	v, err := s.getValue(ctx, s.keys.entity(ns, id))
	switch {
	case err == errNotFound:
		return model.Entity{}, model.ErrEntityNotFound
	case err != nil:
		return model.Entity{}, fmt.Errorf("redis: get entity %s: %w", id, err)
	}
	return decoded(codec.DecodeEntity([]byte(v)))
}

// luaCreateEntity stores an entity, indexes it (and under its parent) and
// appends the event, raising the generation. It refuses a taken id
// (ENTITY_EXISTS), then a missing parent (ENTITY_NOT_FOUND), before
// writing anything. KEYS: 1 the entity, 2 the entity index, 3 the parent
// (checked when ARGV[3] is '1'), 4 the parent's children, 5-7 the event's.
// ARGV: 1 the id, 2 the entity (JSON), 3 has a parent, 4-5 the event's.
const luaCreateEntity = `
if redis.call('EXISTS', KEYS[1]) == 1 then return ENTITY_EXISTS end
if ARGV[3] == '1' then
  if redis.call('EXISTS', KEYS[3]) == 0 then return ENTITY_NOT_FOUND end
  redis.call('ZADD', KEYS[4], 0, ARGV[1])
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
append_event(KEYS[5], KEYS[6], KEYS[7], ARGV[4], ARGV[5])
raise_generation(7)
return OK
`

var createEntityScript = rueidis.NewLuaScript(luaControl + luaAppendEvent + luaCreateEntity)

// CreateEntity implements store.Entities in one script.
func (s *Store) CreateEntity(ctx context.Context, ns string, e model.Entity, ev model.AuditEvent) error {
	e.Version = 1
	js, err := encoded(codec.EncodeEntity(e))
	if err != nil {
		return err
	}
	evKeys, evArgs, err := s.auditWrite(ns, ev)
	if err != nil {
		return err
	}
	keys := append([]string{s.keys.entity(ns, e.ID), s.keys.entities(ns), s.keys.entity(ns, e.ParentID),
		s.keys.children(ns, e.ParentID)}, evKeys...)
	args := append([]string{e.ID, js, boolArg(e.ParentID != "")}, evArgs...)
	code, err := s.change(ctx, createEntityScript, keys, args)
	if err != nil {
		return fmt.Errorf("redis: create entity %s: %w", e.ID, err)
	}
	return refusal(code)
}

// luaDeleteEntity deletes an entity with its configs, buckets and usage
// snapshots, takes it out of the entity index and its parent's children,
// and appends the event, raising the generation; a missing entity is
// refused (ENTITY_NOT_FOUND), then a precondition that does not hold
// (VERSION_MISMATCH). Its own children index stays: children keep their
// ParentID (store.Entities).
//
// The keys it derives from prefixes (the parent's children, the configs,
// the buckets, the usage snapshots) are the namespace's, in the hash slot
// of the keys it declares, which a Cluster allows.
//
// The buckets are found from the bucket index ("<resource>|<entity>",
// layout.buckets): one ZRANGE BYLEX per resource of the namespace's
// buckets, skipping from each resource's members to the next resource's
// ('}' follows '|', which no resource holds), and one ZSCORE for the
// entity's member of each: the work grows with the resources, not with
// the other entities' buckets.
//
// KEYS: 1 the entity, 2 the entity index, 3 the config index, 4 the
// bucket index, 5-7 the event's. ARGV: 1 the id, 2 the children indexes'
// prefix, 3 the configs' prefix, 4 and 5 the bounds of the entity's
// scopes in the config index, 6 the entity's buckets' prefix
// (layout.bucket(ns, id, "")), 7-8 the event's, 9-14 usageDropArgs, 15
// the precondition (preconditionArg).
const luaDeleteEntity = `
local id = ARGV[1]
local js = redis.call('GET', KEYS[1])
if not js then return ENTITY_NOT_FOUND end
local refused = version_refusal(ARGV[15], version_of(js))
if refused then return refused end
local parent = cjson.decode(js).parent_id
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], id)
if type(parent) == 'string' and parent ~= '' then redis.call('ZREM', ARGV[2] .. parent, id) end
for _, m in ipairs(redis.call('ZRANGE', KEYS[3], ARGV[4], ARGV[5], 'BYLEX')) do
  redis.call('DEL', ARGV[3] .. m)
end
redis.call('ZREMRANGEBYLEX', KEYS[3], ARGV[4], ARGV[5])
local from = '-'
while true do
  local first = redis.call('ZRANGE', KEYS[4], from, '+', 'BYLEX', 'LIMIT', 0, 1)[1]
  if not first then break end
  local resource = string.match(first, '^([^|]*)|') or first
  local m = resource .. '|' .. id
  if redis.call('ZSCORE', KEYS[4], m) then
    redis.call('DEL', ARGV[6] .. resource)
    redis.call('ZREM', KEYS[4], m)
  end
  from = '[' .. resource .. '}'
end
drop_usage_of(usage_layout(9), id, {ARGV[13], ARGV[14]})
append_event(KEYS[5], KEYS[6], KEYS[7], ARGV[7], ARGV[8])
raise_generation(7)
return OK
`

var deleteEntityScript = rueidis.NewLuaScript(luaControl + luaVersion + luaAppendEvent + luaUsage + luaDeleteEntity)

// DeleteEntity implements store.Entities in one script.
func (s *Store) DeleteEntity(ctx context.Context, ns, id string, ev model.AuditEvent, pre ...store.Precondition) error {
	evKeys, evArgs, err := s.auditWrite(ns, ev)
	if err != nil {
		return err
	}
	keys := append([]string{s.keys.entity(ns, id), s.keys.entities(ns), s.keys.configs(ns), s.keys.buckets(ns)}, evKeys...)
	scopesMin, scopesMax := entityScopes(id)
	args := append([]string{id, s.keys.children(ns, ""), s.keys.config(ns, ""), scopesMin, scopesMax,
		s.keys.bucket(ns, id, "")}, evArgs...)
	args = append(args, s.usageDropArgs(ns)...)
	args = append(args, preconditionArg(pre))
	code, err := s.change(ctx, deleteEntityScript, keys, args)
	if err != nil {
		return fmt.Errorf("redis: delete entity %s: %w", id, err)
	}
	return versionRefusal(code, pre)
}

// ListChildren implements store.Entities: the parent's children index with
// the entities, in one step.
func (s *Store) ListChildren(ctx context.Context, ns, id string) ([]model.Entity, error) {
	page, err := s.rangeGet(ctx, s.keys.children(ns, id), s.keys.entity(ns, ""), "-", "+", -1)
	if err != nil {
		return nil, fmt.Errorf("redis: list children of %s: %w", id, err)
	}
	return decodeEntities(page)
}

// ListEntities implements store.Entities: one page of the entity index
// with the entities, in one step.
func (s *Store) ListEntities(ctx context.Context, ns, after string, limit int) ([]model.Entity, error) {
	if err := store.ValidatePage(limit, store.MaxEntityPage); err != nil {
		return nil, err
	}
	page, err := s.rangeGet(ctx, s.keys.entities(ns), s.keys.entity(ns, ""), lexAfter(after), "+", limit)
	if err != nil {
		return nil, fmt.Errorf("redis: list entities: %w", err)
	}
	return decodeEntities(page)
}

// luaUpdateEntity replaces an entity, moves it between children indexes
// when its parent changes, and appends the event, raising the
// generation. The caller read the entity (ARGV[2]) to keep its
// CreatedAt and learn its parent: the script refuses a missing entity
// (ENTITY_NOT_FOUND) and one changed since (CHANGED: the caller reads it
// again). A new parent is checked as store.CheckAncestry does, inside the
// script so that no concurrent move can make a cycle: the chain from the
// new parent up must not meet the entity (CYCLE), be longer than ARGV[7]
// (TOO_DEEP), or start at a missing entity (ENTITY_NOT_FOUND); a chain
// ends at a root or at a missing ancestor. All before any write.
//
// KEYS: 1 the entity, 2 the old parent's children, 3 the new parent's
// children, 4-6 the event's. ARGV: 1 the id, 2 the entity as read, 3 the
// new entity (JSON), 4 the old parent, 5 the new parent, 6 the entities'
// prefix (layout.entity(ns, "")), 7 store.MaxAncestry, 8-9 the event's.
const luaUpdateEntity = `
local id, old_parent, new_parent = ARGV[1], ARGV[4], ARGV[5]
local cur = redis.call('GET', KEYS[1])
if not cur then return ENTITY_NOT_FOUND end
if cur ~= ARGV[2] then return CHANGED end
if old_parent ~= new_parent and new_parent ~= '' then
  local at = new_parent
  local verdict = TOO_DEEP
  for _ = 1, tonumber(ARGV[7]) do
    if at == id then
      verdict = CYCLE
      break
    end
    local js = redis.call('GET', ARGV[6] .. at)
    if not js then
      if at == new_parent then verdict = ENTITY_NOT_FOUND else verdict = OK end
      break
    end
    local next = cjson.decode(js).parent_id
    if type(next) ~= 'string' or next == '' then
      verdict = OK
      break
    end
    at = next
  end
  if verdict ~= OK then return verdict end
end
if old_parent ~= new_parent then
  if old_parent ~= '' then redis.call('ZREM', KEYS[2], id) end
  if new_parent ~= '' then redis.call('ZADD', KEYS[3], 0, id) end
end
redis.call('SET', KEYS[1], ARGV[3])
append_event(KEYS[4], KEYS[5], KEYS[6], ARGV[8], ARGV[9])
raise_generation(6)
return OK
`

var updateEntityScript = rueidis.NewLuaScript(luaControl + luaAppendEvent + luaUpdateEntity)

// UpdateEntity implements store.Entities: it reads the entity (and checks
// pre against it), then one script compares it and writes the new one,
// at the next version (reading again if another process changed it in
// between).
func (s *Store) UpdateEntity(ctx context.Context, ns string, e model.Entity, ev model.AuditEvent, pre ...store.Precondition) error {
	evKeys, evArgs, err := s.auditWrite(ns, ev)
	if err != nil {
		return err
	}
	for range maxChangedRetries {
		cur, err := s.getValue(ctx, s.keys.entity(ns, e.ID))
		switch {
		case err == errNotFound:
			return model.ErrEntityNotFound
		case err != nil:
			return fmt.Errorf("redis: update entity %s: %w", e.ID, err)
		}
		old, err := decoded(codec.DecodeEntity([]byte(cur)))
		if err != nil {
			return err
		}
		if err := store.CheckVersion(old.Version, pre); err != nil {
			return err
		}
		e.CreatedAt, e.Version = old.CreatedAt, old.Version+1
		js, err := encoded(codec.EncodeEntity(e))
		if err != nil {
			return err
		}
		keys := append([]string{s.keys.entity(ns, e.ID), s.keys.children(ns, old.ParentID), s.keys.children(ns, e.ParentID)}, evKeys...)
		args := append([]string{e.ID, cur, js, old.ParentID, e.ParentID, s.keys.entity(ns, ""),
			strconv.Itoa(store.MaxAncestry)}, evArgs...)
		code, err := s.change(ctx, updateEntityScript, keys, args)
		if err != nil {
			return fmt.Errorf("redis: update entity %s: %w", e.ID, err)
		}
		switch code {
		case codeChanged:
			continue
		case codeCycle:
			return model.Invalid("parent_id", e.ParentID, "entity "+e.ID+" would become its own ancestor")
		case codeTooDeep:
			return model.Invalid("parent_id", e.ParentID, "its chain of ancestors is longer than "+strconv.Itoa(store.MaxAncestry))
		}
		return refusal(code)
	}
	return fmt.Errorf("redis: update entity %s: %w", e.ID, errBusy)
}

// decodeEntities decodes the values of a page of an entity index.
func decodeEntities(page []indexedValue) ([]model.Entity, error) {
	out := make([]model.Entity, 0, len(page))
	for _, m := range page {
		e, err := decoded(codec.DecodeEntity([]byte(m.value)))
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}
