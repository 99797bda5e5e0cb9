package store

import "context"

// Changes tells every process sharing a store that the control plane
// changed, so that each can drop what it cached (stored limits, entities,
// namespaces, API keys) within about a second of a change made anywhere
// (docs/semantics.md, "Changes propagate").
//
// The backend raises the generation with every change of a config, an
// entity, a key or a namespace registration, in the same atomic step as
// the change where it can, and at least before the change's call returns.
// Bucket state, leases, audit events and usage do not raise it: they are
// never cached.
type Changes interface {
	// Generation returns the store's change generation: a number that
	// grows with every change above, by any process. Only its moving
	// matters; its value means nothing.
	Generation(ctx context.Context) (uint64, error)
	// LocalGeneration reports whether Generation is exact and costs no
	// I/O because every process using the store is this one (the memory
	// and embedded backends): callers then read it on every lookup
	// rather than polling it, and a change is in force at once.
	LocalGeneration() bool
}
