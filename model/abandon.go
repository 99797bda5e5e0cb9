package model

// AbandonOutcome is how the abandonment of an acquire of unknown outcome
// ended: the library's limiter abandons the durable acquires it made
// without an idempotency key, and a client those it made a key up for,
// when their store or server failed without saying whether they were
// granted (docs/semantics.md 8).
type AbandonOutcome string

// The outcomes of an abandonment.
const (
	// AbandonEnded: the lease was found and is ended: rolled back (or
	// found ended already), what the acquire took given back.
	AbandonEnded AbandonOutcome = "ended"
	// AbandonNotFound: no look found the lease: the acquire was not
	// granted (or landed after the last look: a reconciler ends it).
	AbandonNotFound AbandonOutcome = "not_found"
	// AbandonFailed: the last look failed (no answer, or an error): a
	// reconciler ends the lease if it was granted.
	AbandonFailed AbandonOutcome = "failed"
	// AbandonDropped: not looked for, as the most allowed at once were
	// being looked for already: a reconciler ends the lease if it was
	// granted.
	AbandonDropped AbandonOutcome = "dropped"
)

// Abandoned is one acquire of unknown outcome that was abandoned, as the
// library's and the client's WithOnAbandon report it.
type Abandoned struct {
	// Namespace is the namespace's id (the library's; empty from a
	// client); LeaseID the lease's.
	Namespace, LeaseID string
	Entity, Resource   string
	Outcome            AbandonOutcome
	// Err is the last look's error, with AbandonFailed.
	Err error
}
