// Package model holds the vocabulary shared by every layer of Tollgate: limits
// and their text syntax, entities, stored configuration, audit events, limit
// statuses, the typed errors, and identifier validation.
//
// Applications normally use these names through the root tollgate package,
// which re-exports them; backends import this package directly.
package model
