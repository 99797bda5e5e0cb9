// Package model is the vocabulary below the root package: limits and their
// text syntax, entities, stored configuration, audit events, limit
// statuses, keys, the typed errors, identifier validation, and the two
// interfaces every caller speaks (Acquirer, the data plane;
// Administrator, the control plane).
//
// Applications import package tollgate, which re-exports what they use of
// this vocabulary under the same names (a test keeps the two in step).
// The Go client, the server and the backends import this package, which
// imports none of them: the client speaks the library's API without the
// store or the bucket math.
package model
