package store

import (
	"context"

	"github.com/tollgate-rl/tollgate/model"
)

// Keys holds the server's stored API keys (model.Key): hashes only, never
// a secret. A key belongs to one namespace and is found by name there, and
// by its hash from anywhere, which is how a request's bearer key is
// authenticated before its namespace is known. Every change is written
// atomically with its audit event and raises the store's Generation.
type Keys interface {
	// CreateKey stores k in namespace ns (the id; k.Namespace is its
	// name, kept in the record) and appends ev, atomically. It fails with
	// model.ErrKeyExists if the namespace has a key named k.Name or any
	// namespace has one with k.Hash.
	CreateKey(ctx context.Context, ns string, k model.Key, ev model.AuditEvent) error
	// KeyByHash returns the key whose hash is hash, in whatever namespace,
	// or an error matching model.ErrKeyNotFound. An expired key is
	// returned as it is (the caller checks Key.Expired); a backend may
	// delete expired keys at any time after their expiry.
	KeyByHash(ctx context.Context, hash string) (model.Key, error)
	// ListKeys returns up to limit (1 to model.MaxKeyPage) keys of
	// namespace ns with names greater than after, sorted by name.
	ListKeys(ctx context.Context, ns, after string, limit int) ([]model.Key, error)
	// DeleteKey removes the key named name from namespace ns and appends
	// ev, atomically; it fails with model.ErrKeyNotFound if there is none.
	DeleteKey(ctx context.Context, ns, name string, ev model.AuditEvent) error
}
