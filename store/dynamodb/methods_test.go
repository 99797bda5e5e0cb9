package dynamodb

import (
	"reflect"
	"slices"
	"testing"

	"github.com/tollgate-rl/tollgate/store"
)

// maxExtraMethods bounds the Store's exported methods beyond the store
// contract. The contract is package store's to fix (store.Store and the
// optional interfaces the limiter and the aggregator look for: 38 methods
// now), and every backend implements it; beyond it the Store offers only
// what the backend's other programs need of the same table: the stream
// reader and its upkeep (Client, Table, Split, SplitDue) and the tools
// (Admin; CallTimeout, which the CLI checks it set). Everything else has a
// home of its own: table administration is Admin's, the writes of bucket
// items are the engine's (engine.go), and the facts of the table's layout
// are package functions (layout.go). A method past the bound is one of
// those ideas leaking back into the Store.
const maxExtraMethods = 6

func TestStoreMethods(t *testing.T) {
	contract := map[string]bool{}
	for _, it := range []reflect.Type{
		reflect.TypeFor[store.Store](), reflect.TypeFor[store.UsageStore](),
		reflect.TypeFor[store.BucketLister](), reflect.TypeFor[store.ChangeFeeder](),
		reflect.TypeFor[store.AuditLog](),
	} {
		for i := range it.NumMethod() {
			contract[it.Method(i).Name] = true
		}
	}
	st := reflect.TypeFor[*Store]()
	var extra []string
	for i := range st.NumMethod() {
		if name := st.Method(i).Name; !contract[name] {
			extra = append(extra, name)
		}
	}
	t.Logf("%d exported methods: the contract's %d and %v", st.NumMethod(), len(contract), extra)
	if len(extra) > maxExtraMethods {
		t.Errorf("*Store has %d methods beyond the store contract, at most %d: %v", len(extra), maxExtraMethods, extra)
	}
	if !slices.Contains(extra, "Admin") || slices.Contains(extra, "CreateTable") {
		t.Errorf("table administration is Admin's: %v", extra)
	}
}
