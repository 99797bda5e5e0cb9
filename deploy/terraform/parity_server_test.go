package terraform_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/tollgate-rl/tollgate/deploy"
	"github.com/tollgate-rl/tollgate/events"
)

// The server (server_image, ServerImage) and the events function
// (events_rules, --events-rules) compared as the rest of the settings:
// the task, the service, the load balancer, its target group and
// listener, the security groups' ingress, the alarms, the events
// function's environment and its EventBridge patterns.

// testRulesFile is package events' example rules file (two sources).
const testRulesFile = "../../events/testdata/emr-rules.yaml"

// serverTemplateParams and serverModuleVars choose the same server.
var (
	serverTemplateParams = map[string]string{
		"ServerImage": "tollgate:v1", "ServerVpcId": "vpc-0a1b", "ServerSubnetIds": "subnet-01,subnet-02",
		"LoadBalancerCertificateArn": "arn:aws:acm:eu-west-1:123456789012:certificate/abc",
	}
	serverModuleVars = map[string]cty.Value{
		"server_image": cty.StringVal("tollgate:v1"), "server_vpc_id": cty.StringVal("vpc-0a1b"),
		"server_subnet_ids":             cty.ListVal([]cty.Value{cty.StringVal("subnet-01"), cty.StringVal("subnet-02")}),
		"load_balancer_certificate_arn": cty.StringVal("arn:aws:acm:eu-west-1:123456789012:certificate/abc"),
	}
)

// canonicalRulesErr renders a rules file as package events reads it, so
// that the template's compact JSON and the module's re-encoded YAML
// compare equal when they hold the same rules.
func canonicalRulesErr(src string) (string, error) {
	cfg, err := events.ParseConfig([]byte(src))
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(cfg)
	return string(b), err
}

func canonicalRules(t *testing.T, src string) string {
	t.Helper()
	s, err := canonicalRulesErr(src)
	if err != nil {
		t.Fatalf("TOLLGATE_EVENT_RULES %q: %v", src, err)
	}
	return s
}

// canonicalJSON re-encodes a JSON document with sorted keys.
func canonicalJSON(t *testing.T, src string) string {
	var v any
	if err := json.Unmarshal([]byte(src), &v); err != nil {
		t.Fatalf("%q: %v", src, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// logGroupsKnown gives the module's log groups, the server's name known
// (its task definition's container_definitions name it).
func logGroupsKnown(m *module) cty.Value {
	groups := map[string]cty.Value{}
	for key := range m.resources {
		if name, ok := strings.CutPrefix(key, "aws_cloudwatch_log_group."); ok {
			groups[name] = cty.DynamicVal
		}
	}
	groups["server"] = cty.TupleVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("LOGGROUP")})})
	return cty.ObjectVal(groups)
}

// dataKnown gives the data sources the settings read: the region (as
// the template's ${AWS::Region} is rendered, REGION); the others unknown.
func dataKnown(m *module) cty.Value {
	types := map[string]map[string]cty.Value{}
	for key := range m.data {
		typ, name, _ := strings.Cut(key, ".")
		if types[typ] == nil {
			types[typ] = map[string]cty.Value{}
		}
		types[typ][name] = cty.DynamicVal
	}
	if types["aws_region"] != nil {
		types["aws_region"]["current"] = cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("REGION")})
	}
	out := map[string]cty.Value{}
	for typ, names := range types {
		out[typ] = cty.ObjectVal(names)
	}
	return cty.ObjectVal(out)
}

// cfnResource is a resource of the template.
type cfnResource struct {
	Type       string
	Condition  string
	Properties map[string]any
}

// templateServerSettings reads the server's settings from the template's
// resources that are on.
func templateServerSettings(resources map[string]cfnResource, val func(any) string, out map[string]string) {
	list := func(v any) []any { l, _ := v.([]any); return l }
	obj := func(v any) map[string]any { m, _ := v.(map[string]any); return m }
	for _, r := range resources {
		p := r.Properties
		switch r.Type {
		case "AWS::ECS::TaskDefinition":
			out["server cpu"], out["server memory"] = val(p["Cpu"]), val(p["Memory"])
			out["server network mode"], out["server compatibilities"] = val(p["NetworkMode"]), val(p["RequiresCompatibilities"])
			rp := obj(p["RuntimePlatform"])
			out["server platform"] = val(rp["OperatingSystemFamily"]) + " " + val(rp["CpuArchitecture"])
			c := obj(list(p["ContainerDefinitions"])[0])
			out["server container"] = val(c["Name"]) + " " + val(c["Image"]) + " essential " + val(c["Essential"]) + " stop " + val(c["StopTimeout"])
			var cmd []string
			for _, a := range list(c["Command"]) {
				cmd = append(cmd, val(a))
			}
			out["server command"] = strings.Join(cmd, " ")
			for _, pm := range list(c["PortMappings"]) {
				out["server port"] = val(obj(pm)["ContainerPort"]) + "/" + val(obj(pm)["Protocol"])
			}
			for _, e := range list(c["Environment"]) {
				out["server env "+val(obj(e)["Name"])] = val(obj(e)["Value"])
			}
			lc := obj(c["LogConfiguration"])
			out["server log driver"] = val(lc["LogDriver"]) + " prefix " + val(obj(lc["Options"])["awslogs-stream-prefix"])
		case "AWS::ECS::Service":
			out["server launch type"], out["server desired count"] = val(p["LaunchType"]), val(p["DesiredCount"])
			dc := obj(p["DeploymentConfiguration"])
			cb := obj(dc["DeploymentCircuitBreaker"])
			out["server deployment"] = fmt.Sprintf("circuit breaker %s rollback %s, %s%%-%s%%", val(cb["Enable"]), val(cb["Rollback"]),
				val(dc["MinimumHealthyPercent"]), val(dc["MaximumPercent"]))
			out["server grace period"] = val(p["HealthCheckGracePeriodSeconds"])
			out["server public ip"] = val(obj(obj(p["NetworkConfiguration"])["AwsvpcConfiguration"])["AssignPublicIp"])
			lb := obj(list(p["LoadBalancers"])[0])
			out["server service target"] = val(lb["ContainerName"]) + ":" + val(lb["ContainerPort"])
		case "AWS::ElasticLoadBalancingV2::TargetGroup":
			out["server target group"] = val(p["TargetType"]) + " " + val(p["Protocol"]) + " " + val(p["Port"])
			out["server health check"] = fmt.Sprintf("%s every %s timeout %s, %s up %s down, %s", val(p["HealthCheckPath"]),
				val(p["HealthCheckIntervalSeconds"]), val(p["HealthCheckTimeoutSeconds"]), val(p["HealthyThresholdCount"]),
				val(p["UnhealthyThresholdCount"]), val(obj(p["Matcher"])["HttpCode"]))
			for _, a := range list(p["TargetGroupAttributes"]) {
				out["server target group "+val(obj(a)["Key"])] = val(obj(a)["Value"])
			}
		case "AWS::ElasticLoadBalancingV2::LoadBalancer":
			out["server load balancer"] = val(p["Type"]) + " " + val(p["Scheme"])
			for _, a := range list(p["LoadBalancerAttributes"]) {
				out["server load balancer "+val(obj(a)["Key"])] = val(obj(a)["Value"])
			}
		case "AWS::ElasticLoadBalancingV2::Listener":
			out["server listener"] = val(p["Protocol"]) + " " + val(p["Port"]) + " " + val(p["SslPolicy"])
		case "AWS::EC2::SecurityGroup":
			for _, in := range list(p["SecurityGroupIngress"]) {
				i := obj(in)
				from := val(i["CidrIp"])
				if i["SourceSecurityGroupId"] != nil {
					from = "the load balancer"
				}
				out["server ingress "+val(i["FromPort"])] = fmt.Sprintf("%s %s-%s from %s", val(i["IpProtocol"]), val(i["FromPort"]), val(i["ToPort"]), from)
			}
		}
	}
}

// moduleServerSettings reads the server's settings and the events
// function's patterns from the module's instances.
func moduleServerSettings(m *module, e *evaluator, out map[string]string) error {
	inst := func(key string) ([]instance, error) {
		b := m.resources[key]
		if b == nil {
			return nil, fmt.Errorf("no resource %s", key)
		}
		return e.instances(b)
	}
	rules, err := inst("aws_cloudwatch_event_rule.events")
	if err != nil {
		return err
	}
	for _, r := range rules {
		p, err := r.str("event_pattern")
		if err != nil {
			return err
		}
		var v any
		if err := json.Unmarshal([]byte(p), &v); err != nil {
			return fmt.Errorf("aws_cloudwatch_event_rule.events: %w", err)
		}
		b, _ := json.Marshal(v)
		out["events pattern "+string(b)] = "on"
	}
	td, err := inst("aws_ecs_task_definition.server")
	if err != nil || len(td) == 0 {
		return err // no server_image
	}
	get := func(key string) (instance, error) {
		in, err := inst(key)
		if err != nil || len(in) != 1 {
			return instance{}, fmt.Errorf("%s: %d instances (%v)", key, len(in), err)
		}
		return in[0], nil
	}
	var errs []string
	str := func(in instance, name string) string {
		s, err := in.str(name)
		if err != nil {
			errs = append(errs, err.Error())
		}
		return s
	}
	block := func(in instance, typ string) instance {
		bs, err := in.blocks(typ)
		if err != nil || len(bs) != 1 {
			errs = append(errs, fmt.Sprintf("%s: %d %s blocks (%v)", pos(in.at), len(bs), typ, err))
			return instance{body: in.body, ctx: in.ctx, at: in.at}
		}
		return bs[0]
	}
	t := td[0]
	out["server cpu"], out["server memory"] = str(t, "cpu"), str(t, "memory")
	compat, _ := t.strs("requires_compatibilities")
	out["server network mode"], out["server compatibilities"] = str(t, "network_mode"), strings.Join(compat, ",")
	rp := block(t, "runtime_platform")
	out["server platform"] = str(rp, "operating_system_family") + " " + str(rp, "cpu_architecture")
	var containers []struct {
		Name         string
		Image        string
		Essential    bool
		StopTimeout  int
		Command      []string
		PortMappings []struct {
			ContainerPort int
			Protocol      string
		}
		Environment      []struct{ Name, Value string }
		LogConfiguration struct {
			LogDriver string
			Options   map[string]string
		}
	}
	if err := json.Unmarshal([]byte(str(t, "container_definitions")), &containers); err != nil || len(containers) != 1 {
		return fmt.Errorf("aws_ecs_task_definition.server: container_definitions: %d containers (%v)", len(containers), err)
	}
	c := containers[0]
	out["server container"] = fmt.Sprintf("%s %s essential %t stop %d", c.Name, c.Image, c.Essential, c.StopTimeout)
	out["server command"] = strings.Join(c.Command, " ")
	for _, pm := range c.PortMappings {
		out["server port"] = fmt.Sprintf("%d/%s", pm.ContainerPort, pm.Protocol)
	}
	for _, e := range c.Environment {
		out["server env "+e.Name] = e.Value
	}
	out["server log driver"] = c.LogConfiguration.LogDriver + " prefix " + c.LogConfiguration.Options["awslogs-stream-prefix"]

	lg, err := get("aws_cloudwatch_log_group.server")
	if err != nil {
		return err
	}
	out["log retention server"] = str(lg, "retention_in_days")

	svc, err := get("aws_ecs_service.server")
	if err != nil {
		return err
	}
	out["server launch type"], out["server desired count"] = str(svc, "launch_type"), str(svc, "desired_count")
	cb := block(svc, "deployment_circuit_breaker")
	out["server deployment"] = fmt.Sprintf("circuit breaker %s rollback %s, %s%%-%s%%", str(cb, "enable"), str(cb, "rollback"),
		str(svc, "deployment_minimum_healthy_percent"), str(svc, "deployment_maximum_percent"))
	out["server grace period"] = str(svc, "health_check_grace_period_seconds")
	out["server public ip"] = map[string]string{"true": "ENABLED", "false": "DISABLED"}[str(block(svc, "network_configuration"), "assign_public_ip")]
	lb := block(svc, "load_balancer")
	out["server service target"] = str(lb, "container_name") + ":" + str(lb, "container_port")

	tg, err := get("aws_lb_target_group.server")
	if err != nil {
		return err
	}
	out["server target group"] = str(tg, "target_type") + " " + str(tg, "protocol") + " " + str(tg, "port")
	hc := block(tg, "health_check")
	out["server health check"] = fmt.Sprintf("%s every %s timeout %s, %s up %s down, %s", str(hc, "path"), str(hc, "interval"),
		str(hc, "timeout"), str(hc, "healthy_threshold"), str(hc, "unhealthy_threshold"), str(hc, "matcher"))
	out["server target group deregistration_delay.timeout_seconds"] = str(tg, "deregistration_delay")

	alb, err := get("aws_lb.server")
	if err != nil {
		return err
	}
	scheme := map[string]string{"true": "internal", "false": "internet-facing"}[str(alb, "internal")]
	out["server load balancer"] = str(alb, "load_balancer_type") + " " + scheme
	out["server load balancer routing.http.drop_invalid_header_fields.enabled"] = str(alb, "drop_invalid_header_fields")

	ln, err := get("aws_lb_listener.server")
	if err != nil {
		return err
	}
	out["server listener"] = str(ln, "protocol") + " " + str(ln, "port") + " " + str(ln, "ssl_policy")

	for _, sg := range []string{"aws_security_group.load_balancer", "aws_security_group.server"} {
		in, err := get(sg)
		if err != nil {
			return err
		}
		ings, _ := in.blocks("ingress")
		for _, i := range ings {
			from := ""
			if cidrs, _ := i.strs("cidr_blocks"); len(cidrs) > 0 {
				from = strings.Join(cidrs, ",")
			}
			if i.body.Attributes["security_groups"] != nil {
				from = "the load balancer"
			}
			out["server ingress "+str(i, "from_port")] = fmt.Sprintf("%s %s-%s from %s", str(i, "protocol"), str(i, "from_port"), str(i, "to_port"), from)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("server settings: %s", strings.Join(errs, "; "))
	}
	return nil
}

// serverEventsCases are the choices compared beyond the defaults.
func serverEventsCases(t *testing.T) []struct {
	name string
	opts deploy.TemplateOptions
	vars map[string]cty.Value
} {
	rules := mustRead(testRulesFile)
	cfg, err := events.ParseConfig([]byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	both := map[string]cty.Value{"events_rules": cty.StringVal(rules), "events_namespace": cty.StringVal("billing")}
	for k, v := range serverModuleVars {
		both[k] = v
	}
	return []struct {
		name string
		opts deploy.TemplateOptions
		vars map[string]cty.Value
	}{
		{"server", deploy.TemplateOptions{Parameters: serverTemplateParams}, serverModuleVars},
		{"server over HTTP, internal",
			deploy.TemplateOptions{Parameters: map[string]string{"ServerImage": "tollgate:v1", "ServerVpcId": "vpc-0a1b",
				"ServerSubnetIds": "subnet-01,subnet-02", "LoadBalancerScheme": "internal", "ServerAssignPublicIp": "ENABLED"}},
			map[string]cty.Value{"server_image": cty.StringVal("tollgate:v1"), "server_vpc_id": cty.StringVal("vpc-0a1b"),
				"server_subnet_ids":    cty.ListVal([]cty.Value{cty.StringVal("subnet-01"), cty.StringVal("subnet-02")}),
				"load_balancer_scheme": cty.StringVal("internal"), "server_assign_public_ip": cty.True}},
		{"events", deploy.TemplateOptions{EventRules: cfg, EventsNamespace: "billing"},
			map[string]cty.Value{"events_rules": cty.StringVal(rules), "events_namespace": cty.StringVal("billing")}},
		{"server and events", deploy.TemplateOptions{Parameters: serverTemplateParams, EventRules: cfg, EventsNamespace: "billing"}, both},
	}
}

// The module and the template deploy the same server and the same events
// function, with the same defaults, for the same choices.
func TestServerEventsSettingsMatchTemplate(t *testing.T) {
	m := loadModule(t, moduleDir)
	for _, tc := range serverEventsCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			tpl := templateSettings(t, tc.opts)
			want := map[string]bool{"server": tc.opts.Parameters["ServerImage"] != "", "events": tc.opts.EventRules != nil}
			for _, k := range []string{"server command", "server health check", "alarm server server-latency metric"} {
				if _, ok := tpl[k]; !ok && want["server"] {
					t.Fatalf("the template has no %q: %v", k, tpl)
				}
			}
			if _, ok := tpl["events env TOLLGATE_EVENT_RULES"]; ok != want["events"] {
				t.Fatalf("events env TOLLGATE_EVENT_RULES: in the template %t, want %t", ok, want["events"])
			}
			report(t, "settings", settingsProblems(m, tc.vars, tpl))
		})
	}
}

// A drift of the server's or the events function's settings is caught.
func TestServerEventsMutationsAreCaught(t *testing.T) {
	cases := serverEventsCases(t)
	both := cases[len(cases)-1]
	tpl := templateSettings(t, both.opts)
	for _, tc := range []struct {
		name, file, old, new, want string
	}{
		{"health check path", "server.tf", `path                = "/readyz"`, `path                = "/healthz"`, "server health check"},
		{"command", "server.tf", `"--reconcile-interval", "0"`, `"--reconcile-interval", "1m"`, "server command"},
		{"circuit breaker", "server.tf", "rollback = true", "rollback = false", "server deployment"},
		{"desired count", "variables.tf", "  default     = 2\n", "  default     = 1\n", "server desired count"},
		{"latency statistic", "server.tf", `statistic   = "p99"`, `statistic   = "p90"`, "alarm server server-latency"},
		{"listener", "server.tf", `local.server_https ? "HTTPS" : "HTTP"`, `"HTTP"`, "server listener"},
		{"pattern", "events.tf", `"detail-type" = [p.detail_type]`, `"detail_type" = [p.detail_type]`, "events pattern"},
		{"events namespace", "events.tf", `{ TOLLGATE_NAMESPACE = var.events_namespace }`, `{}`, "events env TOLLGATE_NAMESPACE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := parseModule(moduleDir, mutate(t, readModule(t, moduleDir), tc.file, tc.old, tc.new))
			if slices.ContainsFunc(append(m.problems, settingsProblems(m, both.vars, tpl)...), func(p string) bool { return strings.Contains(p, tc.want) }) {
				return
			}
			t.Errorf("mutation not caught: want a problem containing %q", tc.want)
		})
	}
}
