package tollgate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// The namespaces of the store, by name: an Admin manages them all,
// whichever one it works in.

// RegisterNamespace creates namespace name with a new opaque id. It fails
// with ErrNamespaceExists if the name is taken, even by a deleted
// namespace.
func (a *Admin) RegisterNamespace(ctx context.Context, name string) (Namespace, error) {
	if err := model.ValidateNamespace(name); err != nil {
		return Namespace{}, err
	}
	n, err := createNamespace(ctx, a.store, name, a.clock.Now())
	if err != nil {
		return Namespace{}, storeErr(ctx, "register namespace", name, err)
	}
	a.changes.changed(name, nil)
	return n, nil
}

// GetNamespace returns the named namespace, deleted or not, or an error
// matching ErrNamespaceNotFound.
func (a *Admin) GetNamespace(ctx context.Context, name string) (Namespace, error) {
	if err := model.ValidateNamespace(name); err != nil {
		return Namespace{}, err
	}
	n, err := a.store.GetNamespace(ctx, name)
	return n, storeErr(ctx, "get namespace", name, err)
}

// ListNamespaces returns every namespace, deleted ones included, sorted by
// name.
func (a *Admin) ListNamespaces(ctx context.Context) ([]Namespace, error) {
	ns, err := a.store.ListNamespaces(ctx)
	return ns, storeErr(ctx, "list namespaces", "", err)
}

// DeleteNamespace soft-deletes a namespace: limiters using it fail with
// ErrNamespaceDeleted (at once if they follow this admin's change watch,
// else within their refresh interval), and its data stays until
// PurgeNamespace. RecoverNamespace undoes it.
func (a *Admin) DeleteNamespace(ctx context.Context, name string) error {
	return a.setDeleted(ctx, name, a.clock.Now().UTC().Truncate(time.Millisecond))
}

// RecoverNamespace undoes DeleteNamespace.
func (a *Admin) RecoverNamespace(ctx context.Context, name string) error {
	return a.setDeleted(ctx, name, time.Time{})
}

// setDeleted marks the namespace deleted at at, or not deleted if at is zero.
func (a *Admin) setDeleted(ctx context.Context, name string, at time.Time) error {
	if err := model.ValidateNamespace(name); err != nil {
		return err
	}
	if err := a.store.SetNamespaceDeleted(ctx, name, at); err != nil {
		return storeErr(ctx, "update namespace", name, err)
	}
	a.changes.changed(name, nil)
	return nil
}

// SetAuditRetention sets how long the named namespace keeps its audit
// events: d is 0 (forever, the default) or from model.MinAuditRetention
// to model.MaxAuditRetention in whole seconds. An event older than the
// retention is hidden at once from AuditEvents and AuditLog (a longer
// retention shows again what a shorter one hid but nothing swept), and
// deleted by the next sweep of a reconciler (reconcile.WithAuditSweep).
func (a *Admin) SetAuditRetention(ctx context.Context, name string, d time.Duration) error {
	if err := model.ValidateNamespace(name); err != nil {
		return err
	}
	if err := model.ValidateAuditRetention(d); err != nil {
		return err
	}
	log, ok := a.store.(store.AuditLog)
	if !ok {
		return errAuditLogUnsupported
	}
	if err := log.SetAuditRetention(ctx, name, d); err != nil {
		return storeErr(ctx, "update namespace", name, err)
	}
	a.changes.changed(name, nil)
	return nil
}

// PurgeNamespace deletes every item of a soft-deleted namespace, then the
// namespace itself; a namespace not deleted first is refused with an error
// matching ErrInvalid. progress, if not nil, is told how many items are
// gone.
func (a *Admin) PurgeNamespace(ctx context.Context, name string, progress func(deleted int)) error {
	n, err := a.GetNamespace(ctx, name)
	if err != nil {
		return err
	}
	if !n.Deleted() {
		return model.Invalid("namespace", name, "only a deleted namespace can be purged; delete it first")
	}
	err = a.store.PurgeNamespace(ctx, name, progress)
	a.changes.forgetMode(name)
	a.changes.changed(name, nil)
	return storeErr(ctx, "purge namespace", name, err)
}

// createNamespace creates namespace name in s with a new random opaque id,
// created at now. RegisterNamespace and the first use of the default
// namespace share it.
func createNamespace(ctx context.Context, s store.Store, name string, now time.Time) (Namespace, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	n := model.Namespace{Name: name, ID: hex.EncodeToString(b[:]), CreatedAt: now.UTC().Truncate(time.Millisecond)}
	return n, s.CreateNamespace(ctx, n)
}
