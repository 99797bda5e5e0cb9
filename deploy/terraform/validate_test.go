package terraform_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/tollgate-rl/tollgate/deploy"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
)

// loader returns a function that loads a called module from disk.
func loader(t *testing.T) func(string) (*module, error) {
	return func(dir string) (*module, error) {
		m := parseModule(dir, readModule(t, dir))
		if len(m.problems) > 0 {
			return nil, errors.New(strings.Join(m.problems, "; "))
		}
		return m, nil
	}
}

func report(t *testing.T, what string, probs []string) {
	t.Helper()
	for _, p := range probs {
		t.Errorf("%s: %s", what, p)
	}
}

var modules = []struct{ name, dir string }{
	{"module", moduleDir},
	{"example", exampleDir},
}

// (a) Every resource and data source type, argument and block is in the
// pinned provider schema.
func TestProviderSchema(t *testing.T) {
	s := loadSchema(t)
	for _, tc := range modules {
		t.Run(tc.name, func(t *testing.T) {
			report(t, tc.dir, schemaProblems(loadModule(t, tc.dir), s))
		})
	}
}

// (b) References resolve, variables and locals are used, outputs refer to
// something, the example passes the module's variables.
func TestReferences(t *testing.T) {
	s := loadSchema(t)
	for _, tc := range modules {
		t.Run(tc.name, func(t *testing.T) {
			report(t, tc.dir, referenceProblems(loadModule(t, tc.dir), s, loader(t)))
		})
	}
}

// The example calls this module and reads outputs it has (a check that
// can fail: referenceProblems loads the module it calls).
func TestExampleCallsModule(t *testing.T) {
	m := loadModule(t, exampleDir)
	b := m.modules["tollgate"]
	if b == nil {
		t.Fatal("the example has no module \"tollgate\"")
	}
	src, _ := b.Body.Attributes["source"].Expr.Value(nil)
	if got := filepath.Clean(filepath.Join(exampleDir, src.AsString())); got != filepath.Clean(moduleDir) {
		t.Errorf("the example's module source is %s, not this module", got)
	}
	if len(m.outputs) == 0 {
		t.Error("the example has no outputs")
	}
}

// (c) The table is the one store/dynamodb creates, whichever billing mode.
func TestTableLayout(t *testing.T) {
	m := loadModule(t, moduleDir)
	want := dynamodb.Layout()
	if want.PartitionKey == "" || len(want.Indexes) == 0 || want.TTLAttribute == "" {
		t.Fatalf("dynamodb.Layout() = %+v: incomplete", want)
	}
	for _, tc := range []struct {
		name, billing string
		vars          map[string]cty.Value
	}{
		{"default", "PAY_PER_REQUEST", nil},
		{"on demand", "PAY_PER_REQUEST", map[string]cty.Value{"billing_mode": cty.StringVal("PAY_PER_REQUEST")}},
		{"provisioned", "PROVISIONED", map[string]cty.Value{"billing_mode": cty.StringVal("PROVISIONED")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			report(t, "table", layoutProblems(m, tc.vars, want, tc.billing))
		})
	}
}

// (c) The table holds the schema version record CheckTable reads.
func TestVersionRecord(t *testing.T) {
	report(t, "version record", versionRecordProblems(loadModule(t, moduleDir)))
}

// (d) The tenant policy's LeadingKeys prefixes, registry key and indexes
// are the backend's.
func TestTenantPolicy(t *testing.T) {
	m := loadModule(t, moduleDir)
	for _, tc := range []struct {
		name string
		ids  []string
	}{
		{"one namespace", []string{"3f9a0c1d2e4b5a67"}},
		{"three namespaces", []string{"0123456789abcdef", "fedcba9876543210", "00000000000000ff"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			report(t, "tenant policy", tenantPolicyProblems(m, tc.ids))
		})
	}
}

// The helpers of store/dynamodb the tenant policy is checked with say
// what docs/dynamodb.md 7 says, so that a broken helper cannot make a
// broken policy pass.
func TestKeyHelpers(t *testing.T) {
	const id = "3f9a0c1d2e4b5a67"
	prefix := dynamodb.NamespaceKeyPrefix(id)
	if !strings.HasPrefix(prefix, id) || len(prefix) <= len(id) {
		t.Errorf("NamespaceKeyPrefix(%q) = %q: it must extend the id, or one namespace's policy covers another whose id extends it", id, prefix)
	}
	if other := dynamodb.NamespaceKeyPrefix("3f9a0c1d2e4b5a68"); strings.HasPrefix(other, prefix) || strings.HasPrefix(prefix, other) {
		t.Errorf("prefixes %q and %q overlap", prefix, other)
	}
	reg := dynamodb.RegistryPartitionKey()
	if reg == "" || strings.HasPrefix(reg, prefix) {
		t.Errorf("RegistryPartitionKey() = %q", reg)
	}
	layout := dynamodb.Layout()
	var all []string
	for _, ix := range layout.Indexes {
		all = append(all, ix.Name)
	}
	ixs := dynamodb.NamespaceIndexes()
	if len(ixs) == 0 || len(ixs) >= len(all) {
		t.Errorf("NamespaceIndexes() = %v of %v: the namespace index (GSI4, keyed by the bare id) must not be among them", ixs, all)
	}
	for _, ix := range ixs {
		if !slices.Contains(all, ix) {
			t.Errorf("NamespaceIndexes() names %s, which the table does not have", ix)
		}
	}
}

// The item actions of the module (local.item_actions), of the generator's
// acquire persona and of docs/dynamodb.md 7's first policy (that persona's
// output) are one list.
func TestItemActions(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "dynamodb.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "\n## 7. IAM")
	if !ok {
		t.Fatal("docs/dynamodb.md has no section \"7. IAM\"")
	}
	_, block, ok := strings.Cut(sec, "```json\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("docs/dynamodb.md 7 has no JSON policy")
	}
	var policy struct {
		Statement []struct{ Action []string }
	}
	if err := json.Unmarshal([]byte(block), &policy); err != nil || len(policy.Statement) == 0 {
		t.Fatalf("docs/dynamodb.md 7's first policy: %v", err)
	}
	gen, err := deploy.PolicyDocument(deploy.PersonaAcquire, deploy.PolicyOptions{Tables: []string{testTableARN}})
	if err != nil {
		t.Fatal(err)
	}
	// The acquire persona's item actions are its first two statements':
	// reads, and writes kept off the keys' records by hash.
	want := slices.Sorted(slices.Values(append(slices.Clone(gen.Statement[0].Action), gen.Statement[1].Action...)))
	m := loadModule(t, moduleDir)
	v := newEvaluator(m, zipVars, nil).locals["item_actions"]
	if v == cty.NilVal || !v.IsWhollyKnown() {
		t.Fatal("local.item_actions is not known")
	}
	var got []string
	for _, a := range v.AsValueSlice() {
		got = append(got, a.AsString())
	}
	if len(policy.Statement) < 2 {
		t.Fatal("docs/dynamodb.md 7's first policy has fewer than two statements (reads, writes)")
	}
	docActions := append(slices.Clone(policy.Statement[0].Action), policy.Statement[1].Action...)
	for what, list := range map[string][]string{"local.item_actions": got, "docs/dynamodb.md 7": docActions} {
		if l := slices.Sorted(slices.Values(list)); !slices.Equal(l, want) {
			t.Errorf("%s = %v, the generator's acquire persona has %v", what, l, want)
		}
	}
}

// readLambdaBuild reads what `make lambda` builds (Makefile) and what the
// function reads (cmd/tollgate-lambda/main.go).
func readLambdaBuild(t *testing.T) lambdaBuild {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var recipe []string
	in := false
	for sc := bufio.NewScanner(bytes.NewReader(mk)); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "lambda:"):
			in = true
		case in && strings.HasPrefix(line, "\t"):
			recipe = append(recipe, line)
		case in:
			in = false
		}
	}
	text := strings.ReplaceAll(strings.Join(recipe, "\n"), "\\\n", " ")
	find := func(re string) string {
		m := regexp.MustCompile(re).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("Makefile's lambda target: no match for %s in:\n%s", re, text)
		}
		return m[1]
	}
	b := lambdaBuild{env: map[string]bool{}, modes: map[string]bool{}}
	goarch := find(`GOARCH=(\S+)`)
	if goos := find(`GOOS=(\S+)`); goos != "linux" {
		t.Fatalf("make lambda builds for %s", goos)
	}
	b.arch = map[string]string{"arm64": "arm64", "amd64": "x86_64"}[goarch]
	if b.arch == "" {
		t.Fatalf("GOARCH=%s has no Lambda architecture", goarch)
	}
	b.handler = path.Base(find(`-o\s+(\S+)`))
	b.zip = find(`mkzip\s+(\S+)`)

	mainPath := filepath.Join(repoRoot, "cmd", "tollgate-lambda", "main.go")
	src, err := os.ReadFile(mainPath)
	if err != nil {
		t.Fatal(err)
	}
	b.runtime = regexp.MustCompile(`provided\.al\d+`).FindString(string(src))
	if b.runtime == "" {
		t.Fatal("cmd/tollgate-lambda/main.go names no provided.* runtime")
	}
	f, err := parser.ParseFile(token.NewFileSet(), mainPath, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if s, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING && strings.HasPrefix(s, "TOLLGATE_") {
				b.env[s] = true
			}
		case *ast.SwitchStmt:
			// switch v := getenv("TOLLGATE_MODE"); v { case ...: }
			init, ok := n.Init.(*ast.AssignStmt)
			if !ok || len(init.Rhs) != 1 {
				return true
			}
			call, ok := init.Rhs[0].(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); !ok || lit.Value != `"TOLLGATE_MODE"` {
				return true
			}
			for _, st := range n.Body.List {
				for _, e := range st.(*ast.CaseClause).List {
					if lit, ok := e.(*ast.BasicLit); ok {
						s, _ := strconv.Unquote(lit.Value)
						b.modes[s] = true
					}
				}
			}
		}
		return true
	})
	if len(b.modes) < 2 || !b.env["TOLLGATE_TABLE"] {
		t.Fatalf("cmd/tollgate-lambda/main.go: modes %v, variables %v", b.modes, b.env)
	}
	return b
}

// (e) The functions are what `make lambda` builds and are configured as
// cmd/tollgate-lambda reads; the stream and the schedule reach the right
// modes.
func TestLambda(t *testing.T) {
	want := readLambdaBuild(t)
	report(t, "functions", lambdaProblems(loadModule(t, moduleDir), want))

	// The example points at the zip make lambda writes.
	ex := loadModule(t, exampleDir)
	e := newEvaluator(ex, nil, nil)
	in, err := e.instances(ex.modules["tollgate"])
	if err != nil {
		t.Fatal(err)
	}
	zip, err := in[0].str("lambda_zip_path")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(repoRoot, filepath.Clean(zip))
	if err != nil || filepath.ToSlash(rel) != want.zip {
		t.Errorf("the example's lambda_zip_path %q is %q from the repository root, make lambda writes %q", zip, rel, want.zip)
	}
}

// (f) The alarms watch metrics CloudWatch publishes, and cover what the
// issue asks for.
func TestAlarms(t *testing.T) {
	var cat metricCatalog
	readJSON(t, "testdata/cloudwatch_metrics.json", &cat)
	m := loadModule(t, moduleDir)
	for _, tc := range []struct {
		name string
		vars map[string]cty.Value
		want []string
	}{
		{"default", nil, []string{
			"AWS/DynamoDB ThrottledRequests", "AWS/DynamoDB SystemErrors", "AWS/Lambda IteratorAge",
			"AWS/Lambda Errors", "AWS/Lambda Throttles", "AWS/SQS ApproximateNumberOfMessagesVisible",
		}},
		{"without reconciler, with topic", map[string]cty.Value{
			"reconciler_enabled": cty.False, "create_alarm_topic": cty.True,
		}, []string{"AWS/DynamoDB ThrottledRequests", "AWS/Lambda Errors"}},
		{"with server and events", func() map[string]cty.Value {
			v := map[string]cty.Value{}
			for k, x := range serverModuleVars {
				v[k] = x
			}
			for k, x := range eventsVars {
				v[k] = x
			}
			return v
		}(), []string{"AWS/ApplicationELB HTTPCode_Target_5XX_Count", "AWS/ApplicationELB HTTPCode_ELB_5XX_Count",
			"AWS/ApplicationELB TargetResponseTime", "AWS/Lambda Errors", "AWS/Lambda Throttles"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probs, covered := alarmProblems(m, tc.vars, cat)
			report(t, "alarms", probs)
			for _, w := range tc.want {
				if !covered[w] {
					t.Errorf("no alarm on %s", w)
				}
			}
		})
	}
	// Turned off, there are none.
	e := newEvaluator(m, withVars(map[string]cty.Value{"alarms_enabled": cty.False}), nil)
	for _, key := range keys(m.resources) {
		if strings.HasPrefix(key, "aws_cloudwatch_metric_alarm.") {
			if in, err := e.instances(m.resources[key]); err != nil || len(in) != 0 {
				t.Errorf("alarms_enabled=false: %s has %d instances (%v)", key, len(in), err)
			}
		}
	}
}

// Each check catches what it is there for: a mutated copy of a file fails
// the check with the problem named.
func TestMutationsAreCaught(t *testing.T) {
	s := loadSchema(t)
	build := readLambdaBuild(t)
	var cat metricCatalog
	readJSON(t, "testdata/cloudwatch_metrics.json", &cat)
	type check func(*module) []string
	schemaCheck := func(m *module) []string { return schemaProblems(m, s) }
	refCheck := func(m *module) []string { return referenceProblems(m, s, loader(t)) }
	layoutCheck := func(m *module) []string { return layoutProblems(m, nil, dynamodb.Layout(), "PAY_PER_REQUEST") }
	provisionedCheck := func(m *module) []string {
		return layoutProblems(m, map[string]cty.Value{"billing_mode": cty.StringVal("PROVISIONED")}, dynamodb.Layout(), "PROVISIONED")
	}
	versionCheck := func(m *module) []string { return versionRecordProblems(m) }
	tenantCheck := func(m *module) []string { return tenantPolicyProblems(m, []string{"3f9a0c1d2e4b5a67"}) }
	lambdaCheck := func(m *module) []string { return lambdaProblems(m, build) }
	alarmCheck := func(m *module) []string { p, _ := alarmProblems(m, nil, cat); return p }
	for _, tc := range []struct {
		name           string
		dir, file      string
		old, new, want string
		check          check
	}{
		{"unknown argument", moduleDir, "lambda.tf", "  memory_size      = var.lambda_memory_size\n",
			"  memory_size      = var.lambda_memory_size\n  memory_size_mb = 256\n", `unknown argument "memory_size_mb"`, schemaCheck},
		{"unknown nested argument", moduleDir, "dynamodb.tf", "    enabled        = true\n",
			"    enabled        = true\n    ttl_seconds    = 60\n", `unknown argument "ttl_seconds"`, schemaCheck},
		{"computed attribute set", moduleDir, "alarms.tf", `  name  = "${var.name_prefix}-alarms"`,
			`  arn   = "x"`, "arn is computed", schemaCheck},
		{"unknown block in dynamic", moduleDir, "dynamodb.tf", `dynamic "attribute"`, `dynamic "attributes"`,
			"unknown block in dynamic", schemaCheck},
		{"unknown resource type", moduleDir, "alarms.tf", `resource "aws_sns_topic"`, `resource "aws_sns_topik"`,
			"resource type aws_sns_topik is not in the pinned", schemaCheck},
		{"missing required argument", moduleDir, "iam.tf", "  policy_arn = aws_iam_policy.functions.arn\n", "",
			`missing required argument "policy_arn"`, schemaCheck},
		{"dangling variable", moduleDir, "dynamodb.tf", "name                        = var.table_name",
			"name                        = var.table_nam", "var.table_nam is not declared", refCheck},
		{"dangling resource", moduleDir, "lambda.tf", "role             = aws_iam_role.functions.arn",
			"role             = aws_iam_role.function.arn", "aws_iam_role.function: no such resource", refCheck},
		{"unknown attribute", moduleDir, "outputs.tf", "aws_dynamodb_table.tollgate.stream_arn",
			"aws_dynamodb_table.tollgate.stream", "has no attribute stream", refCheck},
		{"counted resource not indexed", moduleDir, "lambda.tf", "aws_lambda_function.reconciler[0].function_name",
			"aws_lambda_function.reconciler.function_name", "has count or for_each", refCheck},
		{"each without for_each", moduleDir, "lambda.tf", `name              = "/aws/lambda/${local.aggregator_name}"`,
			`name              = "/aws/lambda/${each.key}"`, "each.key outside a block with for_each", refCheck},
		{"unused variable", moduleDir, "variables.tf", "# ---------------------------------------------------------------- naming",
			"variable \"spare\" {\n  type = string\n}", "variable spare is declared but never used", refCheck},
		{"ignore_changes of no argument", moduleDir, "dynamodb.tf", "ignore_changes = [item]", "ignore_changes = [items]",
			"ignore_changes names items", refCheck},
		{"unknown function", moduleDir, "iam.tf", "concat(local.item_actions", "concatenate(local.item_actions",
			"unknown function concatenate", refCheck},
		{"example passes an unknown variable", exampleDir, "main.tf", "  log_retention_days = 14\n",
			"  log_retention_days = 14\n  log_retention = 14\n", "the module has no variable log_retention", refCheck},
		{"example reads an unknown output", exampleDir, "main.tf", "module.tollgate.admin_role_arn",
			"module.tollgate.admin_role", "the module has no such output", refCheck},
		{"example misses a required variable", exampleDir, "main.tf", `  lambda_zip_path = "${path.root}/../../../../dist/tollgate-lambda.zip"`,
			"", "required variable lambda_zip_path is not set", refCheck},
		{"index projection", moduleDir, "dynamodb.tf", `GSI2 = { hash_key = "GSI2PK", range_key = "GSI2SK", projection_type = "KEYS_ONLY" }`,
			`GSI2 = { hash_key = "GSI2PK", range_key = "GSI2SK", projection_type = "ALL" }`, "the backend creates", layoutCheck},
		{"missing index", moduleDir, "dynamodb.tf", `    GSI4 = { hash_key = "GSI4PK", range_key = "GSI4SK", projection_type = "KEYS_ONLY" }` + "\n",
			"", "the backend creates", layoutCheck},
		{"ttl attribute", moduleDir, "dynamodb.tf", `ttl_attribute   = "ttl"`, `ttl_attribute   = "expires"`,
			`the backend expires items by "ttl"`, layoutCheck},
		{"stream view", moduleDir, "dynamodb.tf", `"NEW_AND_OLD_IMAGES"`, `"NEW_IMAGE"`, "stream enabled", layoutCheck},
		{"index capacity under PROVISIONED", moduleDir, "dynamodb.tf", "read_capacity   = local.provisioned ? var.index_read_capacity : null",
			"read_capacity   = null", "read_capacity is not set under PROVISIONED", provisionedCheck},
		{"schema version", moduleDir, "dynamodb.tf", "schema_version = 2", "schema_version = 1",
			"CheckTable reads", versionCheck},
		{"version record overwritten", moduleDir, "dynamodb.tf", "ignore_changes = [item]", "ignore_changes = []",
			"not in lifecycle.ignore_changes", versionCheck},
		{"key prefix", moduleDir, "iam.tf", `namespace_key_separator = "/"`, `namespace_key_separator = "#"`,
			"begin with", tenantCheck},
		{"registry key", moduleDir, "iam.tf", `registry_partition_key  = "_/SYSTEM#"`, `registry_partition_key  = "_/SYSTEM"`,
			"the backend's registry partition", tenantCheck},
		{"tenant on GSI4", moduleDir, "iam.tf", `tenant_indexes          = ["GSI1", "GSI2", "GSI3"]`,
			`tenant_indexes          = ["GSI1", "GSI2", "GSI3", "GSI4"]`, "a tenant may use the table and the indexes", tenantCheck},
		{"tenant Scan", moduleDir, "iam.tf", `"dynamodb:Query", "dynamodb:ConditionCheckItem"]`, `"dynamodb:Query", "dynamodb:ConditionCheckItem", "dynamodb:Scan"]`,
			"dynamodb:Scan in a LeadingKeys statement", tenantCheck},
		{"architecture", moduleDir, "lambda.tf", `lambda_architecture = "arm64"`, `lambda_architecture = "x86_64"`,
			"make lambda builds for arm64", lambdaCheck},
		{"handler", moduleDir, "lambda.tf", `lambda_handler      = "bootstrap"`, `lambda_handler      = "main"`,
			`make lambda builds "bootstrap"`, lambdaCheck},
		{"runtime", moduleDir, "lambda.tf", `"provided.al2023"`, `"provided.al2"`, "cmd/tollgate-lambda is built for", lambdaCheck},
		{"mode", moduleDir, "lambda.tf", `TOLLGATE_MODE               = "aggregate"`, `TOLLGATE_MODE               = "aggregator"`,
			`TOLLGATE_MODE "aggregator" is not one`, lambdaCheck},
		{"environment", moduleDir, "lambda.tf", `TOLLGATE_MODE  = "reconcile"`, `TOLLGATE_MODE  = "reconcile"
      TOLLGATE_INTERVAL = "1m"`, "TOLLGATE_INTERVAL is not read", lambdaCheck},
		{"no tumbling window", moduleDir, "variables.tf", "  default     = 900\n", "  default     = 0\n",
			"no tumbling window", lambdaCheck},
		{"metric name", moduleDir, "alarms.tf", `metric_name         = "IteratorAge"`, `metric_name         = "IteratorAgeMs"`,
			`has no metric "IteratorAgeMs"`, alarmCheck},
		{"metric dimensions", moduleDir, "alarms.tf", "          Operation = metric_query.value\n", "",
			"CloudWatch publishes it by", alarmCheck},
		{"statistic", moduleDir, "alarms.tf", `statistic           = "Maximum"`, `statistic           = "Max"`,
			`statistic "Max"`, alarmCheck},
		{"unused metric query", moduleDir, "alarms.tf", `expression  = "SUM([${join(",", [for i, op in local.table_operations : "m${i}"])}])"`,
			`expression  = "SUM([m0])"`, "fetched but no expression uses it", alarmCheck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if probs := tc.check(parseModule(tc.dir, readModule(t, tc.dir))); len(probs) > 0 {
				t.Fatalf("the unmutated files already fail: %v", probs)
			}
			m := parseModule(tc.dir, mutate(t, readModule(t, tc.dir), tc.file, tc.old, tc.new))
			probs := append(m.problems, tc.check(m)...)
			for _, p := range probs {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Errorf("mutation not caught: want a problem containing %q, got %q", tc.want, probs)
		})
	}
}

// terraformBinary returns the terraform on PATH, or skips the test.
func terraformBinary(t *testing.T) string {
	t.Helper()
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("terraform is not on PATH (it is not in the package registries reachable from CI): " +
			"the HCL checks of this package ran without it")
	}
	return tf
}

// terraform runs tf with args in dir, with a timeout, and returns its
// combined output.
func terraform(t *testing.T, tf, dir string, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, tf, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_INPUT=0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// (g) terraform fmt: the files are in canonical format.
func TestTerraformFmt(t *testing.T) {
	tf := terraformBinary(t)
	out, err := terraform(t, tf, moduleDir, time.Minute, "fmt", "-check", "-recursive", "-diff", "-no-color", ".")
	if err != nil {
		t.Errorf("terraform fmt -check -recursive: %v\n%s", err, out)
	}
}

// (g) terraform validate, where terraform init can install the AWS
// provider; otherwise skipped, saying why.
func TestTerraformValidate(t *testing.T) {
	tf := terraformBinary(t)
	for _, tc := range modules {
		t.Run(tc.name, func(t *testing.T) {
			// A copy, so that init writes .terraform outside the tree; the
			// example's copy keeps its place relative to the module.
			root := t.TempDir()
			for _, d := range []string{moduleDir, exampleDir} {
				for name, src := range readModule(t, d) {
					dst := filepath.Join(root, d, name)
					if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(dst, src, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			dir := filepath.Join(root, tc.dir)
			out, err := terraform(t, tf, dir, 30*time.Second, "init", "-backend=false", "-input=false", "-no-color")
			if err != nil {
				msg := strings.TrimSpace(out)
				if i := strings.Index(msg, "Error:"); i >= 0 {
					msg = msg[i:]
				}
				if len(msg) > 600 {
					msg = msg[:600] + "..."
				}
				t.Skipf("terraform validate skipped: terraform init -backend=false could not install the hashicorp/aws provider "+
					"(the Terraform registry is unreachable from this machine, or no provider mirror is configured): %v\n%s", err, msg)
			}
			if out, err := terraform(t, tf, dir, 2*time.Minute, "validate", "-no-color"); err != nil {
				t.Errorf("terraform validate: %v\n%s", err, out)
			}
		})
	}
}
