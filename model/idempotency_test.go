package model_test

import (
	"testing"

	"github.com/tollgate-rl/tollgate/model"
)

// The lease id of a key is a fixed function that the clients in other
// languages compute too, to roll back an acquire they gave up on
// (docs/http-api.md, "Giving up on an acquire"): its value for a known
// key is part of the wire contract.
func TestIdempotentLeaseIDIsTheDocumentedHash(t *testing.T) {
	const key, want = "tgc-00000000000000000000000000000000", "952c5a0b8e25854a3411c2fe44e5e437"
	if got := model.IdempotentLeaseID(key); got != want {
		t.Fatalf("IdempotentLeaseID(%q) = %s, want %s (docs/http-api.md, the Python and TypeScript clients)", key, got, want)
	}
	if err := model.ValidateLeaseID(model.IdempotentLeaseID(key)); err != nil {
		t.Fatal(err)
	}
}
