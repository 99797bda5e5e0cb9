package redis

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/internal/codec"
)

// The namespace registry has the hash tag {ns}, so that one script checks
// and writes all of it: a name's registration layout.namespace(name)
// (JSON, namespaceJSON), the names in layout.namespaces() (score 0), and
// the id's claim layout.namespaceID(id) (the name), so that neither a name
// nor an id is registered twice.

// namespaceID is the claim of a namespace id: the name registered with it.
func (l layout) namespaceID(id string) string { return l.prefix + ":{ns}:i:" + id }

// luaCreateNamespace registers a namespace, raising the generation; a
// name or an id taken is refused (NAMESPACE_EXISTS) before any write.
// KEYS: 1 the name's registration, 2 the id's claim, 3 the names.
// ARGV: 1 the name, 2 the namespace (JSON).
const luaCreateNamespace = `
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then return NAMESPACE_EXISTS end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], 0, ARGV[1])
raise_generation(3)
return OK
`

var createNamespaceScript = rueidis.NewLuaScript(luaControl + luaCreateNamespace)

// CreateNamespace implements store.Namespaces in one script.
func (s *Store) CreateNamespace(ctx context.Context, n model.Namespace) error {
	js, err := encoded(codec.EncodeNamespace(n))
	if err != nil {
		return err
	}
	code, err := s.change(ctx, createNamespaceScript,
		[]string{s.keys.namespace(n.Name), s.keys.namespaceID(n.ID), s.keys.namespaces()}, []string{n.Name, js})
	if err != nil {
		return fmt.Errorf("redis: create namespace %s: %w", n.Name, err)
	}
	return refusal(code)
}

// GetNamespace implements store.Namespaces.
func (s *Store) GetNamespace(ctx context.Context, name string) (model.Namespace, error) {
	v, err := s.getValue(ctx, s.keys.namespace(name))
	switch {
	case err == errNotFound:
		return model.Namespace{}, model.ErrNamespaceNotFound
	case err != nil:
		return model.Namespace{}, fmt.Errorf("redis: get namespace %s: %w", name, err)
	}
	return decoded(codec.DecodeNamespace([]byte(v)))
}

// ListNamespaces implements store.Namespaces: the names with their
// registrations, in one step.
func (s *Store) ListNamespaces(ctx context.Context) ([]model.Namespace, error) {
	page, err := s.rangeGet(ctx, s.keys.namespaces(), s.keys.namespace(""), "-", "+", -1)
	if err != nil {
		return nil, fmt.Errorf("redis: list namespaces: %w", err)
	}
	out := make([]model.Namespace, 0, len(page))
	for _, m := range page {
		n, err := decoded(codec.DecodeNamespace([]byte(m.value)))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// luaReplace replaces a record that the caller read, raising the
// generation: a missing record is refused (ARGV[3], the caller's code
// for it), and one changed since the caller read it (CHANGED: the caller
// reads it again). KEYS: 1 the record. ARGV: 1 the record as read, 2 the
// new record, 3 the code of a missing record.
const luaReplace = `
local cur = redis.call('GET', KEYS[1])
if not cur then return tonumber(ARGV[3]) end
if cur ~= ARGV[1] then return CHANGED end
redis.call('SET', KEYS[1], ARGV[2])
raise_generation(1)
return OK
`

var replaceScript = rueidis.NewLuaScript(luaControl + luaReplace)

// SetNamespaceDeleted implements store.Namespaces: it reads the
// registration and replaces it with one script.
func (s *Store) SetNamespaceDeleted(ctx context.Context, name string, at time.Time) error {
	return s.updateNamespace(ctx, name, func(n *model.Namespace) { n.DeletedAt = at })
}

// updateNamespace applies f to the registration of name: it reads it and
// replaces it with one script, conditioned on what it read (retried while
// another writer changes it in between).
func (s *Store) updateNamespace(ctx context.Context, name string, f func(n *model.Namespace)) error {
	key := s.keys.namespace(name)
	for range maxChangedRetries {
		cur, err := s.getValue(ctx, key)
		switch {
		case err == errNotFound:
			return model.ErrNamespaceNotFound
		case err != nil:
			return fmt.Errorf("redis: update namespace %s: %w", name, err)
		}
		n, err := decoded(codec.DecodeNamespace([]byte(cur)))
		if err != nil {
			return err
		}
		f(&n)
		js, err := encoded(codec.EncodeNamespace(n))
		if err != nil {
			return err
		}
		code, err := s.change(ctx, replaceScript, []string{key}, []string{cur, js, fmt.Sprint(codeNamespaceNotFound)})
		if err != nil {
			return fmt.Errorf("redis: update namespace %s: %w", name, err)
		}
		if code != codeChanged {
			return refusal(code)
		}
	}
	return fmt.Errorf("redis: update namespace %s: %w", name, errBusy)
}

// luaUnregister deletes a namespace's registration, name and id claim,
// raising the generation; a registration gone (a purge that ended first)
// is refused (NAMESPACE_NOT_FOUND). KEYS: 1 the name's registration, 2 the
// id's claim, 3 the names. ARGV: 1 the name.
const luaUnregister = `
if redis.call('DEL', KEYS[1]) == 0 then return NAMESPACE_NOT_FOUND end
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
redis.call('ZREM', KEYS[3], ARGV[1])
raise_generation(3)
return OK
`

var unregisterScript = rueidis.NewLuaScript(luaControl + luaUnregister)

// purgeBatch is how many keys PurgeNamespace asks SCAN for, and unlinks,
// at a time.
const purgeBatch = 1000

// PurgeNamespace implements store.Namespaces. As in the other backends,
// it checks only that the namespace is registered: the caller checks
// that it is deleted. It deletes, in this order, the index entries by
// hash of the namespace's API keys (so that no key stays usable while it
// is being purged, apikeys.go); every key of the namespace, which are
// those beginning with layout.ns(id), found by SCAN on every node (on a
// Cluster they are all on the one that serves the namespace's slot) and
// unlinked in batches, calling progress with the number deleted so far;
// then the registration, which raises the generation. A purge that fails
// half way leaves a registered namespace with part of its keys, which a
// second purge finishes.
func (s *Store) PurgeNamespace(ctx context.Context, name string, progress func(deleted int)) error {
	n, err := s.GetNamespace(ctx, name)
	if err != nil {
		return err
	}
	deleted, err := s.unindexKeys(ctx, n.ID)
	if err != nil {
		return fmt.Errorf("redis: purge namespace %s: %w", name, err)
	}
	report := func() {
		if progress != nil {
			progress(deleted)
		}
	}
	pattern := globEscape(s.keys.ns(n.ID)) + "*"
	for _, node := range s.c.Nodes() {
		err := s.scanNode(ctx, node, pattern, func(keys []string) error {
			d, err := s.unlinkKeys(ctx, keys)
			deleted += d
			report()
			return err
		})
		if err != nil {
			return fmt.Errorf("redis: purge namespace %s: %w", name, err)
		}
	}
	report()
	code, err := s.change(ctx, unregisterScript,
		[]string{s.keys.namespace(name), s.keys.namespaceID(n.ID), s.keys.namespaces()}, []string{name})
	if err != nil {
		return fmt.Errorf("redis: purge namespace %s: %w", name, err)
	}
	return refusal(code)
}

// scanNode calls f with each batch of the keys of node that match pattern.
func (s *Store) scanNode(ctx context.Context, node rueidis.Client, pattern string, f func(keys []string) error) error {
	var cursor uint64
	for {
		entry, err := s.scanOnce(ctx, node, cursor, pattern)
		if err != nil {
			return err
		}
		if len(entry.Elements) > 0 {
			if err := f(entry.Elements); err != nil {
				return err
			}
		}
		if entry.Cursor == 0 {
			return nil
		}
		cursor = entry.Cursor
	}
}

// scanOnce is one SCAN call.
func (s *Store) scanOnce(ctx context.Context, node rueidis.Client, cursor uint64, pattern string) (rueidis.ScanEntry, error) {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	return node.Do(ctx, node.B().Scan().Cursor(cursor).Match(pattern).Count(purgeBatch).Build()).AsScanEntry()
}

// unlinkKeys unlinks keys, which share a hash slot, through the Store's
// client (which sends them to the node that serves it: SCAN may have
// found them on a replica), and returns how many there were.
func (s *Store) unlinkKeys(ctx context.Context, keys []string) (int, error) {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	n, err := s.c.Do(ctx, s.c.B().Unlink().Key(keys...).Build()).AsInt64()
	return int(n), err
}

// globEscape quotes the characters SCAN's MATCH patterns give a meaning.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
