package tollgate

import (
	"context"
	"strconv"
	"time"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Key is an API key of the server as stored: never its secret, only its
// hash (see Admin.CreateKey).
type Key = model.Key

// KeySpec describes an API key to create (model.KeySpec).
type KeySpec = model.KeySpec

// CreateKey creates an API key in the admin's namespace and returns its secret,
// which nothing keeps (the store holds its hash): hand it over once. It
// fails with ErrKeyExists if the namespace has a key of that name. The
// creation is audited (model.ActionKeyCreate, principal from
// WithPrincipal), never with the secret or its hash.
func (a *Admin) CreateKey(ctx context.Context, spec KeySpec, opts ...WriteOption) (secret string, k Key, err error) {
	now := a.clock.Now().UTC().Truncate(time.Millisecond)
	secret, hash := model.GenerateKey()
	k = Key{Name: spec.Name, Namespace: a.ns, Role: spec.Role, Entity: spec.Entity, AllowLimits: spec.AllowLimits,
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
	ev, err := a.auditEvent(model.ActionKeyCreate, "", "", keyDetails(k), opts)
	if err != nil {
		return "", Key{}, err
	}
	id, err := a.namespaceID(ctx)
	if err != nil {
		return "", Key{}, err
	}
	if err := a.store.CreateKey(ctx, id, k, ev); err != nil {
		return "", Key{}, storeErr(ctx, "create key", spec.Name, err)
	}
	a.changed(nil)
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

// Keys returns up to limit (1 to model.MaxKeyPage) keys of the admin's
// namespace whose names sort after after, sorted by name.
func (a *Admin) Keys(ctx context.Context, after string, limit int) ([]Key, error) {
	if limit < 1 || limit > model.MaxKeyPage {
		return nil, model.Invalid("limit", strconv.Itoa(limit), "want 1 to "+strconv.Itoa(model.MaxKeyPage))
	}
	id, err := a.namespaceID(ctx)
	if err != nil {
		return nil, err
	}
	ks, err := a.store.ListKeys(ctx, id, after, limit)
	return ks, storeErr(ctx, "list keys", a.ns, err)
}

// RevokeKey deletes the key named name from the admin's namespace: it stops
// working at once in this process, and in every process sharing the store
// within their refresh interval (see ChangeWatch). It fails with
// ErrKeyNotFound if there is no such key. The revocation is audited
// (model.ActionKeyRevoke).
func (a *Admin) RevokeKey(ctx context.Context, name string, opts ...WriteOption) error {
	if err := model.ValidateKeyName(name); err != nil {
		return err
	}
	ev, err := a.auditEvent(model.ActionKeyRevoke, "", "", map[string]string{"name": name}, opts)
	if err != nil {
		return err
	}
	id, err := a.namespaceID(ctx)
	if err != nil {
		return err
	}
	if err := a.store.DeleteKey(ctx, id, name, ev); err != nil {
		return storeErr(ctx, "revoke key", name, err)
	}
	a.changed(nil)
	return nil
}

// LookupKey returns the stored key whose secret hashes to hash
// (model.HashKey), in whatever namespace: how a server authenticates a
// request. It fails with ErrKeyNotFound if there is none; an expired key
// is returned as it is (see Key.Expired).
func (a *Admin) LookupKey(ctx context.Context, hash string) (Key, error) {
	if err := model.ValidateKeyHash(hash); err != nil {
		return Key{}, err
	}
	k, err := a.store.KeyByHash(ctx, hash)
	return k, storeErr(ctx, "look up key", "", err)
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
