package deploy

import (
	"encoding/json"
	"errors"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/store/dynamodb"
)

const (
	tableA = "arn:aws:dynamodb:eu-west-1:123456789012:table/tollgate"
	tableB = "arn:aws:dynamodb:eu-west-1:123456789012:table/other"
	nsA    = "3f9a0c1d2e4b5a67"
	nsB    = "3f9a0c1d2e4b5a6"  // a prefix of nsA: its keys must not reach nsA's
	nsC    = "0000000000000000" // another tenant
)

// request is one DynamoDB request as IAM sees it: the action, the
// resource and the partition keys it touches (dynamodb:LeadingKeys).
type request struct {
	action, resource string
	keys             []string
}

// allowed evaluates doc for req the way IAM does for the features the
// generator uses: an Allow statement matching the action and the resource
// (globs) whose LeadingKeys condition holds (ForAllValues: every key
// matches one value, or with StringNotLike none; vacuously true for none).
// No Deny statements exist.
func allowed(t *testing.T, doc Document, req request) bool {
	t.Helper()
	for _, s := range doc.Statement {
		if s.Effect != "Allow" || !slices.Contains(s.Action, req.action) || !matchAny(t, s.Resource, req.resource) {
			continue
		}
		ok := true
		for op, conds := range s.Condition {
			for key, vals := range conds {
				if key != "dynamodb:LeadingKeys" {
					t.Fatalf("unexpected condition key %s", key)
				}
				for _, k := range req.keys {
					switch op {
					case "ForAllValues:StringLike":
						ok = ok && slices.ContainsFunc(vals, func(p string) bool { return glob(t, p, k) })
					case "ForAllValues:StringEquals":
						ok = ok && slices.Contains(vals, k)
					case "ForAllValues:StringNotLike":
						ok = ok && !slices.ContainsFunc(vals, func(p string) bool { return glob(t, p, k) })
					default:
						t.Fatalf("unexpected condition operator %s", op)
					}
				}
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func matchAny(t *testing.T, patterns []any, s string) bool {
	for _, p := range patterns {
		if glob(t, p.(string), s) {
			return true
		}
	}
	return false
}

// glob is IAM's StringLike and ARN matching: * any run, ? one character.
// path.Match treats '/' specially and knows classes; IAM does neither, so
// the pattern is checked to hold neither '[' nor '\\' and '/' is mapped away.
func glob(t *testing.T, pattern, s string) bool {
	if strings.ContainsAny(pattern, `[\`) {
		t.Fatalf("pattern %q has characters IAM does not treat as path.Match does", pattern)
	}
	m, err := path.Match(strings.ReplaceAll(pattern, "/", "\x00"), strings.ReplaceAll(s, "/", "\x00"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPolicyLeadingKeys checks the confined policies against the key
// layout the backend writes, through the exported facts of
// store/dynamodb (whose own test, TestNamespaceKeyPrefix, checks them
// against every key function and encoder): a tenant reaches every key of
// its namespace, no key of another, and reads but cannot write the
// registry.
func TestPolicyLeadingKeys(t *testing.T) {
	own := dynamodb.NamespaceKeyPrefix(nsA)
	other := dynamodb.NamespaceKeyPrefix(nsB)
	reg := dynamodb.RegistryPartitionKey()
	changes := dynamodb.ChangesPartitionKey()
	keyHash := dynamodb.KeyHashPartitionPrefix() + "sha256:00"
	idx := func(name string) string { return tableA + "/index/" + name }
	cases := []struct {
		name           string
		req            request
		acquire, admin bool
	}{
		{"get own entity", request{"dynamodb:GetItem", tableA, []string{own + "ENTITY#key-1"}}, true, true},
		{"update own bucket", request{"dynamodb:UpdateItem", tableA, []string{own + "BUCKET#key-1#r#0"}}, true, true},
		{"batch get own and other", request{"dynamodb:BatchGetItem", tableA, []string{own + "ENTITY#k", other + "ENTITY#k"}}, false, false},
		{"update other bucket", request{"dynamodb:UpdateItem", tableA, []string{other + "BUCKET#key-1#r#0"}}, false, false},
		{"put other tenant", request{"dynamodb:PutItem", tableA, []string{dynamodb.NamespaceKeyPrefix(nsC) + "ENTITY#k"}}, false, false},
		{"key without slash", request{"dynamodb:GetItem", tableA, []string{nsA + "ENTITY#k"}}, false, false},
		{"other table", request{"dynamodb:GetItem", tableB, []string{own + "ENTITY#k"}}, false, false},
		{"delete own config", request{"dynamodb:DeleteItem", tableA, []string{own + "RESOURCE#r"}}, true, true},
		{"batch write own", request{"dynamodb:BatchWriteItem", tableA, []string{own + "BUCKET#k#r#0"}}, false, true},
		{"children GSI1", request{"dynamodb:Query", idx("GSI1"), []string{own + "PARENT#org"}}, false, true},
		{"capacity GSI2", request{"dynamodb:Query", idx("GSI2"), []string{own + "RESOURCE#r"}}, true, true},
		{"other capacity GSI2", request{"dynamodb:Query", idx("GSI2"), []string{other + "RESOURCE#r"}}, false, false},
		{"leases GSI3", request{"dynamodb:Query", idx("GSI3"), []string{own + "ENTITY#k"}}, true, true},
		{"list entities GSI4", request{"dynamodb:Query", idx("GSI4"), []string{nsA + "#0"}}, false, true},
		{"list entities GSI4 last part", request{"dynamodb:Query", idx("GSI4"), []string{nsA + "#f"}}, false, true},
		{"list entities GSI4 legacy key", request{"dynamodb:Query", idx("GSI4"), []string{nsA}}, false, true},
		{"GSI4 beyond the parts", request{"dynamodb:Query", idx("GSI4"), []string{nsA + "#10"}}, false, false},
		{"other GSI4", request{"dynamodb:Query", idx("GSI4"), []string{nsB + "#0"}}, false, false},
		{"other GSI4 legacy key", request{"dynamodb:Query", idx("GSI4"), []string{nsB}}, false, false},
		{"GSI4 with own prefix", request{"dynamodb:Query", idx("GSI4"), []string{own + "x"}}, false, false},
		{"registry read", request{"dynamodb:GetItem", tableA, []string{reg}}, true, true},
		{"generation read", request{"dynamodb:GetItem", tableA, []string{changes}}, true, true},
		{"generation raised", request{"dynamodb:UpdateItem", tableA, []string{changes}}, false, true},
		{"generation put", request{"dynamodb:PutItem", tableA, []string{changes}}, false, false},
		{"generation deleted", request{"dynamodb:DeleteItem", tableA, []string{changes}}, false, false},
		{"own key by name", request{"dynamodb:PutItem", tableA, []string{own + "KEYS#"}}, true, true},
		{"key by hash put", request{"dynamodb:PutItem", tableA, []string{keyHash}}, false, false},
		{"key by hash deleted", request{"dynamodb:DeleteItem", tableA, []string{keyHash}}, false, false},
		{"key by hash read", request{"dynamodb:GetItem", tableA, []string{keyHash}}, false, false},
		{"registry write", request{"dynamodb:PutItem", tableA, []string{reg}}, false, false},
		{"registry update", request{"dynamodb:UpdateItem", tableA, []string{reg}}, false, false},
		{"registry query", request{"dynamodb:Query", tableA, []string{reg}}, false, false},
		{"scan", request{"dynamodb:Scan", tableA, nil}, false, false},
		{"describe", request{"dynamodb:DescribeTable", tableA, nil}, true, true},
		{"delete table", request{"dynamodb:DeleteTable", tableA, nil}, false, false},
		{"stream", request{"dynamodb:GetRecords", tableA + "/stream/2026", nil}, false, false},
	}
	for _, p := range []struct {
		persona Persona
		want    func(acquire, admin bool) bool
	}{
		{PersonaAcquire, func(a, _ bool) bool { return a }},
		{PersonaAdmin, func(_, b bool) bool { return b }},
	} {
		doc, err := PolicyDocument(p.persona, PolicyOptions{Tables: []string{tableA}, NamespaceIDs: []string{nsA}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			if got, want := allowed(t, doc, c.req), p.want(c.acquire, c.admin); got != want {
				t.Errorf("%s: %s: allowed = %v, want %v", p.persona, c.name, got, want)
			}
		}
	}
}

// TestPolicyUnconfined checks the table-wide policies: the runtime may
// write the registry (the default namespace registers itself), the
// operator may also manage the table, the worker reads the stream, and no
// persona may delete the table.
func TestPolicyUnconfined(t *testing.T) {
	reg := dynamodb.RegistryPartitionKey()
	changes := dynamodb.ChangesPartitionKey()
	keyHash := dynamodb.KeyHashPartitionPrefix() + "sha256:00"
	// Only the operator and the worker (the server's personas) write the
	// keys' records by hash; every persona reads them and the generation.
	keyCases := []struct {
		persona Persona
		req     request
		want    bool
	}{
		{PersonaAcquire, request{"dynamodb:GetItem", tableA, []string{keyHash}}, true},
		{PersonaAcquire, request{"dynamodb:PutItem", tableA, []string{keyHash}}, false},
		{PersonaAcquire, request{"dynamodb:UpdateItem", tableA, []string{keyHash}}, false},
		{PersonaAcquire, request{"dynamodb:DeleteItem", tableA, []string{keyHash}}, false},
		{PersonaAcquire, request{"dynamodb:PutItem", tableA, []string{nsA + "/KEYS#", keyHash}}, false},
		{PersonaAcquire, request{"dynamodb:UpdateItem", tableA, []string{changes}}, true},
		{PersonaAcquire, request{"dynamodb:GetItem", tableA, []string{changes}}, true},
		{PersonaAdmin, request{"dynamodb:PutItem", tableA, []string{keyHash}}, true},
		{PersonaAdmin, request{"dynamodb:DeleteItem", tableA, []string{keyHash}}, true},
		{PersonaAdmin, request{"dynamodb:UpdateItem", tableA, []string{changes}}, true},
		{PersonaWorker, request{"dynamodb:PutItem", tableA, []string{keyHash}}, true},
		{PersonaWorker, request{"dynamodb:GetItem", tableA, []string{changes}}, true},
	}
	cases := []struct {
		persona Persona
		req     request
		want    bool
	}{
		{PersonaAcquire, request{"dynamodb:PutItem", tableA, []string{reg}}, true},
		{PersonaAcquire, request{"dynamodb:UpdateItem", tableA, []string{"anything/BUCKET#k#r#0"}}, true},
		{PersonaAcquire, request{"dynamodb:Query", tableA + "/index/GSI4", []string{nsA}}, true},
		{PersonaAcquire, request{"dynamodb:CreateTable", tableA, nil}, false},
		{PersonaAcquire, request{"dynamodb:GetRecords", tableA + "/stream/x", nil}, false},
		{PersonaAdmin, request{"dynamodb:CreateTable", tableA, nil}, true},
		{PersonaAdmin, request{"dynamodb:UpdateTimeToLive", tableA, nil}, true},
		{PersonaAdmin, request{"dynamodb:BatchWriteItem", tableA, []string{nsA}}, true},
		{PersonaAdmin, request{"dynamodb:DeleteTable", tableA, nil}, false},
		{PersonaAdmin, request{"dynamodb:UpdateTable", tableA, nil}, false}, // no code calls it
		{PersonaAdmin, request{"dynamodb:DescribeContinuousBackups", tableA, nil}, false},
		{PersonaWorker, request{"dynamodb:BatchWriteItem", tableA, []string{nsA}}, false}, // entity deletion and purge only
		{PersonaWorker, request{"dynamodb:GetRecords", tableA + "/stream/2026-01-01T00:00:00.000", nil}, true},
		{PersonaWorker, request{"dynamodb:ListStreams", "*", nil}, true},
		{PersonaWorker, request{"dynamodb:UpdateItem", tableA, []string{"x/ENTITY#k"}}, true},
		{PersonaWorker, request{"dynamodb:GetRecords", tableB + "/stream/x", nil}, false},
		{PersonaWorker, request{"dynamodb:CreateTable", tableA, nil}, false},
		{PersonaWorker, request{"dynamodb:DeleteTable", tableA, nil}, false},
		{PersonaWorker, request{"dynamodb:Scan", tableA, nil}, false},
	}
	for _, c := range append(cases, keyCases...) {
		doc, err := PolicyDocument(c.persona, PolicyOptions{Tables: []string{tableA}})
		if err != nil {
			t.Fatal(err)
		}
		if got := allowed(t, doc, c.req); got != c.want {
			t.Errorf("%s: %s %s %v: allowed = %v, want %v", c.persona, c.req.action, c.req.resource, c.req.keys, got, c.want)
		}
	}
}

// TestPolicyInvalid checks that bad options are refused with an
// *InvalidOptionError naming the option.
func TestPolicyInvalid(t *testing.T) {
	cases := []struct {
		name    string
		persona Persona
		opts    PolicyOptions
		option  string
	}{
		{"no table", PersonaAcquire, PolicyOptions{}, "table"},
		{"table name", PersonaAcquire, PolicyOptions{Tables: []string{"tollgate"}}, "table"},
		{"table wildcard", PersonaAcquire, PolicyOptions{Tables: []string{"arn:aws:dynamodb:eu-west-1:123456789012:table/*"}}, "table"},
		{"table index", PersonaAcquire, PolicyOptions{Tables: []string{tableA + "/index/GSI1"}}, "table"},
		{"short account", PersonaAcquire, PolicyOptions{Tables: []string{"arn:aws:dynamodb:eu-west-1:1234:table/t1"}}, "table"},
		{"namespace wildcard", PersonaAcquire, PolicyOptions{Tables: []string{tableA}, NamespaceIDs: []string{"*"}}, "namespace-id"},
		{"namespace glob", PersonaAdmin, PolicyOptions{Tables: []string{tableA}, NamespaceIDs: []string{"3f9a?"}}, "namespace-id"},
		{"namespace slash", PersonaAcquire, PolicyOptions{Tables: []string{tableA}, NamespaceIDs: []string{"a/b"}}, "namespace-id"},
		{"registry", PersonaAcquire, PolicyOptions{Tables: []string{tableA}, NamespaceIDs: []string{"_"}}, "namespace-id"},
		{"empty namespace", PersonaAcquire, PolicyOptions{Tables: []string{tableA}, NamespaceIDs: []string{""}}, "namespace-id"},
		{"worker confined", PersonaWorker, PolicyOptions{Tables: []string{tableA}, NamespaceIDs: []string{nsA}}, "namespace-id"},
		{"persona", Persona("root"), PolicyOptions{Tables: []string{tableA}}, "persona"},
	}
	for _, c := range cases {
		_, err := Policy(c.persona, c.opts)
		var ie *InvalidOptionError
		if !errors.As(err, &ie) || ie.Option != c.option {
			t.Errorf("%s: err = %v, want an InvalidOptionError for %s", c.name, err, c.option)
		}
	}
	if _, err := BoundaryDocument(PolicyOptions{Tables: []string{tableA}}); err == nil {
		t.Error("BoundaryDocument without namespaces: no error")
	}
}

// TestPolicyJSON checks the encoded form: valid JSON, the 2012-10-17
// version, unique Sids, several namespaces and tables, and that the
// boundary admits what either tenant persona is granted.
func TestPolicyJSON(t *testing.T) {
	opts := PolicyOptions{Tables: []string{tableA, tableB}, NamespaceIDs: []string{nsC, nsA, nsA}}
	for _, p := range Personas() {
		o := opts
		if p == PersonaWorker {
			o.NamespaceIDs = nil
		}
		b, err := Policy(p, o)
		if err != nil {
			t.Fatal(err)
		}
		var doc Document
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Version != "2012-10-17" || len(doc.Statement) == 0 {
			t.Fatalf("%s: %s", p, b)
		}
		sids := map[string]bool{}
		for _, s := range doc.Statement {
			if sids[s.Sid] {
				t.Errorf("%s: Sid %s twice", p, s.Sid)
			}
			sids[s.Sid] = true
		}
		if p != PersonaWorker && !strings.Contains(string(b), `"`+nsC+`/*"`) {
			t.Errorf("%s: namespace %s missing:\n%s", p, nsC, b)
		}
	}
	boundary, err := BoundaryDocument(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{nsA, nsC} {
		for _, req := range []request{
			{"dynamodb:UpdateItem", tableB, []string{dynamodb.NamespaceKeyPrefix(ns) + "BUCKET#k#r#0"}},
			{"dynamodb:Query", tableB + "/index/GSI4", []string{dynamodb.NamespaceIndexKeys(ns)[0]}},
			{"dynamodb:Query", tableB + "/index/GSI4", []string{ns}},
		} {
			if !allowed(t, boundary, req) {
				t.Errorf("boundary denies %v", req)
			}
		}
	}
	if allowed(t, boundary, request{"dynamodb:UpdateItem", tableA, []string{dynamodb.NamespaceKeyPrefix(nsB) + "x"}}) {
		t.Error("boundary admits another namespace")
	}
}
