package redis

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/internal/codec"
)

// A stored API key lives twice, as the same JSON (keyJSON, which names the
// key's namespace id): in its namespace's hash layout.apiKeys(ns) under
// its name (how the namespace lists and revokes its keys, and how a purge
// finds them), and in the index layout.keyHash(hash) (how a request's key
// is found before its namespace is known).
//
// On a single server one script writes or deletes both with the audit
// event. On a Cluster the index has a hash tag of its own, so two calls
// do: a key is created in its namespace first and indexed second, and
// deleted from the index first and from its namespace second. A crash
// between the two leaves a key that its namespace lists but that
// authenticates nobody (revoking it again removes it); never a key that
// authenticates but is not listed, which nobody could revoke.

// luaCreateKey stores a key in its namespace and appends the event,
// raising the generation; on a single server it also checks and writes
// the index by hash. A name taken in the namespace, or (with the index)
// a hash taken anywhere, is refused (KEY_EXISTS) before any write.
// KEYS: 1 the namespace's keys, 2-4 the event's, 5 the index by hash
// (single server only). ARGV: 1 the name, 2 the key (JSON), 3-4 the
// event's.
const luaCreateKey = `
local index = KEYS[5]
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return KEY_EXISTS end
if index and redis.call('EXISTS', index) == 1 then return KEY_EXISTS end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if index then redis.call('SET', index, ARGV[2]) end
append_event(KEYS[2], KEYS[3], KEYS[4], ARGV[3], ARGV[4])
raise_generation(5)
return OK
`

var createKeyScript = rueidis.NewLuaScript(luaControl + luaAppendEvent + luaCreateKey)

// luaUncreateKey undoes, on a Cluster, a key created in its namespace
// whose hash turned out to be taken when it was indexed: it deletes the
// key if it is still the one created (ARGV[2]) and its event.
// KEYS: 1 the namespace's keys, 2-4 the event's. ARGV: 1 the name, 2 the
// key (JSON), 3 the event's id.
const luaUncreateKey = `
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then redis.call('HDEL', KEYS[1], ARGV[1]) end
redis.call('HDEL', KEYS[2], ARGV[3])
redis.call('ZREM', KEYS[3], ARGV[3])
redis.call('ZREM', KEYS[4], ARGV[3])
return OK
`

var uncreateKeyScript = rueidis.NewLuaScript(luaUncreateKey)

// CreateKey implements store.Keys: one script on a single server; on a
// Cluster, a check of the hash, the script in the namespace, then the
// index (see above).
func (s *Store) CreateKey(ctx context.Context, ns string, k model.Key, ev model.AuditEvent) error {
	js, err := encoded(codec.EncodeKey(ns, k))
	if err != nil {
		return err
	}
	evKeys, evArgs, err := s.auditWrite(ns, ev)
	if err != nil {
		return err
	}
	keys := append([]string{s.keys.apiKeys(ns)}, evKeys...)
	args := append([]string{k.Name, js}, evArgs...)
	if !s.cluster() {
		code, err := s.change(ctx, createKeyScript, append(keys, s.keys.keyHash(k.Hash)), args)
		if err != nil {
			return fmt.Errorf("redis: create key %s: %w", k.Name, err)
		}
		return refusal(code)
	}
	return s.createKeyInCluster(ctx, k, js, keys, args)
}

// createKeyInCluster is CreateKey on a Cluster. A hash already indexed is
// refused before anything is written; one indexed by another process
// between that check and the index's write makes it undo the key and its
// event.
func (s *Store) createKeyInCluster(ctx context.Context, k model.Key, js string, keys, args []string) error {
	switch _, err := s.getValue(ctx, s.keys.keyHash(k.Hash)); {
	case err == nil:
		return model.ErrKeyExists
	case err != errNotFound:
		return fmt.Errorf("redis: create key %s: %w", k.Name, err)
	}
	// The generation rises once the key is indexed: a process that
	// looked the hash up in between and cached its absence drops that.
	code, err := s.exec(ctx, createKeyScript, keys, args)
	if err != nil || code != codeOK {
		if err != nil {
			return fmt.Errorf("redis: create key %s: %w", k.Name, err)
		}
		return refusal(code)
	}
	set, err := s.setIfAbsent(ctx, s.keys.keyHash(k.Hash), js)
	if err != nil {
		return fmt.Errorf("redis: create key %s: index it: %w", k.Name, err)
	}
	if set {
		return s.raiseGeneration(ctx)
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	if err := uncreateKeyScript.Exec(ctx, s.c, keys, []string{k.Name, js, args[2]}).Error(); err != nil {
		return fmt.Errorf("redis: create key %s: undo it (its hash is taken): %w", k.Name, err)
	}
	return model.ErrKeyExists
}

// setIfAbsent sets key to v unless it exists, and reports whether it did.
func (s *Store) setIfAbsent(ctx context.Context, key, v string) (bool, error) {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	err := s.c.Do(ctx, s.c.B().Set().Key(key).Value(v).Nx().Build()).Error()
	if isNil(err) {
		return false, nil
	}
	return err == nil, err
}

// KeyByHash implements store.Keys with one GET of the index.
func (s *Store) KeyByHash(ctx context.Context, hash string) (model.Key, error) {
	if hash == "" {
		return model.Key{}, model.ErrKeyNotFound
	}
	v, err := s.getValue(ctx, s.keys.keyHash(hash))
	switch {
	case err == errNotFound:
		return model.Key{}, model.ErrKeyNotFound
	case err != nil:
		return model.Key{}, fmt.Errorf("redis: key by hash: %w", err)
	}
	k, err := decoded(codec.DecodeKey([]byte(v)))
	return k, err
}

// ListKeys implements store.Keys: a namespace has few keys, so a page
// reads them all (HGETALL) and sorts those after after by name.
func (s *Store) ListKeys(ctx context.Context, ns, after string, limit int) ([]model.Key, error) {
	if err := store.ValidatePage(limit, model.MaxKeyPage); err != nil {
		return nil, err
	}
	all, err := s.namespaceKeys(ctx, ns)
	if err != nil {
		return nil, fmt.Errorf("redis: list keys: %w", err)
	}
	var out []model.Key
	for name, js := range all {
		if name <= after {
			continue
		}
		k, err := decoded(codec.DecodeKey([]byte(js)))
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b model.Key) int { return cmp.Compare(a.Name, b.Name) })
	return out[:min(len(out), limit)], nil
}

// namespaceKeys returns the keys of namespace ns by name, as stored.
func (s *Store) namespaceKeys(ctx context.Context, ns string) (map[string]string, error) {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	return s.c.Do(ctx, s.c.B().Hgetall().Key(s.keys.apiKeys(ns)).Build()).AsStrMap()
}

// luaDeleteKey deletes a key from its namespace and appends the event,
// raising the generation; on a single server it also deletes the index
// entry by hash, if it is this key's. It refuses a missing key
// (KEY_NOT_FOUND) and one changed since the caller read it (CHANGED)
// before any write. KEYS: 1 the namespace's keys, 2-4 the event's, 5 the
// index by hash (single server only). ARGV: 1 the name, 2 the key as
// read, 3-4 the event's.
const luaDeleteKey = `
local index = KEYS[5]
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return KEY_NOT_FOUND end
if cur ~= ARGV[2] then return CHANGED end
if index and redis.call('GET', index) == cur then redis.call('DEL', index) end
redis.call('HDEL', KEYS[1], ARGV[1])
append_event(KEYS[2], KEYS[3], KEYS[4], ARGV[3], ARGV[4])
raise_generation(5)
return OK
`

var deleteKeyScript = rueidis.NewLuaScript(luaControl + luaAppendEvent + luaDeleteKey)

// luaUnindexKey deletes an index entry by hash if it is still the given
// key's, and answers 1 if it did. KEYS: 1 the entry. ARGV: 1 the key
// (JSON).
const luaUnindexKey = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`

var unindexKeyScript = rueidis.NewLuaScript(luaUnindexKey)

// DeleteKey implements store.Keys: it reads the key (for its hash), then
// deletes it with one script on a single server; on a Cluster it first
// deletes the index entry, then the key in its namespace (see above).
func (s *Store) DeleteKey(ctx context.Context, ns, name string, ev model.AuditEvent) error {
	evKeys, evArgs, err := s.auditWrite(ns, ev)
	if err != nil {
		return err
	}
	keys := append([]string{s.keys.apiKeys(ns)}, evKeys...)
	for range maxChangedRetries {
		js, err := s.namespaceKey(ctx, ns, name)
		if err != nil {
			return err
		}
		k, err := decoded(codec.DecodeKey([]byte(js)))
		if err != nil {
			return err
		}
		hash := k.Hash
		args := append([]string{name, js}, evArgs...)
		var code int64
		if s.cluster() {
			if _, err := s.unindexKey(ctx, hash, js); err != nil {
				return fmt.Errorf("redis: delete key %s: %w", name, err)
			}
			code, err = s.change(ctx, deleteKeyScript, keys, args)
		} else {
			code, err = s.change(ctx, deleteKeyScript, append(slices.Clone(keys), s.keys.keyHash(hash)), args)
		}
		if err != nil {
			return fmt.Errorf("redis: delete key %s: %w", name, err)
		}
		if code != codeChanged {
			return refusal(code)
		}
	}
	return fmt.Errorf("redis: delete key %s: %w", name, errBusy)
}

// namespaceKey returns the stored JSON of the key named name in ns, or
// model.ErrKeyNotFound.
func (s *Store) namespaceKey(ctx context.Context, ns, name string) (string, error) {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	js, err := s.c.Do(ctx, s.c.B().Hget().Key(s.keys.apiKeys(ns)).Field(name).Build()).ToString()
	switch {
	case isNil(err):
		return "", model.ErrKeyNotFound
	case err != nil:
		return "", fmt.Errorf("redis: delete key %s: %w", name, err)
	}
	return js, nil
}

// unindexKey deletes the index entry of hash if it is the key js, and
// reports whether it did.
func (s *Store) unindexKey(ctx context.Context, hash, js string) (bool, error) {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	n, err := unindexKeyScript.Exec(ctx, s.c, []string{s.keys.keyHash(hash)}, []string{js}).AsInt64()
	return n == 1, err
}

// unindexKeys deletes the index entries by hash of every key of
// namespace ns (PurgeNamespace, before the keys themselves), and returns
// how many it deleted.
func (s *Store) unindexKeys(ctx context.Context, ns string) (int, error) {
	all, err := s.namespaceKeys(ctx, ns)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, js := range all {
		k, err := decoded(codec.DecodeKey([]byte(js)))
		if err != nil {
			return n, err
		}
		ok, err := s.unindexKey(ctx, k.Hash, js)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}
