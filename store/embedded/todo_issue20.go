package embedded

import (
	"context"
	"errors"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Placeholders of the store contract's keys, changes and reset, until
// they are built here (issue 20).

var errTODO = errors.ErrUnsupported

// CreateKey implements store.Keys.
func (s *Store) CreateKey(context.Context, string, model.Key, model.AuditEvent) error { return errTODO }

// KeyByHash implements store.Keys.
func (s *Store) KeyByHash(context.Context, string) (model.Key, error) {
	return model.Key{}, model.ErrKeyNotFound
}

// ListKeys implements store.Keys.
func (s *Store) ListKeys(context.Context, string, string, int) ([]model.Key, error) { return nil, nil }

// DeleteKey implements store.Keys.
func (s *Store) DeleteKey(context.Context, string, string, model.AuditEvent) error { return errTODO }

// Generation implements store.Changes.
func (s *Store) Generation(context.Context) (uint64, error) { return 0, nil }

// LocalGeneration implements store.Changes.
func (s *Store) LocalGeneration() bool { return true }

// Reset implements store.Buckets.
func (s *Store) Reset(context.Context, string, *store.ResetRequest) error { return errTODO }
