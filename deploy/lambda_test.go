package deploy

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// makeLambda returns the recipe of the Makefile's lambda target.
func makeLambda(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?ms)^## lambda:.*?^lambda:.*?\n((?:\t.*\n)+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no lambda target in the Makefile")
	}
	return string(m[0])
}

// TestTemplateLambda checks the functions against what make lambda builds
// (the executable bootstrap for linux/arm64, for provided.al2023) and
// what cmd/tollgate-lambda reads (its modes), and the event source mapping
// against what the function needs (a tumbling window: docs/aggregator.md).
func TestTemplateLambda(t *testing.T) {
	recipe := makeLambda(t)
	for _, want := range []string{"GOOS=linux", "GOARCH=arm64", "-o dist/bootstrap", "provided.al2023", "dist/tollgate-lambda.zip dist/bootstrap"} {
		if !strings.Contains(recipe, want) {
			t.Fatalf("the Makefile's lambda target no longer says %q: update the template's Runtime, Architectures, Handler and this test\n%s", want, recipe)
		}
	}
	main, err := os.ReadFile("../cmd/tollgate-lambda/main.go")
	if err != nil {
		t.Fatal(err)
	}
	// With the events function, so that its mode and variables are
	// checked too.
	b, err := Template(TemplateOptions{EventRules: testEventRules(t), EventsNamespace: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	tpl := parseTemplate(t, b)
	modes := map[string]string{}
	for name, r := range tpl.Resources {
		if r["Type"] != "AWS::Lambda::Function" {
			continue
		}
		p := props(tpl, name)
		if p["Runtime"] != "provided.al2023" || p["Handler"] != "bootstrap" || !reflect.DeepEqual(p["Architectures"], []any{"arm64"}) {
			t.Errorf("%s: runtime %v, handler %v, architectures %v; make lambda builds bootstrap for provided.al2023 on arm64",
				name, p["Runtime"], p["Handler"], p["Architectures"])
		}
		env := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		for k := range env {
			if !strings.Contains(string(main), `"`+k+`"`) {
				t.Errorf("%s: cmd/tollgate-lambda does not read %s", name, k)
			}
		}
		if !reflect.DeepEqual(env["TOLLGATE_TABLE"], map[string]any{"Ref": "Table"}) {
			t.Errorf("%s: TOLLGATE_TABLE = %v", name, env["TOLLGATE_TABLE"])
		}
		mode := str(env["TOLLGATE_MODE"])
		if !regexp.MustCompile(`case ("", )?"` + regexp.QuoteMeta(mode) + `"`).Match(main) {
			t.Errorf("%s: cmd/tollgate-lambda has no mode %q", name, mode)
		}
		modes[mode] = name
	}
	if modes["aggregate"] == "" || modes["reconcile"] == "" || modes["events"] == "" {
		t.Fatalf("functions by mode: %v", modes)
	}
	var esm map[string]any
	for name, r := range tpl.Resources {
		if r["Type"] == "AWS::Lambda::EventSourceMapping" {
			esm = props(tpl, name)
		}
	}
	if esm == nil || !reflect.DeepEqual(esm["FunctionName"], map[string]any{"Ref": modes["aggregate"]}) ||
		!reflect.DeepEqual(esm["EventSourceArn"], map[string]any{"Fn::GetAtt": []any{"Table", "StreamArn"}}) {
		t.Fatalf("the stream's mapping: %v", esm)
	}
	if esm["TumblingWindowInSeconds"] == nil || esm["BisectBatchOnFunctionError"] != true || esm["MaximumRetryAttempts"] == nil ||
		esm["DestinationConfig"] == nil || esm["StartingPosition"] != "TRIM_HORIZON" {
		t.Errorf("the stream's mapping lacks a tumbling window, bisection, a retry limit, a destination or TRIM_HORIZON: %v", esm)
	}
	// The reconciler is invoked by a schedule, allowed to.
	// A failed pass is not retried (Lambda's default for asynchronous
	// invocations is 2 retries): the next scheduled one does its work.
	var scheduled, permitted, noRetries bool
	for name, r := range tpl.Resources {
		p := props(tpl, name)
		switch r["Type"] {
		case "AWS::Lambda::EventInvokeConfig":
			noRetries = noRetries || reflect.DeepEqual(p["FunctionName"], map[string]any{"Ref": modes["reconcile"]}) &&
				p["Qualifier"] == "$LATEST" && p["MaximumRetryAttempts"] == 0.0
		case "AWS::Events::Rule":
			// A schedule invokes the reconciler; an event pattern, the
			// events function.
			want := modes["reconcile"]
			if p["EventPattern"] != nil {
				want = modes["events"]
			}
			for _, tg := range p["Targets"].([]any) {
				if arn := tg.(map[string]any)["Arn"]; !reflect.DeepEqual(arn, map[string]any{"Fn::GetAtt": []any{want, "Arn"}}) {
					t.Errorf("%s targets %v, want %s", name, arn, want)
				}
			}
			scheduled = scheduled || p["ScheduleExpression"] != nil
		case "AWS::Lambda::Permission":
			permitted = permitted || reflect.DeepEqual(p["FunctionName"], map[string]any{"Ref": modes["reconcile"]}) && p["Principal"] == "events.amazonaws.com"
		}
	}
	if !scheduled || !permitted || !noRetries {
		t.Errorf("reconciler scheduled %v, invocation permitted %v, not retried ($LATEST, MaximumRetryAttempts 0) %v", scheduled, permitted, noRetries)
	}
}

// knownMetrics is testdata/metrics.json.
type knownMetrics struct {
	Metrics    map[string]map[string][][]string `json:"metrics"`
	Operations map[string][]string              `json:"operations"`
	Statistics []string                         `json:"statistics"`
}

// TestTemplateAlarms checks every alarm's metrics against the known list:
// namespace, name, dimension set, Operation values, statistic.
func TestTemplateAlarms(t *testing.T) {
	raw, err := os.ReadFile("testdata/metrics.json")
	if err != nil {
		t.Fatal(err)
	}
	var known knownMetrics
	if err := json.Unmarshal(raw, &known); err != nil {
		t.Fatal(err)
	}
	// Every alarm: the server's and the events function's too.
	b, err := Template(TemplateOptions{EventRules: testEventRules(t)})
	if err != nil {
		t.Fatal(err)
	}
	tpl := parseTemplate(t, b)
	percentile := regexp.MustCompile(`^p(100|[1-9]?[0-9])(\.[0-9]+)?$`)
	check := func(alarm string, metric map[string]any, stat string) {
		ns, name := str(metric["Namespace"]), str(metric["MetricName"])
		sets, ok := known.Metrics[ns][name]
		if !ok {
			t.Errorf("%s: metric %s %s is not known", alarm, ns, name)
			return
		}
		var dims []string
		for _, d := range metric["Dimensions"].([]any) {
			dm := d.(map[string]any)
			dims = append(dims, str(dm["Name"]))
			if op := str(dm["Value"]); dm["Name"] == "Operation" && !slices.Contains(known.Operations[ns], op) {
				t.Errorf("%s: %s is not an operation of %s", alarm, op, ns)
			}
		}
		if !slices.ContainsFunc(sets, func(s []string) bool {
			return slices.Equal(slices.Sorted(slices.Values(s)), slices.Sorted(slices.Values(dims)))
		}) {
			t.Errorf("%s: %s %s has no dimension set %v (known: %v)", alarm, ns, name, dims, sets)
		}
		if !slices.Contains(known.Statistics, stat) && !percentile.MatchString(stat) {
			t.Errorf("%s: statistic %q", alarm, stat)
		}
	}
	seen := map[string]bool{}
	for name, r := range tpl.Resources {
		if r["Type"] != "AWS::CloudWatch::Alarm" {
			continue
		}
		p := props(tpl, name)
		if p["AlarmActions"] == nil || p["TreatMissingData"] == nil || p["AlarmDescription"] == nil {
			t.Errorf("%s: no actions, missing-data treatment or description", name)
		}
		// Every alarm notifies the topic, when there is one, of both changes.
		topic := map[string]any{"Fn::If": []any{"HasAlarmEmail", []any{map[string]any{"Ref": "AlarmTopic"}}, map[string]any{"Ref": "AWS::NoValue"}}}
		if !reflect.DeepEqual(p["AlarmActions"], topic) || !reflect.DeepEqual(p["OKActions"], topic) {
			t.Errorf("%s: actions %v and %v, want AlarmTopic's when HasAlarmEmail", name, p["AlarmActions"], p["OKActions"])
		}
		if ms, ok := p["Metrics"].([]any); ok {
			returned := 0
			for _, m := range ms {
				mq := m.(map[string]any)
				if mq["ReturnData"] == true {
					returned++
				}
				if st, ok := mq["MetricStat"].(map[string]any); ok {
					check(name, st["Metric"].(map[string]any), str(st["Stat"]))
					seen[str(st["Metric"].(map[string]any)["MetricName"])] = true
				}
			}
			if returned != 1 || len(ms) > 10 {
				t.Errorf("%s: %d metrics returned of %d; want 1 of at most 10", name, returned, len(ms))
			}
			continue
		}
		if p["ExtendedStatistic"] != nil {
			check(name, p, str(p["ExtendedStatistic"]))
		} else {
			check(name, p, str(p["Statistic"]))
		}
		seen[str(p["MetricName"])] = true
	}
	for _, m := range []string{"ThrottledRequests", "SystemErrors", "IteratorAge", "Errors", "Throttles", "ApproximateNumberOfMessagesVisible",
		"HTTPCode_Target_5XX_Count", "HTTPCode_ELB_5XX_Count", "TargetResponseTime"} {
		if !seen[m] {
			t.Errorf("no alarm on %s", m)
		}
	}
}

// TestTemplatePolicies checks that every DynamoDB statement of the
// template is the generator's (PolicyDocument), for the table the stack
// makes.
func TestTemplatePolicies(t *testing.T) {
	const id = "3f9a0c1d2e4b5a67"
	b, err := Template(TemplateOptions{NamespaceIDs: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	tpl := parseTemplate(t, b)
	docOf := func(p Persona, ns []string) any {
		d, err := document(p, ns, stackTable)
		if err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal(d)
		var v any
		_ = json.Unmarshal(j, &v)
		return v
	}
	want := map[string]any{
		"RuntimePolicy":              docOf(PersonaAcquire, nil),
		"OperatorPolicy":             docOf(PersonaAdmin, nil),
		"TenantAcquirePolicy" + id:   docOf(PersonaAcquire, []string{id}),
		"TenantAdminPolicy" + id:     docOf(PersonaAdmin, []string{id}),
		"WorkerRole/tollgate-worker": docOf(PersonaWorker, nil),
	}
	got := map[string]any{}
	for name, r := range tpl.Resources {
		p := props(tpl, name)
		switch r["Type"] {
		case "AWS::IAM::ManagedPolicy":
			got[name] = p["PolicyDocument"]
		case "AWS::IAM::Role":
			pols, _ := p["Policies"].([]any) // the server's roles have managed policies only
			for _, pol := range pols {
				pm := pol.(map[string]any)
				if strings.Contains(mustJSON(pm["PolicyDocument"]), "dynamodb:") {
					got[name+"/"+str(pm["PolicyName"])] = pm["PolicyDocument"]
				}
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("policies differ from the generator's:\n got %s\nwant %s", mustJSON(got), mustJSON(want))
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
