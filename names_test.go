package tollgate_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"

	"strings"
	"testing"
)

// Package model is the vocabulary below the root: the Go client, the
// server and the backends import it, and it imports none of them. An
// application imports package tollgate, which re-exports the vocabulary an
// application speaks under the same names, so that each name has one
// meaning wherever it is imported from. What stays below the root are the
// bounds and validators with which the client, the server and the
// backends check input, and the helpers of the wire and of the store.
var belowTheRoot = []string{
	// Bounds of identifiers and fields, checked by the validators.
	"MaxCascadeDepth", "MaxDisplayNameLen", "MaxEntityIDLen", "MaxHolderLen", "MaxIdempotencyKeyLen",
	"MaxKeyNameLen", "MaxLeaseIDLen", "MaxLimitNameLen", "MaxMetadataEntries", "MaxMetadataKeyLen",
	"MaxMetadataValLen", "MaxNamespaceLen", "MaxPeriodMillis", "MaxPrincipalLen", "MaxReasonLen",
	"MaxReservationIDLen", "MaxResourceLen", "MaxTriggerFieldLen", "MaxUsagePage", "LeaseIDLen", "MaxAlertAt",
	// Validators and the typed error they return.
	"Invalid", "CheckLeaseTTL", "ValidateEntityID", "ValidateIdempotencyKey", "ValidateKey",
	"ValidateKeyHash", "ValidateKeyName", "ValidateLeaseID", "ValidateLimitName", "ValidateLimits",
	"ValidateNamespace", "ValidateReservationID", "ValidateResource", "ParseKind", "ValidateAuditRetention", "ValidateAlertAt",
	// The store contract's errors, and the class of domain errors.
	"ErrDomain", "NewDomainError", "ErrLeaseConflict", "ErrLeaseExists", "VersionMismatch",
	// Ids and keys as stored and sent.
	"IdempotentLeaseID", "ReservationLeaseID", "ReservationOf", "ReservationPrefix", "KeyPrefix",
	"GenerateKey", "HashKey", "CompareScopes",
	// Times and options as the wire and the store carry them.
	"CeilMS", "CeilSeconds", "DurationMS", "FromUnixMilli", "UnixMilli", "WriteSettings", "WriteSettingsOf",
}

// TestOneHomePerName fails when package tollgate and package model drift:
// a name of model that the root neither re-exports nor lists as staying
// below it, a re-export under another name, or a stale list.
func TestOneHomePerName(t *testing.T) {
	model := exportedNames(t, "model")
	root := exportedNames(t, ".")
	below := map[string]bool{}
	for _, name := range belowTheRoot {
		below[name] = true
		switch {
		case model[name] == "":
			t.Errorf("belowTheRoot lists %s, which package model does not declare", name)
		case root[name] != "":
			t.Errorf("belowTheRoot lists %s, which package tollgate re-exports", name)
		}
	}
	for name := range model {
		if root[name] == "" && !below[name] {
			t.Errorf("model.%s has no home for applications: re-export it in package tollgate under its name, or add it to belowTheRoot", name)
		}
	}
	for name, of := range root {
		if from, ok := strings.CutPrefix(of, "model."); ok && from != name {
			t.Errorf("tollgate.%s re-exports model.%s under another name", name, from)
		}
	}
}

// exportedNames returns the exported top-level names of the package in
// dir, outside tests, each with what it is an alias or a wrapper of
// ("model.X": a type alias, a constant or variable set to model.X, or a
// function that returns model.X's result), or "-" for a name of its own.
func exportedNames(t *testing.T, dir string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			addDecl(out, d)
		}
	}
	return out
}

func addDecl(out map[string]string, d ast.Decl) {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil && d.Name.IsExported() {
			out[d.Name.Name] = wrapped(d)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					out[s.Name.Name] = "-"
					if s.Assign.IsValid() {
						out[s.Name.Name] = modelName(s.Type)
					}
				}
			case *ast.ValueSpec:
				for i, n := range s.Names {
					if n.IsExported() {
						out[n.Name] = "-"
						if i < len(s.Values) {
							out[n.Name] = modelName(s.Values[i])
						}
					}
				}
			}
		}
	}
}

// wrapped is "model.X" for a function whose body returns model.X(...).
func wrapped(f *ast.FuncDecl) string {
	if f.Body == nil || len(f.Body.List) != 1 {
		return "-"
	}
	ret, ok := f.Body.List[0].(*ast.ReturnStmt)
	if !ok || len(ret.Results) != 1 {
		return "-"
	}
	call, ok := ret.Results[0].(*ast.CallExpr)
	if !ok {
		return "-"
	}
	return modelName(call.Fun)
}

// modelName is "model.X" for the expression model.X (or model.X[T]).
func modelName(e ast.Expr) string {
	if ix, ok := e.(*ast.IndexExpr); ok {
		e = ix.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return "-"
	}
	if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "model" {
		return "model." + sel.Sel.Name
	}
	return "-"
}
