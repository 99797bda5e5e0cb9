package deploy

import (
	"encoding/json"
	"fmt"

	"github.com/tollgate-rl/tollgate/events"
	"github.com/tollgate-rl/tollgate/model"
)

// maxEventPatterns bounds the EventBridge rules one rules file adds: each
// is two resources, and a template holds at most 500.
const maxEventPatterns = 50

// maxEventRulesEnv bounds the rules as the events function's environment
// variable: Lambda takes 4 KB of variables in all, and the function has
// others.
const maxEventRulesEnv = 3584

// eventPattern is the EventBridge pattern of a rule: its source and,
// when it has one, its detail-type. The rule's when conditions are left
// to the function (package events compares numbers and booleans as their
// JSON text, which an EventBridge pattern of strings would not match), so
// the pattern is wider than the rule, never narrower.
type eventPattern struct {
	source, detailType string
}

func (p eventPattern) json() map[string]any {
	out := map[string]any{"source": []any{p.source}}
	if p.detailType != "" {
		out["detail-type"] = []any{p.detailType}
	}
	return out
}

// EventPatterns returns the EventBridge event patterns that hand the
// events function every event cfg's rules may match: one per distinct
// source and detail-type, in the rules' order. A rule without a
// detail-type takes every event of its source, so the rules of the same
// source with a detail-type need no pattern of their own.
func EventPatterns(cfg *events.Config) []map[string]any {
	wide := map[string]bool{}
	for _, r := range cfg.Rules {
		if r.DetailType == "" {
			wide[r.Source] = true
		}
	}
	seen := map[eventPattern]bool{}
	var out []map[string]any
	for _, r := range cfg.Rules {
		p := eventPattern{source: r.Source, detailType: r.DetailType}
		if wide[r.Source] {
			p.detailType = ""
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p.json())
	}
	return out
}

// rulesEnv renders cfg as the function's TOLLGATE_EVENT_RULES: JSON (which
// events.ParseConfig reads as YAML), without the comments and spacing of
// the file, so that it fits Lambda's limit on environment variables.
func rulesEnv(cfg *events.Config) (string, error) {
	type rule struct {
		Name       string              `json:"name"`
		Source     string              `json:"source"`
		DetailType string              `json:"detail_type,omitempty"`
		ID         string              `json:"id"`
		When       map[string][]string `json:"when,omitempty"`
	}
	var c struct {
		Rules []rule `json:"rules"`
	}
	for _, r := range cfg.Rules {
		c.Rules = append(c.Rules, rule(r))
	}
	b, err := json.Marshal(c)
	return string(b), err
}

// addEvents adds the events function (TOLLGATE_MODE=events, with the rules
// of cfg, releasing reservations of namespace ns: "" is the default), its
// log group, its alarm, and an EventBridge rule per pattern of
// EventPatterns with the permission to invoke the function. The function
// runs as the worker role, whose log statement gains its log group.
func addEvents(t map[string]any, cfg *events.Config, ns string) error {
	if err := cfg.Validate(); err != nil {
		return invalid("events-rules", "", err.Error())
	}
	if ns != "" {
		if err := model.ValidateNamespace(ns); err != nil {
			return invalid("events-namespace", ns, err.Error())
		}
	}
	env, err := rulesEnv(cfg)
	if err != nil {
		return err
	}
	if len(env) > maxEventRulesEnv {
		return invalid("events-rules", "", fmt.Sprintf("the rules take %d bytes as the function's TOLLGATE_EVENT_RULES; Lambda's environment holds at most %d here", len(env), maxEventRulesEnv))
	}
	patterns := EventPatterns(cfg)
	if len(patterns) > maxEventPatterns {
		return invalid("events-rules", "", fmt.Sprintf("%d distinct sources and detail-types: at most %d per stack", len(patterns), maxEventPatterns))
	}
	resources := t["Resources"].(map[string]any)
	outputs := t["Outputs"].(map[string]any)
	vars := map[string]any{"TOLLGATE_TABLE": map[string]any{"Ref": "Table"}, "TOLLGATE_MODE": "events", "TOLLGATE_EVENT_RULES": env}
	if ns != "" {
		vars["TOLLGATE_NAMESPACE"] = ns
	}
	resources["EventsLogGroup"] = map[string]any{
		"Type": "AWS::Logs::LogGroup",
		"Properties": map[string]any{
			"LogGroupName":    map[string]any{"Fn::Sub": "/tollgate/${AWS::StackName}/events"},
			"RetentionInDays": map[string]any{"Ref": "LogRetentionDays"},
		},
	}
	resources["EventsFunction"] = map[string]any{
		"Type": "AWS::Lambda::Function",
		"Properties": map[string]any{
			"Description":   "Tollgate events: releases the reservations infrastructure events name (package events)",
			"Role":          map[string]any{"Fn::GetAtt": []any{"WorkerRole", "Arn"}},
			"Runtime":       "provided.al2023",
			"Architectures": []any{"arm64"},
			"Handler":       "bootstrap",
			"Code": map[string]any{
				"S3Bucket": map[string]any{"Ref": "LambdaCodeS3Bucket"},
				"S3Key":    map[string]any{"Ref": "LambdaCodeS3Key"},
			},
			"MemorySize":    map[string]any{"Ref": "LambdaMemorySize"},
			"Timeout":       60,
			"Environment":   map[string]any{"Variables": vars},
			"LoggingConfig": map[string]any{"LogGroup": map[string]any{"Ref": "EventsLogGroup"}, "LogFormat": "JSON"},
		},
	}
	topic := map[string]any{"Fn::If": []any{"HasAlarmEmail", []any{map[string]any{"Ref": "AlarmTopic"}}, map[string]any{"Ref": "AWS::NoValue"}}}
	for _, a := range []struct{ name, metric, desc string }{
		{"EventsErrorsAlarm", "Errors", "Tollgate: events function invocations fail (EventBridge retries; reservations it did not release stay held; docs/operations.md, Alarms)."},
		{"EventsThrottlesAlarm", "Throttles", "Tollgate: events function invocations are throttled (the account's concurrency; EventBridge retries for 24 hours)."},
	} {
		resources[a.name] = eventsAlarm(a.metric, a.desc, topic)
	}
	for i, p := range patterns {
		rule := fmt.Sprintf("EventsRule%d", i+1)
		resources[rule] = map[string]any{
			"Type": "AWS::Events::Rule",
			"Properties": map[string]any{
				"Description":  map[string]any{"Fn::Sub": fmt.Sprintf("Tollgate events: %s (${AWS::StackName})", describePattern(p))},
				"EventPattern": p,
				"State":        "ENABLED",
				"Targets":      []any{map[string]any{"Id": "events", "Arn": map[string]any{"Fn::GetAtt": []any{"EventsFunction", "Arn"}}}},
			},
		}
		resources[rule+"Permission"] = map[string]any{
			"Type": "AWS::Lambda::Permission",
			"Properties": map[string]any{
				"FunctionName": map[string]any{"Ref": "EventsFunction"},
				"Action":       "lambda:InvokeFunction",
				"Principal":    "events.amazonaws.com",
				"SourceArn":    map[string]any{"Fn::GetAtt": []any{rule, "Arn"}},
			},
		}
	}
	outputs["EventsFunctionName"] = map[string]any{
		"Description": "The events function: EventBridge rules hand it the events of the rules file.",
		"Value":       map[string]any{"Ref": "EventsFunction"},
	}
	return addWorkerLogGroup(resources, "EventsLogGroup")
}

// eventsAlarm is an alarm on a metric of the events function, as the
// other functions' are.
func eventsAlarm(metric, desc string, topic any) map[string]any {
	return map[string]any{
		"Type": "AWS::CloudWatch::Alarm",
		"Properties": map[string]any{
			"AlarmDescription":   desc,
			"Namespace":          "AWS/Lambda",
			"MetricName":         metric,
			"Dimensions":         []any{map[string]any{"Name": "FunctionName", "Value": map[string]any{"Ref": "EventsFunction"}}},
			"Statistic":          "Sum",
			"Period":             60,
			"EvaluationPeriods":  5,
			"DatapointsToAlarm":  3,
			"Threshold":          0,
			"ComparisonOperator": "GreaterThanThreshold",
			"TreatMissingData":   "notBreaching",
			"AlarmActions":       topic,
			"OKActions":          topic,
		},
	}
}

// describePattern names a pattern in its rule's description.
func describePattern(p map[string]any) string {
	s := fmt.Sprint(p["source"].([]any)[0])
	if dt, ok := p["detail-type"].([]any); ok {
		s += " / " + fmt.Sprint(dt[0])
	}
	return s
}

// addWorkerLogGroup lets the worker role write to the log group.
func addWorkerLogGroup(resources map[string]any, group string) error {
	role, _ := resources["WorkerRole"].(map[string]any)
	props, _ := role["Properties"].(map[string]any)
	policies, _ := props["Policies"].([]any)
	for _, p := range policies {
		doc, _ := p.(map[string]any)["PolicyDocument"].(map[string]any)
		stmts, _ := doc["Statement"].([]any)
		for _, s := range stmts {
			sm, _ := s.(map[string]any)
			if sm["Sid"] == "Logs" {
				sm["Resource"] = append(sm["Resource"].([]any), map[string]any{"Fn::GetAtt": []any{group, "Arn"}})
				return nil
			}
		}
	}
	return fmt.Errorf("deploy: the embedded template: WorkerRole has no Logs statement")
}
