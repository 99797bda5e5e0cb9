package terraform_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/tollgate-rl/tollgate/deploy"
)

// The module's IAM policies are checked against package deploy, the single
// source of Tollgate's IAM statements: each aws_iam_policy_document is
// evaluated for a sample table and tenant, and its statements compared,
// by Sid, with deploy.PolicyDocument's for the same table ARN and
// namespace ids (actions and resources as sets, conditions exactly). The
// functions' statements that are no persona's (logs, failure queue) are
// compared with the CloudFormation template's for the same functions.

// stmt is a policy statement in a canonical form.
type stmt struct {
	Effect    string
	Actions   []string // sorted
	Resources []string // sorted
	Condition map[string]map[string][]string
}

func (s stmt) String() string {
	b, _ := json.Marshal(s)
	return string(b)
}

func canonical(effect string, actions, resources []string, cond map[string]map[string][]string) stmt {
	a := slices.Compact(slices.Sorted(slices.Values(actions)))
	r := slices.Compact(slices.Sorted(slices.Values(resources)))
	for _, vars := range cond {
		for k, v := range vars {
			vars[k] = slices.Sorted(slices.Values(v))
		}
	}
	if len(cond) == 0 {
		cond = nil
	}
	return stmt{Effect: effect, Actions: a, Resources: r, Condition: cond}
}

// Known values for the resources the policy documents name.
const (
	testStreamARN = testTableARN + "/stream/2026-01-01T00:00:00.000"
	testQueueARN  = "arn:aws:sqs:eu-west-1:123456789012:tollgate-aggregator-failures"
	testLogGroup  = "arn:aws:logs:eu-west-1:123456789012:log-group:/aws/lambda/tollgate-"
)

// policyKnown gives the attributes the policy documents read.
func policyKnown() map[string]cty.Value {
	arn := func(s string) cty.Value { return cty.ObjectVal(map[string]cty.Value{"arn": cty.StringVal(s)}) }
	return map[string]cty.Value{
		"aws_dynamodb_table": cty.ObjectVal(map[string]cty.Value{"tollgate": cty.ObjectVal(map[string]cty.Value{
			"arn": cty.StringVal(testTableARN), "stream_arn": cty.StringVal(testStreamARN), "name": cty.StringVal("tollgate"),
		})}),
		"aws_sqs_queue": cty.ObjectVal(map[string]cty.Value{"aggregator_failures": arn(testQueueARN)}),
		"aws_cloudwatch_log_group": cty.ObjectVal(map[string]cty.Value{
			"aggregator": arn(testLogGroup + "aggregator"),
			"reconciler": cty.TupleVal([]cty.Value{arn(testLogGroup + "reconciler")}),
			"events":     cty.EmptyTupleVal, // no events_rules
		}),
	}
}

// tenantVars makes var.tenants: one tenant, "acme", of the namespaces ids.
func tenantVars(ids []string) map[string]cty.Value {
	vals := make([]cty.Value, len(ids))
	for i, id := range ids {
		vals[i] = cty.StringVal(id)
	}
	return withVars(map[string]cty.Value{"tenants": cty.MapVal(map[string]cty.Value{"acme": cty.ObjectVal(map[string]cty.Value{
		"namespace_ids":  cty.ListVal(vals),
		"principal_arns": cty.ListVal([]cty.Value{cty.StringVal("arn:aws:iam::123456789012:role/acme")}),
	})})})
}

// hclStatements evaluates the data source aws_iam_policy_document.name
// (its only instance) into statements by Sid.
func hclStatements(m *module, name string, ids []string) (map[string]stmt, error) {
	b := m.data["aws_iam_policy_document."+name]
	if b == nil {
		return nil, fmt.Errorf("no data source aws_iam_policy_document.%s", name)
	}
	insts, err := newEvaluator(m, tenantVars(ids), policyKnown()).instances(b)
	if err != nil || len(insts) != 1 {
		return nil, fmt.Errorf("aws_iam_policy_document.%s: %d instances for one tenant (%v)", name, len(insts), err)
	}
	blocks, err := insts[0].blocks("statement")
	if err != nil {
		return nil, err
	}
	out := map[string]stmt{}
	for _, st := range blocks {
		sid, err := st.str("sid")
		if err != nil || sid == "" {
			return nil, fmt.Errorf("%s: a statement without a known sid (%v)", name, err)
		}
		effect, _ := st.str("effect")
		if effect == "" {
			effect = "Allow" // the data source's default
		}
		actions, err := st.strs("actions")
		if err != nil {
			return nil, err
		}
		resources, err := st.strs("resources")
		if err != nil {
			return nil, err
		}
		conds, err := st.blocks("condition")
		if err != nil {
			return nil, err
		}
		cond := map[string]map[string][]string{}
		for _, c := range conds {
			test, _ := c.str("test")
			variable, _ := c.str("variable")
			values, err := c.strs("values")
			if err != nil {
				return nil, err
			}
			if cond[test] == nil {
				cond[test] = map[string][]string{}
			}
			cond[test][variable] = append(cond[test][variable], values...)
		}
		if _, dup := out[sid]; dup {
			return nil, fmt.Errorf("%s: sid %s twice", name, sid)
		}
		out[sid] = canonical(effect, actions, resources, cond)
	}
	return out, nil
}

// generatorStatements returns deploy.PolicyDocument's statements by Sid.
func generatorStatements(persona deploy.Persona, ids []string) (map[string]stmt, error) {
	doc, err := deploy.PolicyDocument(persona, deploy.PolicyOptions{Tables: []string{testTableARN}, NamespaceIDs: ids})
	if err != nil {
		return nil, err
	}
	out := map[string]stmt{}
	for _, s := range doc.Statement {
		var res []string
		for _, r := range s.Resource {
			res = append(res, fmt.Sprint(r))
		}
		out[s.Sid] = canonical(s.Effect, s.Action, res, s.Condition)
	}
	return out, nil
}

// diffStatements reports where got (the module's) and want differ.
func diffStatements(what string, got, want map[string]stmt) []string {
	var p problems
	for _, sid := range keys(want) {
		g, ok := got[sid]
		switch {
		case !ok:
			p.addf("%s: no statement %s; the generator's is %v", what, sid, want[sid])
		case g.String() != want[sid].String():
			p.addf("%s: statement %s is %v; the generator's is %v", what, sid, g, want[sid])
		}
	}
	for _, sid := range keys(got) {
		if _, ok := want[sid]; !ok {
			p.addf("%s: statement %s (%v) is not the generator's", what, sid, got[sid])
		}
	}
	return p
}

// lambdaOnlySids are the functions' statements outside the worker persona.
var lambdaOnlySids = []string{"FailedBatches", "Logs"}

// policyMatchProblems compares every policy document of m with the
// generator's, for a tenant of the namespaces ids, and the functions'
// Lambda-only statements with the template's (cfnLambda, by Sid).
func policyMatchProblems(m *module, ids []string, cfnLambda map[string]stmt) []string {
	var p problems
	for _, c := range []struct {
		data    string
		persona deploy.Persona
		ids     []string
	}{
		{"functions", deploy.PersonaWorker, nil},
		{"admin", deploy.PersonaAdmin, nil},
		{"tenant", deploy.PersonaAdmin, ids},
		{"tenant_acquire", deploy.PersonaAcquire, ids},
	} {
		got, err := hclStatements(m, c.data, ids)
		if err != nil {
			p.addf("%v", err)
			continue
		}
		want, err := generatorStatements(c.persona, c.ids)
		if err != nil {
			p.addf("generator %s %v: %v", c.persona, c.ids, err)
			continue
		}
		what := fmt.Sprintf("aws_iam_policy_document.%s (%s persona, namespaces %v)", c.data, c.persona, c.ids)
		if c.data == "functions" {
			lambda := map[string]stmt{}
			for _, sid := range lambdaOnlySids {
				if s, ok := got[sid]; ok {
					lambda[sid] = s
					delete(got, sid)
				}
			}
			p = append(p, diffStatements(what+" vs the template's tollgate-lambda policy", lambda, cfnLambda)...)
		}
		p = append(p, diffStatements(what, got, want)...)
	}
	return p
}

// templateLambdaStatements returns the statements of the template's
// WorkerRole that are no persona's (policy tollgate-lambda), by Sid, with
// the template's references resolved to the values policyKnown gives the
// module's resources (a log group's Arn attribute ends in ":*").
func templateLambdaStatements(t *testing.T) map[string]stmt {
	t.Helper()
	b, err := deploy.Template(deploy.TemplateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var tpl struct {
		Resources map[string]struct {
			Properties struct {
				Policies []struct {
					PolicyName     string
					PolicyDocument struct {
						Statement []struct {
							Sid      string
							Effect   string
							Action   []string
							Resource []any
						}
					}
				}
			}
		}
	}
	if err := json.Unmarshal(b, &tpl); err != nil {
		t.Fatal(err)
	}
	resolve := map[string]string{
		`{"Fn::GetAtt":["AggregatorLogGroup","Arn"]}`: testLogGroup + "aggregator:*",
		`{"Fn::GetAtt":["ReconcilerLogGroup","Arn"]}`: testLogGroup + "reconciler:*",
		`{"Fn::GetAtt":["FailureQueue","Arn"]}`:       testQueueARN,
	}
	out := map[string]stmt{}
	for _, pol := range tpl.Resources["WorkerRole"].Properties.Policies {
		if pol.PolicyName != "tollgate-lambda" {
			continue
		}
		for _, s := range pol.PolicyDocument.Statement {
			var res []string
			for _, r := range s.Resource {
				j, _ := json.Marshal(r)
				v, ok := resolve[string(j)]
				if !ok {
					t.Fatalf("the template's tollgate-lambda statement %s names %s, which this test does not resolve", s.Sid, j)
				}
				res = append(res, v)
			}
			out[s.Sid] = canonical(s.Effect, s.Action, res, nil)
		}
	}
	if len(out) == 0 {
		t.Fatal("the template's WorkerRole has no tollgate-lambda policy")
	}
	return out
}

// The module's policies say what deploy.Policy says for the same persona,
// table and namespaces; the functions' other statements are the
// template's.
func TestPoliciesMatchGenerator(t *testing.T) {
	m := loadModule(t, moduleDir)
	cfn := templateLambdaStatements(t)
	for _, tc := range []struct {
		name string
		ids  []string
	}{
		{"one namespace", []string{"3f9a0c1d2e4b5a67"}},
		{"three namespaces", []string{"fedcba9876543210", "0123456789abcdef", "00000000000000ff"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			report(t, "policies", policyMatchProblems(m, tc.ids, cfn))
		})
	}
}

// Each way the module's policies can drift from the generator's is caught.
func TestPolicyMutationsAreCaught(t *testing.T) {
	cfn := templateLambdaStatements(t)
	ids := []string{"3f9a0c1d2e4b5a67"}
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"tenant loses GSI4", `actions   = ["dynamodb:Query"]`, `actions   = ["dynamodb:GetItem"]`,
			"statement TollgateNamespaceIndex is"},
		{"admin loses BatchWriteItem", `admin_actions = concat(local.item_actions, ["dynamodb:BatchWriteItem"])`,
			`admin_actions = local.item_actions`, "aws_iam_policy_document.tenant (admin persona"},
		{"worker gains BatchWriteItem", `write_actions = ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"]`,
			`write_actions = ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"]`,
			"aws_iam_policy_document.functions (worker persona"},
		{"admin gains DeleteTable", `table_admin_actions = ["dynamodb:CreateTable", "dynamodb:UpdateTimeToLive"]`,
			`table_admin_actions = ["dynamodb:CreateTable", "dynamodb:UpdateTimeToLive", "dynamodb:DeleteTable"]`,
			"statement TollgateTableAdmin is"},
		{"acquire on GSI1", `acquire_indexes         = ["GSI2", "GSI3"]`, `acquire_indexes         = ["GSI1", "GSI2", "GSI3"]`,
			"aws_iam_policy_document.tenant_acquire (acquire persona"},
		{"one stream only", `resources = ["${local.table_arn}/stream/*"]`, `resources = [aws_dynamodb_table.tollgate.stream_arn]`,
			"statement TollgateStream is"},
		{"registry writable", `    actions   = ["dynamodb:GetItem"]`, `    actions   = ["dynamodb:GetItem", "dynamodb:PutItem"]`,
			"statement TollgateRegistryRead is"},
		{"statement renamed", `sid       = "TollgateDescribeTable"`, `sid       = "CheckTable"`, "no statement TollgateDescribeTable"},
		{"log streams of the group itself", `["${aws_cloudwatch_log_group.aggregator.arn}:*"]`, `[aws_cloudwatch_log_group.aggregator.arn]`,
			"tollgate-lambda policy: statement Logs is"},
		{"no failure queue", `    sid       = "FailedBatches"`, `    sid       = "FailureQueue"`, "no statement FailedBatches"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := parseModule(moduleDir, mutate(t, readModule(t, moduleDir), "iam.tf", tc.old, tc.new))
			probs := append(m.problems, policyMatchProblems(m, ids, cfn)...)
			for _, p := range probs {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Errorf("mutation not caught: want a problem containing %q, got %q", tc.want, probs)
		})
	}
}
