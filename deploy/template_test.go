package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/tollgate-rl/tollgate/store/dynamodb"
)

// cfnTemplate is a parsed template.
type cfnTemplate struct {
	raw        map[string]any
	Parameters map[string]map[string]any
	Conditions map[string]any
	Resources  map[string]map[string]any
	Outputs    map[string]map[string]any
}

func parseTemplate(t *testing.T, b []byte) *cfnTemplate {
	t.Helper()
	tpl := &cfnTemplate{}
	if err := json.Unmarshal(b, &tpl.raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, tpl); err != nil {
		t.Fatal(err)
	}
	return tpl
}

// pseudo are CloudFormation's pseudo parameters.
var pseudo = []string{"AWS::AccountId", "AWS::NotificationARNs", "AWS::NoValue", "AWS::Partition",
	"AWS::Region", "AWS::StackId", "AWS::StackName", "AWS::URLSuffix"}

// subVar matches ${Name} and ${Name.Attr} in Fn::Sub, not ${!literal}.
var subVar = regexp.MustCompile(`\$\{([^!}][^}]*)\}`)

// templateErrors returns everything wrong with a template: its sections,
// each resource against its pinned schema, every Ref, GetAtt, Sub and
// condition, unused parameters and conditions, and the outputs.
func templateErrors(t *testing.T, tpl *cfnTemplate, schemas map[string]*resourceSchema) []string {
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	for k := range tpl.raw {
		if !slices.Contains([]string{"AWSTemplateFormatVersion", "Description", "Parameters", "Conditions", "Resources", "Outputs"}, k) {
			fail("unexpected section %s", k)
		}
	}
	usedParams, usedConds := map[string]bool{}, map[string]bool{}
	// refs checks every reference under v; local holds Fn::Sub's own variables.
	var refs func(where string, v any, local map[string]bool)
	name := func(where, n string, local map[string]bool) {
		base, attr, hasAttr := strings.Cut(n, ".")
		switch {
		case local[n]:
		case tpl.Parameters[n] != nil:
			usedParams[n] = true
		case slices.Contains(pseudo, n):
		case tpl.Resources[base] != nil:
			if s := schemas[str(tpl.Resources[base]["Type"])]; hasAttr && (s == nil || !s.hasAttribute(attr)) {
				fail("%s: %s has no attribute %s", where, base, attr)
			}
		default:
			fail("%s: %s names no parameter, resource or pseudo parameter", where, n)
		}
	}
	refs = func(where string, v any, local map[string]bool) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				switch k {
				case "Ref":
					name(where, str(x), local)
				case "Fn::GetAtt":
					if a, ok := x.([]any); !ok || len(a) != 2 || tpl.Resources[str(a[0])] == nil {
						fail("%s: bad Fn::GetAtt %v", where, x)
					} else {
						name(where, str(a[0])+"."+str(a[1]), local)
					}
				case "Fn::Sub":
					s, vars := x, map[string]bool{}
					if a, ok := x.([]any); ok && len(a) == 2 {
						s = a[0]
						for n, y := range a[1].(map[string]any) {
							vars[n] = true
							refs(where, y, local)
						}
					}
					for _, m := range subVar.FindAllStringSubmatch(str(s), -1) {
						name(where, m[1], vars)
					}
				case "Fn::If", "Condition":
					if _, isName := x.(string); k == "Condition" && !isName {
						break // an IAM statement's condition
					}
					c := x
					if a, ok := x.([]any); ok {
						c = a[0]
					}
					if tpl.Conditions[str(c)] == nil {
						fail("%s: condition %v is not defined", where, c)
					}
					usedConds[str(c)] = true
				}
				if _, isName := x.(string); k != "Ref" && !(k == "Condition" && isName) {
					refs(where, x, local)
				}
			}
		case []any:
			for _, x := range v {
				refs(where, x, local)
			}
		}
	}
	for n, c := range tpl.Conditions {
		refs("condition "+n, c, nil)
	}
	for n, r := range tpl.Resources {
		for k := range r {
			if !slices.Contains([]string{"Type", "Properties", "Condition", "DependsOn", "DeletionPolicy", "UpdateReplacePolicy"}, k) {
				fail("resource %s: unexpected key %s", n, k)
			}
		}
		s := schemas[str(r["Type"])]
		if s == nil {
			fail("resource %s: type %v has no pinned schema (testdata/cfnschema)", n, r["Type"])
			continue
		}
		props, _ := r["Properties"].(map[string]any)
		for _, e := range s.checkProperties(props) {
			fail("resource %s: %s", n, e)
		}
		refs("resource "+n, r, nil)
	}
	for n, o := range tpl.Outputs {
		if o["Value"] == nil {
			fail("output %s has no Value", n)
		}
		refs("output "+n, o, nil)
	}
	for n := range tpl.Parameters {
		if !usedParams[n] {
			fail("parameter %s is not used", n)
		}
	}
	for n := range tpl.Conditions {
		if !usedConds[n] {
			fail("condition %s is not used", n)
		}
	}
	return errs
}

// TestTemplateValid checks the template and emitted variants of it.
func TestTemplateValid(t *testing.T) {
	schemas := loadSchemas(t)
	cases := []TemplateOptions{
		{},
		{Parameters: map[string]string{"BillingMode": "PROVISIONED", "ReadCapacityUnits": "20", "WriteCapacityUnits": "50",
			"AlarmEmail": "oncall@example.com", "PermissionsBoundaryArn": "arn:aws:iam::123456789012:policy/boundary",
			"LambdaCodeS3Bucket": "my-artifacts", "PointInTimeRecovery": "false", "LogRetentionDays": "90"},
			NamespaceIDs: []string{"3f9a0c1d2e4b5a67", "0123456789abcdef", "3f9a0c1d2e4b5a67"}},
	}
	for i, opts := range cases {
		b, err := Template(opts)
		if err != nil {
			t.Fatal(err)
		}
		tpl := parseTemplate(t, b)
		for _, e := range templateErrors(t, tpl, schemas) {
			t.Errorf("case %d: %s", i, e)
		}
		if strings.Contains(string(b), placeholder) {
			t.Errorf("case %d: a policy placeholder is left", i)
		}
		for name, v := range opts.Parameters {
			if got := scalar(tpl.Parameters[name]["Default"]); got != v {
				t.Errorf("case %d: %s default = %q, want %q", i, name, got, v)
			}
		}
		for _, id := range opts.NamespaceIDs {
			for _, r := range []string{"TenantAcquirePolicy" + id, "TenantAdminPolicy" + id} {
				if tpl.Resources[r] == nil || tpl.Outputs[r+"Arn"] == nil {
					t.Errorf("case %d: %s or its output missing", i, r)
				}
			}
		}
	}
}

// TestTemplateBroken checks that the checks catch what they are for.
func TestTemplateBroken(t *testing.T) {
	schemas := loadSchemas(t)
	b, err := Template(TemplateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(tpl *cfnTemplate){
		"unknown property": func(tpl *cfnTemplate) { props(tpl, "Table")["BillingModes"] = "x" },
		"missing required": func(tpl *cfnTemplate) { delete(props(tpl, "AggregatorFunction"), "Role") },
		"read-only":        func(tpl *cfnTemplate) { props(tpl, "Table")["Arn"] = "x" },
		"bad enum":         func(tpl *cfnTemplate) { props(tpl, "AggregatorEventSourceMapping")["StartingPosition"] = "OLDEST" },
		"bad type":         func(tpl *cfnTemplate) { props(tpl, "AggregatorFunction")["Timeout"] = "sixty" },
		"nested unknown": func(tpl *cfnTemplate) {
			props(tpl, "Table")["StreamSpecification"] = map[string]any{"ViewType": "KEYS_ONLY"}
		},
		"dangling Ref": func(tpl *cfnTemplate) {
			props(tpl, "AggregatorFunction")["MemorySize"] = map[string]any{"Ref": "Memory"}
		},
		"dangling GetAtt": func(tpl *cfnTemplate) {
			props(tpl, "AggregatorFunction")["Role"] = map[string]any{"Fn::GetAtt": []any{"Role", "Arn"}}
		},
		"bad attribute": func(tpl *cfnTemplate) {
			props(tpl, "AggregatorFunction")["Role"] = map[string]any{"Fn::GetAtt": []any{"WorkerRole", "Id"}}
		},
		"dangling Sub": func(tpl *cfnTemplate) {
			props(tpl, "AggregatorLogGroup")["LogGroupName"] = map[string]any{"Fn::Sub": "/x/${Stack}"}
		},
		"unused parameter":  func(tpl *cfnTemplate) { tpl.Parameters["Unused"] = map[string]any{"Type": "String"} },
		"unused condition":  func(tpl *cfnTemplate) { tpl.Conditions["Never"] = map[string]any{"Fn::Equals": []any{"a", "b"}} },
		"unknown condition": func(tpl *cfnTemplate) { tpl.Resources["AlarmTopic"]["Condition"] = "HasTopic" },
		"unknown type":      func(tpl *cfnTemplate) { tpl.Resources["Table"]["Type"] = "AWS::DynamoDB::GlobalTable" },
	}
	for name, breakIt := range cases {
		tpl := parseTemplate(t, b)
		breakIt(tpl)
		if errs := templateErrors(t, tpl, schemas); len(errs) == 0 {
			t.Errorf("%s: no error found", name)
		}
	}
}

func props(tpl *cfnTemplate, resource string) map[string]any {
	return tpl.Resources[resource]["Properties"].(map[string]any)
}

// TestTemplateTable checks the table against the backend's own
// definition (dynamodb.TableDefinition, what CheckTable verifies) and the
// stream and TTL it needs.
func TestTemplateTable(t *testing.T) {
	b, err := Template(TemplateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := props(parseTemplate(t, b), "Table")
	want := dynamodb.TableDefinition("x")
	var attrs []string
	for _, a := range want.AttributeDefinitions {
		attrs = append(attrs, aws.ToString(a.AttributeName)+" "+string(a.AttributeType))
	}
	var got []string
	for _, a := range p["AttributeDefinitions"].([]any) {
		m := a.(map[string]any)
		got = append(got, str(m["AttributeName"])+" "+str(m["AttributeType"]))
	}
	if !slices.Equal(got, attrs) {
		t.Errorf("AttributeDefinitions = %v, want %v", got, attrs)
	}
	keys := func(ks any) string {
		var out []string
		for _, k := range ks.([]any) {
			m := k.(map[string]any)
			out = append(out, str(m["AttributeName"])+" "+str(m["KeyType"]))
		}
		return strings.Join(out, ", ")
	}
	wantKeys := func(in any) string {
		b, _ := json.Marshal(in)
		var v any
		_ = json.Unmarshal(b, &v)
		return keys(v)
	}
	if g, w := keys(p["KeySchema"]), wantKeys(want.KeySchema); g != w {
		t.Errorf("KeySchema = %s, want %s", g, w)
	}
	gsis := p["GlobalSecondaryIndexes"].([]any)
	if len(gsis) != len(want.GlobalSecondaryIndexes) {
		t.Fatalf("%d indexes, want %d", len(gsis), len(want.GlobalSecondaryIndexes))
	}
	for i, w := range want.GlobalSecondaryIndexes {
		g := gsis[i].(map[string]any)
		proj := g["Projection"].(map[string]any)["ProjectionType"]
		if str(g["IndexName"]) != aws.ToString(w.IndexName) || keys(g["KeySchema"]) != wantKeys(w.KeySchema) ||
			str(proj) != string(w.Projection.ProjectionType) {
			t.Errorf("index %d = %v, want %s %s %s", i, g, aws.ToString(w.IndexName), wantKeys(w.KeySchema), w.Projection.ProjectionType)
		}
	}
	if v := p["StreamSpecification"].(map[string]any)["StreamViewType"]; v != string(want.StreamSpecification.StreamViewType) {
		t.Errorf("stream view %v, want %s", v, want.StreamSpecification.StreamViewType)
	}
	if ttl := p["TimeToLiveSpecification"].(map[string]any); ttl["AttributeName"] != dynamodb.TTLAttribute || ttl["Enabled"] != true {
		t.Errorf("TTL %v, want enabled on %s", ttl, dynamodb.TTLAttribute)
	}
	if tpl := parseTemplate(t, b); tpl.Resources["Table"]["DeletionPolicy"] != "Retain" {
		t.Error("the table is not retained when the stack is deleted")
	}
}

// TestTemplateParametersInvalid checks that bad parameter values are
// refused with an InvalidOptionError naming the flag.
func TestTemplateParametersInvalid(t *testing.T) {
	cases := []struct {
		param, value, flag string
	}{
		{"BillingMode", "ON_DEMAND", "billing-mode"},
		{"ReadCapacityUnits", "0", "read-capacity-units"},
		{"WriteCapacityUnits", "many", "write-capacity-units"},
		{"LambdaMemorySize", "20000", "lambda-memory-size"},
		{"LogRetentionDays", "31", "log-retention-days"},
		{"TableName", "a b", "table-name"},
		{"AlarmEmail", "not-an-address", "alarm-email"},
		{"PermissionsBoundaryArn", "boundary", "permissions-boundary-arn"},
		{"LambdaCodeS3Bucket", "Bad_Bucket", "lambda-code-s3-bucket"},
		{"ReconcileSchedule", "every minute", "reconcile-schedule"},
		{"NoSuchParameter", "1", "no-such-parameter"},
	}
	for _, c := range cases {
		_, err := Template(TemplateOptions{Parameters: map[string]string{c.param: c.value}})
		var ie *InvalidOptionError
		if !errors.As(err, &ie) || ie.Option != c.flag {
			t.Errorf("%s=%q: err = %v, want an InvalidOptionError for %s", c.param, c.value, err, c.flag)
		}
	}
	for _, ids := range [][]string{{"*"}, {"a-b", "ab"}} {
		var ie *InvalidOptionError
		if _, err := Template(TemplateOptions{NamespaceIDs: ids}); !errors.As(err, &ie) || ie.Option != "namespace-id" {
			t.Errorf("namespaces %v: err = %v", ids, err)
		}
	}
}

// TestTemplateParameters checks the parameter list the CLI makes flags of.
func TestTemplateParameters(t *testing.T) {
	ps, err := TemplateParameters()
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]bool{}
	for _, p := range ps {
		if flags[p.Flag] || !regexp.MustCompile(`^[a-z][a-z0-9-]*$`).MatchString(p.Flag) {
			t.Errorf("flag %q of %s", p.Flag, p.Name)
		}
		flags[p.Flag] = true
		if p.Description == "" {
			t.Errorf("%s has no description", p.Name)
		}
	}
	if ps[0].Name != "TableName" || !flags["lambda-code-s3-bucket"] {
		t.Errorf("parameters %v", ps)
	}
}

func str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}
