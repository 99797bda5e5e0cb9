package terraform_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/tollgate-rl/tollgate/deploy"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
)

// The two artefacts deploy the same thing: the key settings of the
// CloudFormation template (deploy.Template, its parameters at their
// defaults) and of the module (its variables at their defaults) are read
// into one map each, by the same names, and compared.

// moduleOnly are settings the module has and the template has not, with
// the reason; the comparison skips them. There are none at present.
var moduleOnly = map[string]string{}

// Lambda's defaults for asynchronous invocations (the reconciler's, from
// its schedule) of a function without an event invoke configuration: 2
// retries, events kept 6 hours; unqualified means $LATEST.
const (
	defaultAsyncRetries  = "2"
	defaultAsyncEventAge = "21600"
	latest               = "$LATEST"
)

// templateSettings reads the settings of the template of opts (the
// parameters at their defaults, LambdaCodeS3Bucket given).
func templateSettings(t *testing.T, opts deploy.TemplateOptions) map[string]string {
	t.Helper()
	params := map[string]string{"LambdaCodeS3Bucket": "artifacts"}
	for k, v := range opts.Parameters {
		params[k] = v
	}
	opts.Parameters = params
	b, err := deploy.Template(opts)
	if err != nil {
		t.Fatal(err)
	}
	var tpl struct {
		Parameters map[string]struct{ Default any }
		Resources  map[string]cfnResource
	}
	if err := json.Unmarshal(b, &tpl); err != nil {
		t.Fatal(err)
	}
	// The conditions the settings depend on, at the parameters' defaults.
	conds := map[string]bool{
		"HasServer":              params["ServerImage"] != "",
		"HasServerCertificate":   params["ServerImage"] != "" && params["LoadBalancerCertificateArn"] != "",
		"HasLoadBalancerSubnets": params["LoadBalancerSubnetIds"] != "",
	}
	for name, r := range tpl.Resources {
		if on, known := conds[r.Condition]; r.Condition != "" && (!known || !on) {
			delete(tpl.Resources, name) // off at these defaults
		}
	}
	// val renders a property: a parameter at its default, the table as TABLE.
	var val func(v any) string
	val = func(v any) string {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["Ref"].(string); ok {
				if ref == "Table" {
					return "TABLE"
				}
				if ref == "AWS::NoValue" {
					return ""
				}
				if p, ok := tpl.Parameters[ref]; ok {
					return val(p.Default)
				}
			}
			if sub, ok := v["Fn::Sub"].(string); ok {
				return strings.NewReplacer("${Table}", "TABLE", "${AWS::Region}", "REGION").Replace(sub)
			}
			if c, ok := v["Fn::If"].([]any); ok && len(c) == 3 {
				if conds[fmt.Sprint(c[0])] {
					return val(c[1])
				}
				return val(c[2])
			}
			j, _ := json.Marshal(v)
			return string(j)
		case []any:
			parts := make([]string, len(v))
			for i, x := range v {
				parts[i] = val(x)
			}
			return strings.Join(parts, ",")
		case float64:
			return fmt.Sprint(v)
		case nil:
			return ""
		}
		return fmt.Sprint(v)
	}
	out := map[string]string{}
	fnMode := map[string]string{}
	for name, r := range tpl.Resources {
		if r.Type != "AWS::Lambda::Function" {
			continue
		}
		p := r.Properties
		env, _ := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		mode := val(env["TOLLGATE_MODE"])
		fnMode[name] = mode
		for k, v := range env {
			out[mode+" env "+k] = val(v)
			if k == "TOLLGATE_EVENT_RULES" {
				out[mode+" env "+k] = canonicalRules(t, val(v))
			}
		}
		out[mode+" runtime"], out[mode+" architectures"], out[mode+" handler"] = val(p["Runtime"]), val(p["Architectures"]), val(p["Handler"])
		out[mode+" memory"], out[mode+" timeout"] = val(p["MemorySize"]), val(p["Timeout"])
		out[mode+" async retries"], out[mode+" async event age"] = defaultAsyncRetries, defaultAsyncEventAge
	}
	for _, r := range tpl.Resources {
		p := r.Properties
		switch r.Type {
		case "AWS::Lambda::EventInvokeConfig":
			fn, _ := p["FunctionName"].(map[string]any)["Ref"].(string)
			mode, ok := fnMode[fn]
			if !ok {
				t.Fatalf("an event invoke configuration of %v, not of a function of the template", p["FunctionName"])
			}
			if q := val(p["Qualifier"]); q != latest {
				t.Fatalf("the event invoke configuration of %s is for %q: the schedule invokes %s", fn, q, latest)
			}
			out[mode+" async retries"] = val(p["MaximumRetryAttempts"])
			if p["MaximumEventAgeInSeconds"] != nil {
				out[mode+" async event age"] = val(p["MaximumEventAgeInSeconds"])
			}
		case "AWS::Lambda::EventSourceMapping":
			for k, prop := range map[string]string{
				"starting position": "StartingPosition", "batch size": "BatchSize", "batching window": "MaximumBatchingWindowInSeconds",
				"tumbling window": "TumblingWindowInSeconds", "bisect": "BisectBatchOnFunctionError", "retries": "MaximumRetryAttempts",
				"record age": "MaximumRecordAgeInSeconds", "parallelization": "ParallelizationFactor",
			} {
				out["stream "+k] = val(p[prop])
			}
			if out["stream parallelization"] == "" {
				out["stream parallelization"] = "1" // Lambda's default
			}
		case "AWS::Events::Rule":
			if p["EventPattern"] != nil {
				j, _ := json.Marshal(p["EventPattern"])
				out["events pattern "+canonicalJSON(t, string(j))] = "on"
				continue
			}
			out["reconcile schedule"] = val(p["ScheduleExpression"])
		case "AWS::Logs::LogGroup":
			out["log retention "+val(p["LogGroupName"])[strings.LastIndex(val(p["LogGroupName"]), "/")+1:]] = val(p["RetentionInDays"])
		}
	}
	alarmKey := map[string]string{
		"TableThrottlesAlarm": "table ThrottledRequests", "TableSystemErrorsAlarm": "table SystemErrors",
		"AggregatorIteratorAgeAlarm": "iterator_age", "FailureQueueAlarm": "discarded_batches",
		"AggregatorErrorsAlarm": "function_errors aggregate", "ReconcilerErrorsAlarm": "function_errors reconcile",
		"AggregatorThrottlesAlarm": "function_throttles aggregate", "ReconcilerThrottlesAlarm": "function_throttles reconcile",
		"EventsErrorsAlarm": "function_errors events", "EventsThrottlesAlarm": "function_throttles events",
		"ServerErrorsAlarm": "server server-errors", "LoadBalancerErrorsAlarm": "server load-balancer-errors",
		"ServerLatencyAlarm": "server server-latency",
	}
	for name, r := range tpl.Resources {
		if r.Type != "AWS::CloudWatch::Alarm" {
			continue
		}
		p := r.Properties
		key, ok := alarmKey[name]
		if !ok {
			t.Fatalf("alarm %s: this test does not know it", name)
		}
		out["alarm "+key] = fmt.Sprintf("%s %s, %s of %s", val(p["ComparisonOperator"]), val(p["Threshold"]),
			val(p["DatapointsToAlarm"]), val(p["EvaluationPeriods"]))
		if p["MetricName"] != nil {
			out["alarm "+key+" metric"] = fmt.Sprintf("%s %s %s%s", val(p["Namespace"]), val(p["MetricName"]), val(p["Statistic"]), val(p["ExtendedStatistic"]))
		}
		period := val(p["Period"])
		if ms, ok := p["Metrics"].([]any); ok {
			var ops []string
			for _, m := range ms {
				st, _ := m.(map[string]any)["MetricStat"].(map[string]any)
				if st == nil {
					continue
				}
				period = val(st["Period"])
				for _, d := range st["Metric"].(map[string]any)["Dimensions"].([]any) {
					if dm := d.(map[string]any); dm["Name"] == "Operation" {
						ops = append(ops, val(dm["Value"]))
					}
				}
			}
			out["alarm "+key+" operations"] = strings.Join(slices.Sorted(slices.Values(ops)), ",")
		}
		out["alarm "+key] += " every " + period
	}
	templateServerSettings(tpl.Resources, val, out)
	return out
}

// moduleSettings evaluates the module's settings with its defaults and
// vars.
func moduleSettings(m *module, vars map[string]cty.Value) (map[string]string, error) {
	known := map[string]cty.Value{"aws_dynamodb_table": cty.ObjectVal(map[string]cty.Value{"tollgate": cty.ObjectVal(map[string]cty.Value{
		"name": cty.StringVal("TABLE"), "arn": cty.StringVal(testTableARN), "stream_arn": cty.StringVal(testStreamARN),
	})}), "data": dataKnown(m), "aws_cloudwatch_log_group": logGroupsKnown(m)}
	e := newEvaluator(m, withVars(vars), known)
	out := map[string]string{}
	one := func(key string) (instance, error) {
		b := m.resources[key]
		if b == nil {
			return instance{}, fmt.Errorf("no resource %s", key)
		}
		in, err := e.instances(b)
		if err != nil || len(in) == 0 {
			return instance{}, fmt.Errorf("%s: %d instances (%v)", key, len(in), err)
		}
		return in[0], nil
	}
	str := func(in instance, name string) string {
		s, err := in.str(name)
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return s
	}
	fnMode := map[string]string{}
	for _, fn := range []string{"aggregator", "reconciler", "events"} {
		if fn == "events" {
			if n, err := e.instances(m.resources["aws_lambda_function.events"]); err != nil || len(n) == 0 {
				continue // no events_rules
			}
		}
		in, err := one("aws_lambda_function." + fn)
		if err != nil {
			return nil, err
		}
		envs, err := in.blocks("environment")
		if err != nil || len(envs) != 1 {
			return nil, fmt.Errorf("aws_lambda_function.%s: environment: %v", fn, err)
		}
		vars, err := envs[0].value("variables")
		if err != nil || vars == cty.NilVal {
			return nil, fmt.Errorf("aws_lambda_function.%s: environment variables: %v", fn, err)
		}
		mode := vars.GetAttr("TOLLGATE_MODE").AsString()
		fnMode[fn] = mode
		for it := vars.ElementIterator(); it.Next(); {
			k, v := it.Element()
			out[mode+" env "+k.AsString()] = v.AsString()
			if k.AsString() == "TOLLGATE_EVENT_RULES" {
				s, err := canonicalRulesErr(v.AsString())
				if err != nil {
					return nil, fmt.Errorf("aws_lambda_function.%s: TOLLGATE_EVENT_RULES: %w", fn, err)
				}
				out[mode+" env "+k.AsString()] = s
			}
		}
		archs, _ := in.strs("architectures")
		out[mode+" runtime"], out[mode+" architectures"], out[mode+" handler"] = str(in, "runtime"), strings.Join(archs, ","), str(in, "handler")
		out[mode+" memory"], out[mode+" timeout"] = str(in, "memory_size"), str(in, "timeout")
		out[mode+" async retries"], out[mode+" async event age"] = defaultAsyncRetries, defaultAsyncEventAge
		lg, err := one("aws_cloudwatch_log_group." + fn)
		if err != nil {
			return nil, err
		}
		out["log retention "+fn] = str(lg, "retention_in_days")
	}
	esm, err := one("aws_lambda_event_source_mapping.aggregator")
	if err != nil {
		return nil, err
	}
	for k, arg := range map[string]string{
		"starting position": "starting_position", "batch size": "batch_size", "batching window": "maximum_batching_window_in_seconds",
		"tumbling window": "tumbling_window_in_seconds", "bisect": "bisect_batch_on_function_error", "retries": "maximum_retry_attempts",
		"record age": "maximum_record_age_in_seconds", "parallelization": "parallelization_factor",
	} {
		out["stream "+k] = str(esm, arg)
	}
	rule, err := one("aws_cloudwatch_event_rule.reconcile")
	if err != nil {
		return nil, err
	}
	out["reconcile schedule"] = str(rule, "schedule_expression")
	if err := moduleServerSettings(m, e, out); err != nil {
		return nil, err
	}
	for _, key := range keys(m.resources) {
		if !strings.HasPrefix(key, "aws_lambda_function_event_invoke_config.") {
			continue
		}
		b := m.resources[key]
		// The function is the aws_lambda_function function_name refers to.
		var fn string
		if a, ok := b.Body.Attributes["function_name"]; ok {
			for _, tr := range a.Expr.Variables() {
				if tr.RootName() == "aws_lambda_function" && len(tr) > 1 {
					if at, ok := tr[1].(hcl.TraverseAttr); ok {
						fn = at.Name
					}
				}
			}
		}
		mode, ok := fnMode[fn]
		if !ok {
			return nil, fmt.Errorf("%s: function_name names no function of the module", key)
		}
		insts, err := e.instances(b)
		if err != nil {
			return nil, err
		}
		for _, in := range insts {
			if q := str(in, "qualifier"); q != "" && q != latest {
				return nil, fmt.Errorf("%s is for %q: the schedule invokes %s", key, q, latest)
			}
			if r := str(in, "maximum_retry_attempts"); r != "" {
				out[mode+" async retries"] = r
			}
			if a := str(in, "maximum_event_age_in_seconds"); a != "" {
				out[mode+" async event age"] = a
			}
		}
	}
	for _, key := range keys(m.resources) {
		name, ok := strings.CutPrefix(key, "aws_cloudwatch_metric_alarm.")
		if !ok {
			continue
		}
		insts, err := e.instances(m.resources[key])
		if err != nil {
			return nil, err
		}
		for _, in := range insts {
			k := name
			if each, ok := in.ctx.Variables["each"]; ok {
				suffix := each.GetAttr("key").AsString()
				if name == "table" {
					suffix = each.GetAttr("value").GetAttr("metric").AsString()
				}
				if name == "function_errors" || name == "function_throttles" {
					suffix = map[string]string{"aggregator": "aggregate", "reconciler": "reconcile", "events": "events"}[suffix]
				}
				k += " " + suffix
			}
			dp := str(in, "datapoints_to_alarm")
			if dp == "" {
				dp = str(in, "evaluation_periods") // CloudWatch's default
			}
			period := str(in, "period")
			qs, _ := in.blocks("metric_query")
			var ops []string
			for _, q := range qs {
				ms, _ := q.blocks("metric")
				for _, mt := range ms {
					period = str(mt, "period")
					if d, err := mt.value("dimensions"); err == nil && d != cty.NilVal {
						ops = append(ops, d.GetAttr("Operation").AsString())
					}
				}
			}
			if len(qs) > 0 {
				out["alarm "+k+" operations"] = strings.Join(slices.Sorted(slices.Values(ops)), ",")
			}
			out["alarm "+k] = fmt.Sprintf("%s %s, %s of %s every %s", str(in, "comparison_operator"), str(in, "threshold"),
				dp, str(in, "evaluation_periods"), period)
			if len(qs) == 0 {
				out["alarm "+k+" metric"] = fmt.Sprintf("%s %s %s%s", str(in, "namespace"), str(in, "metric_name"), str(in, "statistic"), str(in, "extended_statistic"))
			}
		}
	}
	return out, nil
}

// settingsProblems compares the module's settings (its defaults and
// vars) with the template's.
func settingsProblems(m *module, vars map[string]cty.Value, tpl map[string]string) []string {
	mod, err := moduleSettings(m, vars)
	if err != nil {
		return []string{err.Error()}
	}
	var p problems
	for _, k := range keys(mod) {
		skip := false
		for prefix := range moduleOnly {
			skip = skip || strings.HasPrefix(k, prefix)
		}
		if skip {
			continue
		}
		if want, ok := tpl[k]; !ok {
			p.addf("%s: the module has %q, the template has no such setting", k, mod[k])
		} else if mod[k] != want {
			p.addf("%s: the module has %q, the template %q", k, mod[k], want)
		}
	}
	for _, k := range keys(tpl) {
		if _, ok := mod[k]; !ok {
			p.addf("%s: the template has %q, the module has no such setting", k, tpl[k])
		}
	}
	ops := strings.Join(slices.Sorted(slices.Values(dynamodb.Operations())), ",")
	for _, k := range []string{"alarm table ThrottledRequests operations", "alarm table SystemErrors operations"} {
		if mod[k] != ops {
			p.addf("%s: the module sums %q, the backend calls %q (dynamodb.Operations)", k, mod[k], ops)
		}
	}
	return p
}

// The template and the module deploy the same functions, stream mapping,
// schedule, log retention and alarms, with the same defaults.
func TestSettingsMatchTemplate(t *testing.T) {
	tpl := templateSettings(t, deploy.TemplateOptions{})
	if len(tpl) < 30 {
		t.Fatalf("read only %d settings from the template: %v", len(tpl), tpl)
	}
	report(t, "settings", settingsProblems(loadModule(t, moduleDir), nil, tpl))
}

// A drift of either side's settings is caught.
func TestSettingsMutationsAreCaught(t *testing.T) {
	tpl := templateSettings(t, deploy.TemplateOptions{})
	for _, tc := range []struct {
		name, file, old, new, want string
	}{
		{"starting position", "lambda.tf", `starting_position                  = "TRIM_HORIZON"`, `starting_position                  = "LATEST"`, "stream starting position"},
		{"retries default", "variables.tf", "  default     = 100\n", "  default     = 10\n", "stream retries"},
		{"operation dropped", "alarms.tf", `"Query", "TransactWriteItems"]`, `"Query"]`, "the backend calls"},
		{"iterator age threshold", "variables.tf", "  default     = 300000\n", "  default     = 60000\n", "alarm iterator_age"},
		{"env var", "lambda.tf", `TOLLGATE_MODE  = "reconcile"`, `TOLLGATE_MODE  = "reconcile"
      TOLLGATE_UPKEEP = "false"`, "reconcile env TOLLGATE_UPKEEP"},
		{"memory", "lambda.tf", "memory_size      = var.lambda_memory_size", "memory_size      = 512", "memory"},
		{"reconciler retries", "lambda.tf", "maximum_retry_attempts       = 0", "maximum_retry_attempts       = 2", "reconcile async retries"},
		{"reconciler event age", "lambda.tf", "maximum_event_age_in_seconds = 60", "maximum_event_age_in_seconds = 3600", "reconcile async event age"},
		{"throttles period", "alarms.tf", `metric_name         = "Throttles"
  statistic           = "Sum"
  period              = var.alarm_period_seconds`, `metric_name         = "Throttles"
  statistic           = "Sum"
  period              = 300`, "alarm function_throttles"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := parseModule(moduleDir, mutate(t, readModule(t, moduleDir), tc.file, tc.old, tc.new))
			for _, p := range append(m.problems, settingsProblems(m, nil, tpl)...) {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Errorf("mutation not caught: want a problem containing %q", tc.want)
		})
	}
	// And the template's side: a setting changed there is caught too.
	changed := map[string]string{}
	for k, v := range tpl {
		changed[k] = v
	}
	changed["stream tumbling window"] = "60"
	changed["reconcile async retries"] = defaultAsyncRetries // the template without its event invoke configuration
	delete(changed, "alarm function_throttles reconcile")    // the template without the alarm
	problems := settingsProblems(loadModule(t, moduleDir), nil, changed)
	for _, k := range []string{"stream tumbling window", "reconcile async retries", "alarm function_throttles reconcile"} {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, k) }) {
			t.Errorf("a template setting that differs is not caught: %s", k)
		}
	}
}
