package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/deploy"
)

const testTableARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/tollgate"

// TestDeployEmit checks that --emit cloudformation prints the template
// with the parameter flags as defaults and the tenants' policies.
func TestDeployEmit(t *testing.T) {
	code, out, errOut := run(t, "", "deploy", "--emit", "cloudformation", "--billing-mode", "PROVISIONED",
		"--write-capacity-units", "40", "--lambda-code-s3-bucket", "my-artifacts", "--namespace-id", "3f9a0c1d2e4b5a67")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var tpl struct {
		Parameters map[string]map[string]any
		Resources  map[string]any
	}
	if err := json.Unmarshal([]byte(out), &tpl); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]any{"BillingMode": "PROVISIONED", "WriteCapacityUnits": 40.0, "LambdaCodeS3Bucket": "my-artifacts", "TableName": "tollgate"} {
		if got := tpl.Parameters[name]["Default"]; got != want {
			t.Errorf("%s default = %v, want %v", name, got, want)
		}
	}
	if tpl.Resources["TenantAcquirePolicy3f9a0c1d2e4b5a67"] == nil {
		t.Error("no tenant policy")
	}
	want, err := deploy.Template(deploy.TemplateOptions{Parameters: map[string]string{"BillingMode": "PROVISIONED",
		"WriteCapacityUnits": "40", "LambdaCodeS3Bucket": "my-artifacts"}, NamespaceIDs: []string{"3f9a0c1d2e4b5a67"}})
	if err != nil || string(want) != out {
		t.Errorf("output differs from deploy.Template (%v)", err)
	}
}

// TestDeployEmitServerEvents checks that --server-image and
// --events-rules add the server and the events function to the template
// printed: deploy.Template's output for the same choices.
func TestDeployEmitServerEvents(t *testing.T) {
	const rules = "../../events/testdata/emr-rules.yaml"
	code, out, errOut := run(t, "", "deploy", "--emit", "cloudformation", "--server-image", "tollgate:v1",
		"--server-vpc-id", "vpc-0a1b", "--server-subnet-ids", "subnet-01,subnet-02", "--load-balancer-scheme", "internal",
		"--server-desired-count", "3", "--events-rules", rules, "--events-namespace", "billing")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var tpl struct {
		Parameters map[string]map[string]any
		Resources  map[string]map[string]any
	}
	if err := json.Unmarshal([]byte(out), &tpl); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]any{"ServerImage": "tollgate:v1", "ServerVpcId": "vpc-0a1b", "ServerSubnetIds": "subnet-01,subnet-02",
		"LoadBalancerScheme": "internal", "ServerDesiredCount": 3.0} {
		if got := tpl.Parameters[name]["Default"]; got != want {
			t.Errorf("%s default = %v, want %v", name, got, want)
		}
	}
	for _, r := range []string{"ServerService", "ServerLoadBalancer", "EventsFunction", "EventsRule1", "EventsRule1Permission", "EventsRule2"} {
		if tpl.Resources[r] == nil {
			t.Errorf("no %s", r)
		}
	}
	cfg, err := loadEventRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	want, err := deploy.Template(deploy.TemplateOptions{Parameters: map[string]string{"ServerImage": "tollgate:v1", "ServerVpcId": "vpc-0a1b",
		"ServerSubnetIds": "subnet-01,subnet-02", "LoadBalancerScheme": "internal", "ServerDesiredCount": "3"},
		EventRules: cfg, EventsNamespace: "billing"})
	if err != nil || string(want) != out {
		t.Errorf("output differs from deploy.Template (%v)", err)
	}
}

// TestDeployFlagsInvalid checks that bad CloudFormation and IAM flags
// are usage errors (exit 2) naming the flag, and that nothing is printed.
func TestDeployFlagsInvalid(t *testing.T) {
	cases := []struct {
		args []string
		flag string
	}{
		{[]string{"deploy", "--emit", "terraform"}, "--emit"},
		{[]string{"deploy", "--emit", "cloudformation", "--stack", "s"}, "--emit and --stack"},
		{[]string{"deploy", "--stack", "1bad"}, "--stack"},
		{[]string{"deploy", "--stack", "has_underscore"}, "--stack"},
		{[]string{"deploy", "--emit", "cloudformation", "--billing-mode", "ON_DEMAND"}, "--billing-mode"},
		{[]string{"deploy", "--emit", "cloudformation", "--read-capacity-units", "-1"}, "--read-capacity-units"},
		{[]string{"deploy", "--emit", "cloudformation", "--lambda-memory-size", "lots"}, "--lambda-memory-size"},
		{[]string{"deploy", "--emit", "cloudformation", "--log-retention-days", "8"}, "--log-retention-days"},
		{[]string{"deploy", "--emit", "cloudformation", "--alarm-email", "oncall"}, "--alarm-email"},
		{[]string{"deploy", "--emit", "cloudformation", "--permissions-boundary-arn", "arn:aws:iam::1:role/x"}, "--permissions-boundary-arn"},
		{[]string{"deploy", "--emit", "cloudformation", "--namespace-id", "ab/*"}, "--namespace-id"},
		{[]string{"deploy", "--emit", "cloudformation", "--store", "dynamodb://t"}, "--store"},
		{[]string{"deploy", "--emit", "cloudformation", "--region", "eu-west-1"}, "--region"},
		{[]string{"deploy", "--store", "dynamodb://t", "--billing-mode", "PROVISIONED"}, "--billing-mode"},
		{[]string{"deploy", "--store", "dynamodb://t", "--namespace-id", "3f9a0c1d2e4b5a67"}, "--namespace-id"},
		{[]string{"deploy", "--stack", "tollgate", "--region", "eu-west-1"}, "--lambda-code-s3-bucket"},
		{[]string{"iam", "policy", "--persona", "root", "--table", testTableARN}, "--persona"},
		{[]string{"iam", "policy", "--table", testTableARN}, "persona"},
		{[]string{"iam", "policy", "--persona", "acquire"}, "table"},
		{[]string{"iam", "policy", "--persona", "acquire", "--table", "tollgate"}, "--table"},
		{[]string{"iam", "policy", "--persona", "acquire", "--table", testTableARN, "--namespace-id", "*"}, "--namespace-id"},
		{[]string{"iam", "policy", "--persona", "worker", "--table", testTableARN, "--namespace-id", "3f9a0c1d2e4b5a67"}, "--namespace-id"},
		{[]string{"iam", "boundary", "--table", testTableARN}, "--namespace-id"},
		{[]string{"iam", "rolez"}, "rolez"},
		{[]string{"deploy", "--emit", "cloudformation", "--server-image", "tollgate:v1"}, "--server-vpc-id"},
		{[]string{"deploy", "--emit", "cloudformation", "--server-vpc-id", "vpc-0a1b"}, "--server-vpc-id"},
		{[]string{"deploy", "--emit", "cloudformation", "--events-rules", "testdata/no-such-rules.yaml"}, "--events-rules"},
		{[]string{"deploy", "--emit", "cloudformation", "--events-rules", "../../events/testdata/emr-events.jsonl"}, "--events-rules"},
		{[]string{"deploy", "--emit", "cloudformation", "--events-namespace", "billing"}, "--events-namespace"},
		{[]string{"deploy", "--store", "dynamodb://t", "--events-rules", "../../events/testdata/emr-rules.yaml"}, "--events-rules"},
	}
	for _, c := range cases {
		code, out, errOut := run(t, "", c.args...)
		if code != ExitUsage || !strings.Contains(errOut, c.flag) || out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %d bytes; want exit 2 naming %s and no output", c.args, code, errOut, len(out), c.flag)
		}
	}
}

// TestIAMPolicy checks that tollgate iam policy prints the generator's
// document.
func TestIAMPolicy(t *testing.T) {
	code, out, errOut := run(t, "", "iam", "policy", "--persona", "admin", "--table", testTableARN,
		"--namespace-id", "3f9a0c1d2e4b5a67", "--namespace-id", "0123456789abcdef")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want, err := deploy.Policy(deploy.PersonaAdmin, deploy.PolicyOptions{Tables: []string{testTableARN},
		NamespaceIDs: []string{"3f9a0c1d2e4b5a67", "0123456789abcdef"}})
	if err != nil || out != string(want)+"\n" {
		t.Errorf("output:\n%s\nwant (%v):\n%s", out, err, want)
	}
	if code, out, _ := run(t, "", "iam", "boundary", "--table", testTableARN, "--namespace-id", "3f9a0c1d2e4b5a67"); code != ExitOK || !json.Valid([]byte(out)) {
		t.Errorf("boundary: exit %d, %q", code, out)
	}
}

// TestDeployStackNoCredentials checks that --stack fails clearly, before
// any call, without a region or without credentials. The environment
// points every credential source away (no instance metadata either), so
// nothing leaves the machine.
func TestDeployStackNoCredentials(t *testing.T) {
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "",
		"AWS_PROFILE": "", "AWS_DEFAULT_PROFILE": "", "AWS_CONFIG_FILE": t.TempDir() + "/none", "AWS_SHARED_CREDENTIALS_FILE": t.TempDir() + "/none",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_ROLE_ARN": "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": ""} {
		t.Setenv(k, v)
	}
	args := []string{"deploy", "--stack", "tollgate", "--lambda-code-s3-bucket", "my-artifacts", "--cloudformation-endpoint", "http://127.0.0.1:1"}
	code, _, errOut := run(t, "", args...)
	if code != ExitUsage || !strings.Contains(errOut, "no AWS region") {
		t.Errorf("no region: exit %d, %s", code, errOut)
	}
	code, _, errOut = run(t, "", append(args, "--region", "eu-west-1")...)
	if code != ExitFailure || !strings.Contains(errOut, "no AWS credentials") {
		t.Errorf("no credentials: exit %d, %s", code, errOut)
	}
}
