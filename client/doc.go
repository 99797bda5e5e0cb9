// Package client is the Go client of a central Tollgate server (package
// server, wire format package api).
//
// Its calls mirror the in-process library (package tollgate) so that code
// can move between the two with little change: Acquire returns a *Lease to
// adjust, commit or roll back; configuration, entities, audit events and
// namespaces have the same names and types; and errors are the library's
// own, so errors.As(err, &ex) with ex a *model.RateLimitExceeded, and
// errors.Is(err, model.ErrEntityNotFound) and the like, work alike.
//
//	c, err := client.New("https://tollgate.internal:8080", client.WithAPIKey(key))
//	lease, err := c.Acquire(ctx, "key-1", "openai/gpt-4o", model.Consume{"rpm": 1, "tpm": 500})
//	var denied *model.RateLimitExceeded
//	if errors.As(err, &denied) {
//		return fmt.Errorf("busy, retry in %v", denied.RetryAfter)
//	}
//	used := callModel()
//	err = lease.Adjust(ctx, model.Consume{"tpm": used - 500})
//	err = lease.Commit(ctx)
//
// The differences from the library come from the network. Lease.Adjust is
// a call to the server, so it takes a context. A call that cannot reach the
// server, times out (WithTimeout, 10 seconds by default), or gets an answer
// it cannot read fails with an error matching model.ErrUnavailable
// (a *model.UnavailableError). Such a failure leaves the outcome
// unknown: an Acquire may have been granted with the answer lost. The
// client then rolls that lease back itself, in the background, by the id
// its idempotency key names, when it made the key up (see WithOnAbandon;
// a lease it cannot find within 30 seconds is committed by the server's
// reconciler when its TTL ends), and a
// Commit or Rollback retried after one may report model.ErrLeaseClosed
// because the first attempt did arrive. A lease lives in the server's
// store, so any server over that store serves it; one the store no longer
// holds in the client's namespace (never issued, ended, or expired) is an
// error matching model.ErrLeaseNotFound (api.ErrLeaseNotFound is the
// same error) and, on a lease handle, model.ErrLeaseClosed.
//
// A Client is safe for concurrent use and reuses connections; create one per
// server and share it.
package client
