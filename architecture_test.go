package tollgate_test

import (
	"errors"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// modulePath is the module's import path; its root package is named
// tollgate in docs/architecture.md.
const modulePath = "github.com/tollgate-rl/tollgate"

// archRow is a row of docs/architecture.md's package table.
type archRow struct {
	line    int
	imports []string // module-relative, "tollgate" for the root
	tests   bool     // "(tests)": the imports are those of the package's tests
}

// docs/architecture.md's package table is the code's: one row per package
// of the module, each listing exactly the module's packages it imports,
// in an order in which nothing imports a package of a later row.
func TestArchitectureTable(t *testing.T) {
	rows, order := readArchitectureTable(t, "docs/architecture.md")
	pkgs := modulePackages(t)
	for dir, p := range pkgs {
		row, ok := rows[dir]
		if !ok {
			t.Errorf("package %s has no row in docs/architecture.md's table", dir)
			continue
		}
		got, want := moduleImports(p.Imports, dir), row.imports
		if row.tests {
			if len(got) > 0 {
				t.Errorf("docs/architecture.md:%d: %s is marked (tests), but its own code imports %v", row.line, dir, got)
			}
			got = moduleImports(append(p.TestImports, p.XTestImports...), dir)
		}
		if !slices.Equal(got, want) {
			t.Errorf("docs/architecture.md:%d: %s imports %s; the table says %s", row.line, dir, list(got), list(want))
		}
	}
	for dir, row := range rows {
		if _, ok := pkgs[dir]; !ok {
			t.Errorf("docs/architecture.md:%d: %s is not a package of the module", row.line, dir)
		}
	}
	seen := map[string]bool{}
	for _, dir := range order {
		for _, imp := range rows[dir].imports {
			if !seen[imp] {
				t.Errorf("docs/architecture.md:%d: %s imports %s, which is not in a row above it", rows[dir].line, dir, imp)
			}
		}
		seen[dir] = true
	}
}

var backticked = regexp.MustCompile("`([^`]+)`")

// readArchitectureTable returns the rows of the first table of the file
// at path whose header starts with "| layer | package |", by package, and
// the packages in the table's order.
func readArchitectureTable(t *testing.T, path string) (map[string]archRow, []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]archRow{}
	var order []string
	in := false
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "| layer | package |"):
			in = true
			continue
		case !in:
			continue
		case !strings.HasPrefix(line, "|"):
			return rows, order
		case strings.HasPrefix(line, "|---"):
			continue
		}
		cells := strings.Split(line, " | ")
		if len(cells) != 4 {
			t.Fatalf("%s:%d: a row of %d cells, want 4 (layer, package, owns, imports)", path, i+1, len(cells))
		}
		names := backticked.FindAllStringSubmatch(cells[1], -1)
		if len(names) != 1 {
			t.Fatalf("%s:%d: the package cell %q must name exactly one package in backticks", path, i+1, cells[1])
		}
		imports := strings.TrimSuffix(cells[3], " |")
		row := archRow{line: i + 1, tests: strings.HasPrefix(imports, "(tests)")}
		for _, m := range backticked.FindAllStringSubmatch(imports, -1) {
			row.imports = append(row.imports, m[1])
		}
		slices.Sort(row.imports)
		if len(row.imports) == 0 && imports != "nothing" {
			t.Fatalf("%s:%d: the imports cell %q lists no package; write \"nothing\" if it imports none", path, i+1, imports)
		}
		pkg := names[0][1]
		if _, dup := rows[pkg]; dup {
			t.Fatalf("%s:%d: a second row for %s", path, i+1, pkg)
		}
		rows[pkg] = row
		order = append(order, pkg)
	}
	if !in {
		t.Fatalf("%s: no table with the header \"| layer | package | ...\"", path)
	}
	return rows, order
}

// modulePackages returns the packages of the module rooted at the working
// directory, by module-relative path ("tollgate" for the root), test-only
// packages included.
func modulePackages(t *testing.T) map[string]*build.Package {
	t.Helper()
	pkgs := map[string]*build.Package{}
	err := filepath.WalkDir(".", func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if dir != "." {
			name := d.Name()
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		p, err := build.ImportDir(dir, 0)
		var none *build.NoGoError
		if errors.As(err, &none) {
			return nil
		}
		if err != nil {
			return err
		}
		pkgs[relative(modulePath+strings.TrimPrefix("/"+filepath.ToSlash(dir), "/."))] = p
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// moduleImports returns the module's packages among imports, relative,
// sorted and without self.
func moduleImports(imports []string, self string) []string {
	var own []string
	for _, imp := range imports {
		if imp != modulePath && !strings.HasPrefix(imp, modulePath+"/") {
			continue
		}
		if r := relative(imp); r != self && !slices.Contains(own, r) {
			own = append(own, r)
		}
	}
	slices.Sort(own)
	return own
}

// relative names a package of the module as the table does.
func relative(importPath string) string {
	if importPath == modulePath {
		return "tollgate"
	}
	return strings.TrimPrefix(importPath, modulePath+"/")
}

func list(pkgs []string) string {
	if len(pkgs) == 0 {
		return "nothing"
	}
	return "`" + strings.Join(pkgs, "`, `") + "`"
}
