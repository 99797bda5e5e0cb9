package tollgate

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Key is an API key of the server as stored: never its secret, only its
// hash (see Registry.CreateKey).
type Key = model.Key

// KeySpec describes an API key to create (model.KeySpec).
type KeySpec = model.KeySpec

// CreateKey creates an API key in namespace ns and returns its secret,
// which nothing keeps (the store holds its hash): hand it over once. It
// fails with ErrKeyExists if the namespace has a key of that name. The
// creation is audited (model.ActionKeyCreate, principal from
// WithPrincipal), never with the secret or its hash.
func (r *Registry) CreateKey(ctx context.Context, ns string, spec KeySpec, opts ...WriteOption) (secret string, k Key, err error) {
	now := r.clock.Now().UTC().Truncate(time.Millisecond)
	secret, hash := model.GenerateKey()
	k = Key{Name: spec.Name, Namespace: ns, Role: spec.Role, Entity: spec.Entity, AllowLimits: spec.AllowLimits,
		Hash: hash, CreatedAt: now}
	switch {
	case spec.ExpiresIn < 0 || spec.ExpiresIn > model.MaxKeyExpiry:
		return "", Key{}, model.Invalid("expires_in", spec.ExpiresIn.String(), "want 0 (never) up to "+model.MaxKeyExpiry.String())
	case spec.ExpiresIn > 0:
		k.ExpiresAt = now.Add(spec.ExpiresIn).Truncate(time.Millisecond)
	}
	if err := model.ValidateKey(k); err != nil {
		return "", Key{}, err
	}
	ev, err := newAuditEvent(&r.eventIDs, now, model.ActionKeyCreate, "", "", keyDetails(k), opts)
	if err != nil {
		return "", Key{}, err
	}
	id, err := r.namespaceID(ctx, ns)
	if err != nil {
		return "", Key{}, err
	}
	if err := r.store.CreateKey(ctx, id, k, ev); err != nil {
		return "", Key{}, storeErr(ctx, "create key", spec.Name, err)
	}
	return secret, k, nil
}

// keyDetails describes k in its audit events: everything but the hash.
func keyDetails(k Key) map[string]string {
	d := map[string]string{"name": k.Name, "role": string(k.Role), "allow_limits": strconv.FormatBool(k.AllowLimits)}
	if k.Entity != "" {
		d["entity"] = k.Entity
	}
	if !k.ExpiresAt.IsZero() {
		d["expires_at"] = k.ExpiresAt.Format(time.RFC3339Nano)
	}
	return d
}

// Keys returns up to limit (1 to model.MaxKeyPage) keys of namespace ns
// whose names sort after after, sorted by name.
func (r *Registry) Keys(ctx context.Context, ns, after string, limit int) ([]Key, error) {
	if limit < 1 || limit > model.MaxKeyPage {
		return nil, model.Invalid("limit", strconv.Itoa(limit), "want 1 to "+strconv.Itoa(model.MaxKeyPage))
	}
	id, err := r.namespaceID(ctx, ns)
	if err != nil {
		return nil, err
	}
	ks, err := r.store.ListKeys(ctx, id, after, limit)
	return ks, storeErr(ctx, "list keys", ns, err)
}

// RevokeKey deletes the key named name from namespace ns: it stops
// working at once in this process, and in every process sharing the store
// within their refresh interval (see ChangeWatch). It fails with
// ErrKeyNotFound if there is no such key. The revocation is audited
// (model.ActionKeyRevoke).
func (r *Registry) RevokeKey(ctx context.Context, ns, name string, opts ...WriteOption) error {
	if err := model.ValidateKeyName(name); err != nil {
		return err
	}
	ev, err := newAuditEvent(&r.eventIDs, r.clock.Now(), model.ActionKeyRevoke, "", "", map[string]string{"name": name}, opts)
	if err != nil {
		return err
	}
	id, err := r.namespaceID(ctx, ns)
	if err != nil {
		return err
	}
	return storeErr(ctx, "revoke key", name, r.store.DeleteKey(ctx, id, name, ev))
}

// LookupKey returns the stored key whose secret hashes to hash
// (model.HashKey), in whatever namespace: how a server authenticates a
// request. It fails with ErrKeyNotFound if there is none; an expired key
// is returned as it is (see Key.Expired).
func (r *Registry) LookupKey(ctx context.Context, hash string) (Key, error) {
	if err := model.ValidateKeyHash(hash); err != nil {
		return Key{}, err
	}
	k, err := r.store.KeyByHash(ctx, hash)
	return k, storeErr(ctx, "look up key", "", err)
}

// namespaceID resolves namespace name to its id for a key operation: the
// default namespace is registered on first use, as a Limiter registers
// it; a deleted namespace is ErrNamespaceDeleted.
func (r *Registry) namespaceID(ctx context.Context, name string) (string, error) {
	if err := model.ValidateNamespace(name); err != nil {
		return "", err
	}
	n, err := r.store.GetNamespace(ctx, name)
	if errors.Is(err, model.ErrNamespaceNotFound) && name == model.DefaultNamespace {
		n, err = createNamespace(ctx, r.store, name, r.clock.Now())
		if errors.Is(err, model.ErrNamespaceExists) { // registered concurrently
			n, err = r.store.GetNamespace(ctx, name)
		}
	}
	switch {
	case err != nil:
		return "", storeErr(ctx, "resolve namespace", name, err)
	case n.Deleted():
		return "", storeErr(ctx, "resolve namespace", name, model.ErrNamespaceDeleted)
	}
	return n.ID, nil
}

// Within reports whether entity is root or one of root's descendants in
// the limiter's namespace, following parents as the cache knows them
// (they change with the config cache: WithCacheTTL, ChangeWatch): what a
// server asks before acting on an entity for a key confined to root. An
// entity that does not exist descends from nothing; a chain longer than
// store.MaxAncestry is not followed to its end.
func (l *Limiter) Within(ctx context.Context, entity, root string) (bool, error) {
	if entity == root {
		return true, nil
	}
	now := nanoOf(l.clock.Now())
	ns, err := l.namespaceID(ctx, now)
	if err != nil {
		return false, err
	}
	cur := entity
	for range store.MaxAncestry {
		e, err := l.entity(ctx, ns, cur, now)
		if err != nil || !e.found || e.entity.ParentID == "" {
			return false, err
		}
		if cur = e.entity.ParentID; cur == root {
			return true, nil
		}
	}
	return false, nil
}
