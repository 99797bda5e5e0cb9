package storetest

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the import path of the module, whose root is two directories up.
const module = "github.com/tollgate-rl/tollgate"

// belowTheContract are the module's packages the contract's suite may
// compile: the contract and what it is built on. Anything else of the
// module (the root package, reconcile, server, client, limitertest, ...)
// is above the contract, and would make every backend's tests depend on it.
var belowTheContract = []string{module + "/bucket", module + "/calendar", module + "/clock", module + "/model", module + "/store"}

// The contract's suite imports nothing above the contract: the cases that
// drive a limiter are limitertest's. Every file of the package counts, its
// tests and files for other platforms too, and so does every file but the
// tests of the module's packages it compiles.
func TestImportsNothingAboveTheContract(t *testing.T) {
	seen := map[string]string{} // package of the module -> a file importing it
	var walk func(dir string, tests bool)
	walk = func(dir string, tests bool) {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, file := range files {
			if !tests && strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, spec := range f.Imports {
				imp, err := strconv.Unquote(spec.Path.Value)
				if err != nil {
					t.Fatalf("%s: import %s: %v", file, spec.Path.Value, err)
				}
				inModule := imp == module || strings.HasPrefix(imp, module+"/")
				if !inModule || imp == module+"/store/storetest" {
					continue // the standard library, a third party, or this package (its external tests)
				}
				if _, ok := seen[imp]; ok {
					continue
				}
				seen[imp] = file
				if slices.Contains(belowTheContract, imp) {
					walk(filepath.Join("..", "..", strings.TrimPrefix(imp, module)), false)
				}
			}
		}
	}
	walk(".", true)
	if _, ok := seen[module+"/store"]; !ok {
		t.Fatal("found no import of the store contract: the walk is broken")
	}
	for imp, file := range seen {
		if !slices.Contains(belowTheContract, imp) {
			t.Errorf("%s imports %s, which is above the store contract (allowed: %v)", file, imp, belowTheContract)
		}
	}
}
