package dynamodb

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tableOperations are the calls on the table's client that are not
// operations on items: Operations leaves them out.
var tableOperations = []string{"CreateTable", "DeleteTable", "DescribeTable", "UpdateTimeToLive", "Options"}

// clientCalls returns the methods called on the DynamoDB client (a
// selector ending in .db, as s.db.GetItem or l.s.db.PutItem) in the
// non-test Go files of dirs, and the operations of the SDK's paginators
// (dynamodb.NewQueryPaginator(s.db, ...) calls Query).
func clientCalls(t *testing.T, dirs ...string) map[string]bool {
	t.Helper()
	calls := map[string]bool{}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if recv, ok := sel.X.(*ast.SelectorExpr); ok && recv.Sel.Name == "db" {
					calls[sel.Sel.Name] = true
				}
				if op, ok := strings.CutSuffix(strings.TrimPrefix(sel.Sel.Name, "New"), "Paginator"); ok && op != sel.Sel.Name {
					calls[op] = true
				}
				return true
			})
		}
	}
	return calls
}

// Operations is what the backend calls on items, no more, no less.
func TestOperations(t *testing.T) {
	calls := clientCalls(t, ".", "stream")
	if !calls["GetItem"] || !calls["CreateTable"] {
		t.Fatalf("the scan found %v: it no longer sees the client's calls", calls)
	}
	var got []string
	for c := range calls {
		if !slices.Contains(tableOperations, c) {
			got = append(got, c)
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(Operations()))
	if !slices.Equal(got, want) {
		t.Errorf("the code calls %v on items, Operations() says %v: update Operations (the alarms sum over it)", got, want)
	}
	if n := len(Operations()); n+1 > 10 {
		t.Errorf("%d operations: an alarm's metric math takes at most 10 metrics, the sum included", n)
	}
}

// The scan sees a call it was not told about, and one it was told about
// but no longer made.
func TestOperationsScanCatches(t *testing.T) {
	dir := t.TempDir()
	src := "package x\nfunc f(s *S) { s.db.Scan(nil); l.s.db.TransactGetItems(nil); dynamodb.NewScanPaginator(s.db, nil) }\n"
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x_test.go"), []byte("package x\nfunc g(s *S) { s.db.DeleteTable(nil) }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := clientCalls(t, dir)
	for _, want := range []string{"Scan", "TransactGetItems"} {
		if !got[want] {
			t.Errorf("the scan missed %s: %v", want, got)
		}
	}
	if got["DeleteTable"] {
		t.Errorf("the scan read a test file: %v", got)
	}
}
