package deploy

import (
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/events"
)

// testEventRules are package events' example rules (two sources).
func testEventRules(t *testing.T) *events.Config {
	t.Helper()
	f, err := os.Open("../events/testdata/emr-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := events.LoadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// serverParams are a server's parameters: the image and its network.
var serverParams = map[string]string{
	"ServerImage": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/tollgate:v1", "ServerVpcId": "vpc-0a1b2c3d",
	"ServerSubnetIds": "subnet-01,subnet-02", "LoadBalancerSubnetIds": "subnet-0a,subnet-0b",
	"LoadBalancerCertificateArn": "arn:aws:acm:eu-west-1:123456789012:certificate/abc", "LoadBalancerScheme": "internal",
	"ServerDesiredCount": "3", "ServerCpu": "1024", "ServerMemory": "2048", "LambdaCodeS3Bucket": "artifacts",
}

// serverResources are the resources a server adds.
var serverResources = []string{"ServerLogGroup", "ServerCluster", "ServerExecutionRole", "ServerTaskRole", "ServerTaskDefinition",
	"LoadBalancerSecurityGroup", "ServerSecurityGroup", "ServerLoadBalancer", "ServerTargetGroup", "ServerListener", "ServerService",
	"ServerErrorsAlarm", "LoadBalancerErrorsAlarm", "ServerLatencyAlarm"}

// TestTemplateServer checks the server's resources: all of them on
// HasServer (the ServerImage parameter), valid against the pinned
// schemas, the task role the admin persona, the task's
// store the stack's table, the load balancer's health check /readyz.
func TestTemplateServer(t *testing.T) {
	b, err := Template(TemplateOptions{Parameters: serverParams})
	if err != nil {
		t.Fatal(err)
	}
	tpl := parseTemplate(t, b)
	for _, e := range templateErrors(t, tpl, loadSchemas(t)) {
		t.Error(e)
	}
	for name, r := range tpl.Resources {
		isServer := slices.Contains(serverResources, name)
		if got := r["Condition"] == "HasServer"; got != isServer {
			t.Errorf("%s: condition %v; want HasServer exactly on the server's resources", name, r["Condition"])
		}
	}
	for _, name := range serverResources {
		if tpl.Resources[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	role := props(tpl, "ServerTaskRole")
	// The admin persona unconfined holds the acquire persona's actions
	// and the stored keys' records the server writes (tollgate keys
	// create through it).
	want := []any{map[string]any{"Ref": "OperatorPolicy"}}
	if !reflect.DeepEqual(role["ManagedPolicyArns"], want) || role["Policies"] != nil {
		t.Errorf("task role policies %v %v, want the admin persona's (OperatorPolicy) alone", role["ManagedPolicyArns"], role["Policies"])
	}
	td := props(tpl, "ServerTaskDefinition")
	c := td["ContainerDefinitions"].([]any)[0].(map[string]any)
	cmd := c["Command"].([]any)
	store := slices.Index(cmd, any("--store"))
	if cmd[0] != "serve" || store < 0 || !reflect.DeepEqual(cmd[store+1], tpl.Outputs["StoreURL"]["Value"]) {
		t.Errorf("command %v: want serve --store the StoreURL output %v", cmd, tpl.Outputs["StoreURL"]["Value"])
	}
	if i := slices.Index(cmd, any("--addr")); i < 0 || cmd[i+1] != "0.0.0.0:8080" {
		t.Errorf("command %v: want --addr 0.0.0.0:8080", cmd)
	}
	if i := slices.Index(cmd, any("--reconcile-interval")); i < 0 || cmd[i+1] != "0" {
		t.Errorf("command %v: the stack's reconciler function reconciles; want --reconcile-interval 0", cmd)
	}
	if pm := c["PortMappings"].([]any)[0].(map[string]any); pm["ContainerPort"] != 8080.0 {
		t.Errorf("port mapping %v", pm)
	}
	if td["NetworkMode"] != "awsvpc" || !reflect.DeepEqual(td["RequiresCompatibilities"], []any{"FARGATE"}) {
		t.Errorf("task definition: %v %v, want awsvpc on Fargate", td["NetworkMode"], td["RequiresCompatibilities"])
	}
	tg := props(tpl, "ServerTargetGroup")
	if tg["HealthCheckPath"] != "/readyz" || tg["Port"] != 8080.0 || tg["TargetType"] != "ip" {
		t.Errorf("target group %v: want /readyz on 8080, ip targets (awsvpc)", tg)
	}
	svc := props(tpl, "ServerService")
	cb := svc["DeploymentConfiguration"].(map[string]any)["DeploymentCircuitBreaker"].(map[string]any)
	if cb["Enable"] != true || cb["Rollback"] != true {
		t.Errorf("circuit breaker %v", cb)
	}
	for name, v := range serverParams {
		if got := scalar(tpl.Parameters[name]["Default"]); got != v {
			t.Errorf("%s default = %q, want %q", name, got, v)
		}
	}
	// Without ServerImage the resources are there, off.
	b, err = Template(TemplateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	def := parseTemplate(t, b)
	if def.Parameters["ServerImage"]["Default"] != "" || def.Resources["ServerService"]["Condition"] != "HasServer" {
		t.Errorf("the default template: ServerImage %v, ServerService %v", def.Parameters["ServerImage"], def.Resources["ServerService"])
	}
}

// TestTemplateServerInvalid: a server without its network, or network
// without a server, is refused, naming the flag.
func TestTemplateServerInvalid(t *testing.T) {
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range serverParams {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(m, kv[i])
			} else {
				m[kv[i]] = kv[i+1]
			}
		}
		return m
	}
	for _, tc := range []struct {
		params map[string]string
		option string
	}{
		{with("ServerVpcId", ""), "server-vpc-id"},
		{with("ServerSubnetIds", ""), "server-subnet-ids"},
		{with("ServerSubnetIds", "subnet-01,sg-02"), "server-subnet-ids"},
		{with("LoadBalancerSubnetIds", "subnet-01,"), "load-balancer-subnet-ids"},
		{with("ServerImage", ""), "server-vpc-id"},
		{with("ServerCpu", "300"), "server-cpu"},
		{with("ServerVpcId", "vpc-XYZ"), "server-vpc-id"},
		{with("LoadBalancerScheme", "public"), "load-balancer-scheme"},
		{with("LoadBalancerCertificateArn", "arn:aws:iam::123456789012:server-certificate/x"), "load-balancer-certificate-arn"},
		{with("ServerDesiredCount", "-1"), "server-desired-count"},
	} {
		_, err := Template(TemplateOptions{Parameters: tc.params})
		var ie *InvalidOptionError
		if !errors.As(err, &ie) || ie.Option != tc.option {
			t.Errorf("%v: %v, want an *InvalidOptionError of %s", tc.params, err, tc.option)
		}
	}
}

// TestEventPatterns: one pattern per source and detail-type the rules
// match, a rule without a detail-type taking its whole source.
func TestEventPatterns(t *testing.T) {
	rule := func(src, dt string) events.Rule { return events.Rule{Source: src, DetailType: dt, ID: "detail.id"} }
	p := func(src, dt string) map[string]any {
		m := map[string]any{"source": []any{src}}
		if dt != "" {
			m["detail-type"] = []any{dt}
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		rules []events.Rule
		want  []map[string]any
	}{
		{"one", []events.Rule{rule("aws.emr", "EMR Cluster State Change")}, []map[string]any{p("aws.emr", "EMR Cluster State Change")}},
		{"same twice", []events.Rule{rule("aws.emr", "X"), rule("aws.emr", "X")}, []map[string]any{p("aws.emr", "X")}},
		{"two types", []events.Rule{rule("aws.emr", "X"), rule("aws.emr", "Y")}, []map[string]any{p("aws.emr", "X"), p("aws.emr", "Y")}},
		{"whole source", []events.Rule{rule("aws.emr", "X"), rule("aws.emr", ""), rule("aws.batch", "Z")},
			[]map[string]any{p("aws.emr", ""), p("aws.batch", "Z")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := EventPatterns(&events.Config{Rules: tc.rules}); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTemplateEvents checks the events function and its rules: the
// function reads back the rules file's rules, each EventBridge rule
// targets it with a permission of its own, and its logs are the worker
// role's to write.
func TestTemplateEvents(t *testing.T) {
	cfg := testEventRules(t)
	b, err := Template(TemplateOptions{EventRules: cfg, EventsNamespace: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	tpl := parseTemplate(t, b)
	for _, e := range templateErrors(t, tpl, loadSchemas(t)) {
		t.Error(e)
	}
	env := props(tpl, "EventsFunction")["Environment"].(map[string]any)["Variables"].(map[string]any)
	back, err := events.ParseConfig([]byte(str(env["TOLLGATE_EVENT_RULES"])))
	if err != nil || !reflect.DeepEqual(back, cfg) {
		t.Errorf("TOLLGATE_EVENT_RULES reads back as %+v (%v), want %+v", back, err, cfg)
	}
	if env["TOLLGATE_MODE"] != "events" || env["TOLLGATE_NAMESPACE"] != "billing" {
		t.Errorf("environment %v", env)
	}
	var patterns []any
	for name, r := range tpl.Resources {
		if r["Type"] != "AWS::Events::Rule" || name == "ReconcileSchedule" {
			continue
		}
		p := props(tpl, name)
		patterns = append(patterns, p["EventPattern"])
		target := p["Targets"].([]any)[0].(map[string]any)["Arn"]
		if !reflect.DeepEqual(target, map[string]any{"Fn::GetAtt": []any{"EventsFunction", "Arn"}}) {
			t.Errorf("%s targets %v", name, target)
		}
		perm := props(tpl, name+"Permission")
		if perm == nil || !reflect.DeepEqual(perm["SourceArn"], map[string]any{"Fn::GetAtt": []any{name, "Arn"}}) ||
			!reflect.DeepEqual(perm["FunctionName"], map[string]any{"Ref": "EventsFunction"}) {
			t.Errorf("%s: permission %v", name, perm)
		}
	}
	if len(patterns) != 2 {
		t.Errorf("%d EventBridge rules, want 2 (aws.emr, aws.batch): %v", len(patterns), patterns)
	}
	if !strings.Contains(mustJSON(props(tpl, "WorkerRole")), `{"Fn::GetAtt":["EventsLogGroup","Arn"]}`) {
		t.Error("the worker role cannot write the events function's logs")
	}
	if tpl.Outputs["EventsFunctionName"] == nil {
		t.Error("no EventsFunctionName output")
	}
}

// TestTemplateEventsInvalid: rules too large for the function's
// environment, a bad namespace, or a namespace without rules.
func TestTemplateEventsInvalid(t *testing.T) {
	big := &events.Config{}
	for i := range 60 {
		big.Rules = append(big.Rules, events.Rule{Name: strings.Repeat("r", 40) + string(rune('A'+i%26)) + string(rune('a'+i/26)),
			Source: "aws.emr", DetailType: "EMR Cluster State Change", ID: "detail.clusterId"})
	}
	for _, tc := range []struct {
		name   string
		opts   TemplateOptions
		option string
	}{
		{"too large", TemplateOptions{EventRules: big}, "events-rules"},
		{"no rules", TemplateOptions{EventRules: &events.Config{}}, "events-rules"},
		{"bad namespace", TemplateOptions{EventRules: testEventRules(t), EventsNamespace: "Bad Name!"}, "events-namespace"},
		{"namespace alone", TemplateOptions{EventsNamespace: "billing"}, "events-namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Template(tc.opts)
			var ie *InvalidOptionError
			if !errors.As(err, &ie) || ie.Option != tc.option {
				t.Errorf("%v, want an *InvalidOptionError of %s", err, tc.option)
			}
		})
	}
}

// TestServerPersona: the server's task role has the admin persona alone,
// which must allow every action the acquire persona allows, on the same
// resources, and more (the stored keys' records): the server answers
// acquire keys with it.
func TestServerPersona(t *testing.T) {
	refs := []tableRef{func(suffix string) any { return "arn:aws:dynamodb:eu-west-1:123456789012:table/tollgate" + suffix }}
	acquire, err := document(PersonaAcquire, nil, refs)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := document(PersonaAdmin, nil, refs)
	if err != nil {
		t.Fatal(err)
	}
	allows := func(action string, res any) bool {
		for _, s := range admin.Statement {
			if s.Effect == "Allow" && s.Condition == nil && slices.Contains(s.Action, action) && slices.Contains(s.Resource, res) {
				return true
			}
		}
		return false
	}
	for _, s := range acquire.Statement {
		for _, a := range s.Action {
			for _, r := range s.Resource {
				if !allows(a, r) {
					t.Errorf("the acquire persona allows %s on %v (statement %s), the admin persona does not: the server's task role needs RuntimePolicy too", a, r, s.Sid)
				}
			}
		}
	}
}
