// Package faultsuite is the fault suite (docs/operations.md, "Faults"):
// its tests drive a tollgate.Limiter over store/dynamodb, and a
// server.Server over it, under load through internal/faultproxy in front
// of DynamoDB Local, through each fault the proxy makes and back, and hold
// them to what docs/semantics.md 8 promises: every answer within the
// deadline, degraded grants in mode allow and refusals in mode block while
// the store fails, normal grants again soon after, and never more grants
// than a limit admits. It has no code but its tests.
//
//	go test -v -run Faults ./internal/faultsuite/
//
// prints the figures docs/operations.md records.
package faultsuite
