package terraform_test

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/tollgate-rl/tollgate/store/dynamodb"
)

// A zip path for the module's only variable without a default.
var zipVars = map[string]cty.Value{"lambda_zip_path": cty.StringVal("dist/tollgate-lambda.zip")}

// eventsVars add the events function, with package events' example rules
// (events/testdata/emr-rules.yaml: two sources).
var eventsVars = map[string]cty.Value{"events_rules": cty.StringVal(mustRead("../../events/testdata/emr-rules.yaml")), "events_namespace": cty.StringVal("billing")}

func mustRead(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func withVars(extra map[string]cty.Value) map[string]cty.Value {
	out := map[string]cty.Value{}
	for k, v := range zipVars {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// problems collects problems as a check goes.
type problems []string

func (p *problems) addf(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// ---------------------------------------------------------------- (c) table layout

// layoutProblems compares the table the module creates, with the
// variables vars, with want (dynamodb.Layout()). billing is the billing
// mode vars select: under PROVISIONED the table and every index need
// capacities, under PAY_PER_REQUEST none may be set.
func layoutProblems(m *module, vars map[string]cty.Value, want dynamodb.TableLayout, billing string) []string {
	var p problems
	b := m.resources["aws_dynamodb_table.tollgate"]
	if b == nil {
		return []string{"no resource aws_dynamodb_table.tollgate"}
	}
	e := newEvaluator(m, withVars(vars), nil)
	insts, err := e.instances(b)
	if err != nil || len(insts) != 1 {
		return []string{fmt.Sprintf("aws_dynamodb_table.tollgate: %d instances, %v", len(insts), err)}
	}
	tbl := insts[0]
	str := func(in instance, name string) string {
		s, err := in.str(name)
		if err != nil {
			p.addf("%v", err)
		}
		return s
	}
	if got := str(tbl, "hash_key"); got != want.PartitionKey {
		p.addf("table hash_key %q, the backend's partition key is %q", got, want.PartitionKey)
	}
	if got := str(tbl, "range_key"); got != want.SortKey {
		p.addf("table range_key %q, the backend's sort key is %q", got, want.SortKey)
	}
	if got := str(tbl, "billing_mode"); got != billing {
		p.addf("billing_mode %q, want %q", got, billing)
	}
	if billing == "PAY_PER_REQUEST" && str(tbl, "billing_mode") != want.BillingMode {
		p.addf("the default billing mode is %q, the backend creates %q", str(tbl, "billing_mode"), want.BillingMode)
	}
	if str(tbl, "stream_enabled") != "true" || str(tbl, "stream_view_type") != want.StreamViewType {
		p.addf("stream enabled=%q view %q, want true and %q", str(tbl, "stream_enabled"), str(tbl, "stream_view_type"), want.StreamViewType)
	}
	checkCapacity := func(in instance, what string) {
		for _, name := range []string{"read_capacity", "write_capacity"} {
			got := str(in, name)
			if billing == "PROVISIONED" && got == "" {
				p.addf("%s: %s is not set under PROVISIONED", what, name)
			}
			if billing != "PROVISIONED" && got != "" {
				p.addf("%s: %s is %s under %s", what, name, got, billing)
			}
		}
	}
	checkCapacity(tbl, "table")

	ab, err := tbl.blocks("attribute")
	if err != nil {
		p.addf("attribute blocks: %v", err)
	}
	var gotAttrs []string
	for _, a := range ab {
		if typ := str(a, "type"); typ != "S" {
			p.addf("attribute %s is of type %q, the backend's key attributes are strings", str(a, "name"), typ)
		}
		gotAttrs = append(gotAttrs, str(a, "name"))
	}
	wantAttrs := slices.Clone(want.StringAttributes)
	sort.Strings(gotAttrs)
	sort.Strings(wantAttrs)
	if !slices.Equal(gotAttrs, wantAttrs) {
		p.addf("attributes %v, the backend defines %v", gotAttrs, wantAttrs)
	}

	gb, err := tbl.blocks("global_secondary_index")
	if err != nil {
		p.addf("global_secondary_index blocks: %v", err)
	}
	var gotIx, wantIx []string
	for _, g := range gb {
		gotIx = append(gotIx, fmt.Sprintf("%s %s/%s %s", str(g, "name"), str(g, "hash_key"), str(g, "range_key"), str(g, "projection_type")))
		if nk := str(g, "non_key_attributes"); nk != "" {
			p.addf("index %s projects non-key attributes %s", str(g, "name"), nk)
		}
		checkCapacity(g, "index "+str(g, "name"))
	}
	for _, ix := range want.Indexes {
		wantIx = append(wantIx, fmt.Sprintf("%s %s/%s %s", ix.Name, ix.PartitionKey, ix.SortKey, ix.Projection))
	}
	sort.Strings(gotIx)
	sort.Strings(wantIx)
	if !slices.Equal(gotIx, wantIx) {
		p.addf("indexes %q, the backend creates %q", gotIx, wantIx)
	}

	tb, err := tbl.blocks("ttl")
	if err != nil || len(tb) != 1 {
		p.addf("%d ttl blocks (%v), want 1", len(tb), err)
	} else if name, on := str(tb[0], "attribute_name"), str(tb[0], "enabled"); name != want.TTLAttribute || on != "true" {
		p.addf("ttl on %q enabled=%s, the backend expires items by %q", name, on, want.TTLAttribute)
	}
	return p
}

// versionRecordProblems checks the item the module writes for
// CheckTable: the key and attribute of dynamodb.VersionRecord, holding
// dynamodb.SchemaVersion, in the module's table, written once.
func versionRecordProblems(m *module) []string {
	var p problems
	b := m.resources["aws_dynamodb_table_item.schema_version"]
	if b == nil {
		return []string{"no aws_dynamodb_table_item.schema_version: CheckTable refuses a table without its version record"}
	}
	found := false
	for _, tr := range hclsyntax.Variables(b.Body.Attributes["table_name"].Expr) {
		found = found || traversalString(tr) == "aws_dynamodb_table.tollgate.name"
	}
	if !found {
		p.addf("the version record is not written to aws_dynamodb_table.tollgate")
	}
	insts, err := newEvaluator(m, zipVars, nil).instances(b)
	if err != nil || len(insts) != 1 {
		return append(p, fmt.Sprintf("version record: %d instances, %v", len(insts), err))
	}
	js, err := insts[0].str("item")
	if err != nil {
		return append(p, err.Error())
	}
	var item map[string]map[string]string
	if err := json.Unmarshal([]byte(js), &item); err != nil {
		return append(p, fmt.Sprintf("version record item %s: %v", js, err))
	}
	l := dynamodb.Layout()
	pk, sk, attr := dynamodb.VersionRecord()
	want := map[string]map[string]string{
		l.PartitionKey: {"S": pk},
		l.SortKey:      {"S": sk},
		attr:           {"N": strconv.Itoa(dynamodb.SchemaVersion)},
	}
	if !reflect.DeepEqual(item, want) {
		p.addf("version record %v, CheckTable reads %v", item, want)
	}
	ignored := false
	for _, lc := range b.Body.Blocks {
		if a := lc.Body.Attributes["ignore_changes"]; lc.Type == "lifecycle" && a != nil {
			for _, tr := range hclsyntax.Variables(a.Expr) {
				ignored = ignored || tr.RootName() == "item"
			}
		}
	}
	if !ignored {
		p.addf("the version record's item is not in lifecycle.ignore_changes: Terraform would undo an upgrade by tollgate deploy")
	}
	return p
}

// ---------------------------------------------------------------- (d) tenant policies

// A table ARN for the evaluation of the policies.
const testTableARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/tollgate"

// tenantPolicyProblems evaluates the tenant policy document for a tenant
// of the namespaces ids and checks it against the backend's key layout:
// the LeadingKeys values are the backend's prefixes of those namespaces,
// the registry statement names the backend's registry partition, the
// indexes are those whose keys carry the prefix, and every statement that
// touches items is confined by LeadingKeys.
func tenantPolicyProblems(m *module, ids []string) []string {
	var p problems
	b := m.data["aws_iam_policy_document.tenant"]
	if b == nil {
		return []string{"no data source aws_iam_policy_document.tenant"}
	}
	idVals := make([]cty.Value, len(ids))
	for i, id := range ids {
		idVals[i] = cty.StringVal(id)
	}
	tenants := cty.MapVal(map[string]cty.Value{"acme": cty.ObjectVal(map[string]cty.Value{
		"namespace_ids":  cty.ListVal(idVals),
		"principal_arns": cty.ListVal([]cty.Value{cty.StringVal("arn:aws:iam::123456789012:role/acme")}),
	})})
	known := map[string]cty.Value{"aws_dynamodb_table": cty.ObjectVal(map[string]cty.Value{
		"tollgate": cty.ObjectVal(map[string]cty.Value{"arn": cty.StringVal(testTableARN)}),
	})}
	e := newEvaluator(m, withVars(map[string]cty.Value{"tenants": tenants}), known)
	insts, err := e.instances(b)
	if err != nil || len(insts) != 1 {
		return []string{fmt.Sprintf("tenant policy: %d instances for one tenant, %v", len(insts), err)}
	}
	stmts, err := insts[0].blocks("statement")
	if err != nil {
		return []string{err.Error()}
	}
	var wantPrefixes []string
	for _, id := range ids {
		wantPrefixes = append(wantPrefixes, dynamodb.NamespaceKeyPrefix(id)+"*")
	}
	var wantIndexKeys []string
	for _, id := range ids {
		wantIndexKeys = append(wantIndexKeys, dynamodb.NamespaceIndexKeyPatterns(id)...)
	}
	namespaceIndex := testTableARN + "/index/" + dynamodb.IndexNames()[len(dynamodb.IndexNames())-1]
	allowedResources := map[string]bool{testTableARN: true}
	wantResources := []string{testTableARN}
	for _, ix := range dynamodb.NamespaceIndexes() {
		allowedResources[testTableARN+"/index/"+ix] = true
		wantResources = append(wantResources, testTableARN+"/index/"+ix)
	}
	seen := map[string]bool{}
	for _, st := range stmts {
		sid, _ := st.str("sid")
		seen[sid] = true
		actions, err := st.strs("actions")
		resources, err2 := st.strs("resources")
		if err != nil || err2 != nil {
			p.addf("statement %s: %v %v", sid, err, err2)
			continue
		}
		if eff, _ := st.str("effect"); eff != "Allow" {
			p.addf("statement %s: effect %q", sid, eff)
		}
		conds, err := st.blocks("condition")
		if err != nil {
			p.addf("statement %s: %v", sid, err)
			continue
		}
		var test string
		var leading []string
		for _, c := range conds {
			if v, _ := c.str("variable"); v == "dynamodb:LeadingKeys" {
				test, _ = c.str("test")
				leading, _ = c.strs("values")
			}
		}
		for _, r := range resources {
			if r == namespaceIndex && sid == "TollgateNamespaceIndex" {
				continue // checked below
			}
			if !allowedResources[r] {
				p.addf("statement %s: resource %s: a tenant may use the table and the indexes %v only", sid, r, dynamodb.NamespaceIndexes())
			}
		}
		if leading == nil {
			// Without LeadingKeys, nothing that reads or writes items.
			if !slices.Equal(actions, []string{"dynamodb:DescribeTable"}) {
				p.addf("statement %s: actions %v without a LeadingKeys condition", sid, actions)
			}
			continue
		}
		for _, a := range actions {
			if a == "dynamodb:Scan" || a == "dynamodb:DescribeTable" || strings.HasPrefix(a, "dynamodb:PartiQL") || strings.Contains(a, "*") {
				p.addf("statement %s: %s in a LeadingKeys statement (ForAllValues is true for requests without a partition key)", sid, a)
			}
		}
		switch sid {
		case "TollgateNamespaceItems":
			if test != "ForAllValues:StringLike" || !slices.Equal(leading, wantPrefixes) {
				p.addf("TollgateNamespaceItems: %s %v, the backend's keys of namespaces %v begin with %v", test, leading, ids, wantPrefixes)
			}
			if !slices.Equal(resources, wantResources) {
				p.addf("TollgateNamespaceItems: resources %v, want %v", resources, wantResources)
			}
		case "TollgateNamespaceIndex":
			if test != "ForAllValues:StringLike" || !slices.Equal(leading, wantIndexKeys) {
				p.addf("TollgateNamespaceIndex: %s %v, the backend's GSI4 keys of namespaces %v are %v", test, leading, ids, wantIndexKeys)
			}
			if !slices.Equal(resources, []string{namespaceIndex}) || !slices.Equal(actions, []string{"dynamodb:Query"}) {
				p.addf("TollgateNamespaceIndex: %v on %v, want Query on %s alone", actions, resources, namespaceIndex)
			}
		case "TollgateRegistryRead":
			if test != "ForAllValues:StringEquals" || !slices.Equal(leading, []string{dynamodb.RegistryPartitionKey()}) {
				p.addf("TollgateRegistryRead: %s %v, the backend's registry partition is %q", test, leading, dynamodb.RegistryPartitionKey())
			}
			if !slices.Equal(actions, []string{"dynamodb:GetItem"}) {
				p.addf("TollgateRegistryRead: actions %v, want GetItem alone", actions)
			}
		case "TollgateChanges":
			if test != "ForAllValues:StringEquals" || !slices.Equal(leading, []string{dynamodb.ChangesPartitionKey()}) {
				p.addf("TollgateChanges: %s %v, the backend's change generation partition is %q", test, leading, dynamodb.ChangesPartitionKey())
			}
			if !slices.Equal(actions, []string{"dynamodb:GetItem", "dynamodb:UpdateItem"}) {
				p.addf("TollgateChanges: actions %v, want GetItem and UpdateItem (no Put or Delete of the generation)", actions)
			}
		default:
			p.addf("statement %s: a LeadingKeys statement this test does not know", sid)
		}
	}
	for _, sid := range []string{"TollgateNamespaceItems", "TollgateNamespaceIndex", "TollgateRegistryRead", "TollgateChanges", "TollgateDescribeTable"} {
		if !seen[sid] {
			p.addf("tenant policy has no statement %s", sid)
		}
	}
	return p
}

// ---------------------------------------------------------------- (e) functions

// lambdaBuild is what `make lambda` builds and cmd/tollgate-lambda reads.
type lambdaBuild struct {
	arch, handler, runtime, zip string
	env                         map[string]bool // TOLLGATE_* variables main.go reads
	modes                       map[string]bool // TOLLGATE_MODE values it accepts
}

// lambdaProblems checks every aws_lambda_function of m against the build,
// the event source mapping (the aggregator, on the table's stream, with a
// tumbling window and an on-failure destination) and the schedule target
// (the reconciler).
func lambdaProblems(m *module, want lambdaBuild) []string {
	var p problems
	e := newEvaluator(m, withVars(eventsVars), nil)
	modeOf := map[string]string{} // function resource name -> TOLLGATE_MODE
	for _, key := range keys(m.resources) {
		if !strings.HasPrefix(key, "aws_lambda_function.") {
			continue
		}
		insts, err := e.instances(m.resources[key])
		if err != nil || len(insts) == 0 {
			p.addf("%s: no instance with the default variables (%v)", key, err)
			continue
		}
		f := insts[0]
		if got, _ := f.str("runtime"); got != want.runtime {
			p.addf("%s: runtime %q, cmd/tollgate-lambda is built for %q", key, got, want.runtime)
		}
		if got, _ := f.str("handler"); got != want.handler {
			p.addf("%s: handler %q, make lambda builds %q", key, got, want.handler)
		}
		if got, _ := f.strs("architectures"); !slices.Equal(got, []string{want.arch}) {
			p.addf("%s: architectures %v, make lambda builds for %s", key, got, want.arch)
		}
		if pt, _ := f.str("package_type"); pt != "" && pt != "Zip" {
			p.addf("%s: package_type %s, make lambda builds a zip", key, pt)
		}
		if got, _ := f.str("filename"); got != zipVars["lambda_zip_path"].AsString() {
			p.addf("%s: filename %q is not var.lambda_zip_path", key, got)
		}
		envs, err := f.blocks("environment")
		if err != nil || len(envs) != 1 {
			p.addf("%s: %d environment blocks (%v)", key, len(envs), err)
			continue
		}
		vars, err := envs[0].value("variables")
		if err != nil || vars == cty.NilVal || !vars.CanIterateElements() {
			p.addf("%s: environment variables: %v", key, err)
			continue
		}
		env := map[string]string{}
		for it := vars.ElementIterator(); it.Next(); {
			k, v := it.Element()
			env[k.AsString()] = ""
			if v.IsKnown() && !v.IsNull() && v.Type() == cty.String {
				env[k.AsString()] = v.AsString()
			}
		}
		for _, k := range keys(env) {
			if !want.env[k] {
				p.addf("%s: environment variable %s is not read by cmd/tollgate-lambda", key, k)
			}
		}
		if _, ok := env["TOLLGATE_TABLE"]; !ok {
			p.addf("%s: TOLLGATE_TABLE is not set (required)", key)
		}
		if !want.modes[env["TOLLGATE_MODE"]] {
			p.addf("%s: TOLLGATE_MODE %q is not one cmd/tollgate-lambda accepts (%v)", key, env["TOLLGATE_MODE"], keys(want.modes))
		}
		modeOf[strings.TrimPrefix(key, "aws_lambda_function.")] = env["TOLLGATE_MODE"]
	}

	// The function a reference in attribute name of b names, and its mode.
	target := func(b *hclsyntax.Block, name string) (string, string) {
		a := b.Body.Attributes[name]
		if a == nil {
			return "", ""
		}
		for _, tr := range hclsyntax.Variables(a.Expr) {
			if tr.RootName() == "aws_lambda_function" {
				fn := step(tr, 1)
				return fn, modeOf[fn]
			}
		}
		return "", ""
	}
	refersTo := func(b *hclsyntax.Block, name, want string) bool {
		a := b.Body.Attributes[name]
		if a == nil {
			return false
		}
		for _, tr := range hclsyntax.Variables(a.Expr) {
			if traversalString(tr) == want {
				return true
			}
		}
		return false
	}

	esms := 0
	for _, key := range keys(m.resources) {
		b := m.resources[key]
		switch {
		case strings.HasPrefix(key, "aws_lambda_event_source_mapping."):
			esms++
			if fn, mode := target(b, "function_name"); mode != "aggregate" {
				p.addf("%s: invokes %q in mode %q, the stream needs the aggregate mode", key, fn, mode)
			}
			if !refersTo(b, "event_source_arn", "aws_dynamodb_table.tollgate.stream_arn") {
				p.addf("%s: event_source_arn is not the table's stream", key)
			}
			insts, err := e.instances(b)
			if err != nil || len(insts) != 1 {
				p.addf("%s: %v", key, err)
				continue
			}
			in := insts[0]
			if w, _ := in.str("tumbling_window_in_seconds"); w == "" || w == "0" {
				p.addf("%s: no tumbling window: the aggregator refuses batches without one", key)
			}
			if sp, _ := in.str("starting_position"); sp != "TRIM_HORIZON" {
				p.addf("%s: starting_position %q, want TRIM_HORIZON (nothing written before polling starts is missed)", key, sp)
			}
			if bis, _ := in.str("bisect_batch_on_function_error"); bis != "true" {
				p.addf("%s: bisect_batch_on_function_error is not true", key)
			}
			if rt, _ := in.strs("function_response_types"); len(rt) > 0 {
				p.addf("%s: function_response_types %v: the aggregator does not report batch item failures", key, rt)
			}
			dc, _ := in.blocks("destination_config")
			var onFailure []instance
			for _, d := range dc {
				of, _ := d.blocks("on_failure")
				onFailure = append(onFailure, of...)
			}
			if len(onFailure) != 1 || onFailure[0].body.Attributes["destination_arn"] == nil {
				p.addf("%s: no on-failure destination", key)
			}
		case strings.HasPrefix(key, "aws_cloudwatch_event_target."):
			// A schedule invokes the reconciler; an event pattern, the
			// events function.
			want, what := "reconcile", "the schedule"
			for _, tr := range hclsyntax.Variables(b.Body.Attributes["rule"].Expr) {
				if rule := m.resources["aws_cloudwatch_event_rule."+step(tr, 1)]; tr.RootName() == "aws_cloudwatch_event_rule" && rule != nil &&
					rule.Body.Attributes["event_pattern"] != nil {
					want, what = "events", "an event pattern"
				}
			}
			if fn, mode := target(b, "arn"); mode != want {
				p.addf("%s: targets %q in mode %q; %s is for the %s mode", key, fn, mode, what, want)
			}
		}
	}
	if esms != 1 {
		p.addf("%d event source mappings, want 1", esms)
	}
	return p
}

// traversalString renders a traversal of attribute steps as a.b.c
// ("[...]" for an index).
func traversalString(tr hcl.Traversal) string {
	parts := make([]string, len(tr))
	for i, s := range tr {
		switch s := s.(type) {
		case hcl.TraverseRoot:
			parts[i] = s.Name
		case hcl.TraverseAttr:
			parts[i] = s.Name
		default:
			parts[i] = "[...]"
		}
	}
	return strings.Join(parts, ".")
}
