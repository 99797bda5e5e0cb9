package redis

import (
	"context"
	"fmt"
	"strconv"
)

// The change generation (store.Changes) is the integer at
// layout.generation(), which every change of a config, an entity, an API
// key or a namespace registration raises with INCR: in the script of the
// change on a single server, right after it on a Cluster (Store.change).
// A missing key reads as 0, and INCR creates it at 1.

// Generation implements store.Changes with one GET.
func (s *Store) Generation(ctx context.Context) (uint64, error) {
	v, err := s.getValue(ctx, s.keys.generation())
	switch {
	case err == errNotFound:
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("redis: read the change generation: %w", err)
	}
	g, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("redis: the change generation %q: %w", v, err)
	}
	return g, nil
}

// LocalGeneration implements store.Changes: many processes share the
// server, so callers poll Generation.
func (s *Store) LocalGeneration() bool { return false }
