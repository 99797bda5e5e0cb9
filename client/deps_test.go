package client_test

import (
	"go/build"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/tollgate-rl/tollgate"

// The client and the middleware speak the library's API through package
// model alone: a program that only calls a server does not compile the
// limiter, the store contract or the bucket arithmetic.
func TestClientDoesNotCompileTheLimiter(t *testing.T) {
	for _, root := range []string{"client", "middleware"} {
		t.Run(root, func(t *testing.T) { checkDeps(t, module+"/"+root) })
	}
}

func checkDeps(t *testing.T, root string) {
	forbidden := []string{module, module + "/store", module + "/bucket"}
	seen := map[string]string{} // package -> the package that imports it
	var walk func(pkg string)
	walk = func(pkg string) {
		dir := filepath.Join("..", strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/"))
		p, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		for _, imp := range p.Imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if _, ok := seen[imp]; ok {
				continue
			}
			seen[imp] = pkg
			walk(imp)
		}
	}
	walk(root)
	if len(seen) == 0 {
		t.Fatal("found no imports of the module's packages: the walk is broken")
	}
	for pkg, by := range seen {
		if slices.Contains(forbidden, pkg) || strings.HasPrefix(pkg, module+"/store/") {
			t.Errorf("%s compiles %s (imported by %s)", root, pkg, by)
		}
	}
}
