package check_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/deploy/helm/check"
)

// chartDir is the chart under test.
const chartDir = "../tollgate"

// kubeVersion is the Kubernetes version the chart is rendered for: the
// one of the pinned k8s.io/api (v0.37), whose types the objects are
// decoded into (helm built from source otherwise assumes v1.20, below the
// chart's kubeVersion).
const kubeVersion = "v1.37.0"

// helm returns the pinned helm scripts/test-helm.sh installed (HELM). The
// tests skip without it, unless CI is set.
func helm(t *testing.T) string {
	t.Helper()
	h := os.Getenv("HELM")
	if h == "" {
		switch os.Getenv("CI") {
		case "", "0", "false", "False", "FALSE":
			t.Skip("HELM is not set: run scripts/test-helm.sh")
		}
		t.Fatal("HELM is not set (CI is set, so this fails): run scripts/test-helm.sh")
	}
	return h
}

// render runs helm template on the chart with a values file of testdata
// and --set values, and returns its output, or its error output.
func render(t *testing.T, values string, sets ...string) ([]byte, error) {
	t.Helper()
	var args []string
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return renderArgs(t, values, args...)
}

// renderArgs is render with helm template's own arguments; a later
// --kube-version overrides kubeVersion.
func renderArgs(t *testing.T, values string, extra ...string) ([]byte, error) {
	t.Helper()
	args := []string{"template", "tollgate", chartDir, "--kube-version", kubeVersion, "--namespace", "tollgate", "-f", filepath.Join("testdata", values)}
	cmd := exec.Command(helm(t), append(args, extra...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return stderr.Bytes(), err
	}
	return out, nil
}

func mustRender(t *testing.T, values string, sets ...string) []byte {
	t.Helper()
	out, err := render(t, values, sets...)
	if err != nil {
		t.Fatalf("helm template -f %s: %v\n%s", values, err, out)
	}
	return out
}

// TestChartRenders renders every values file of testdata, checks each
// passes, and that each renders the objects its store choice asks for.
func TestChartRenders(t *testing.T) {
	for _, tc := range []struct {
		values                                    string
		deployments, statefulSets, pdbs, hpas, sm int
		secrets                                   int
	}{
		// The StatefulSet alone (the server reconciles), the keys Secret.
		{values: "embedded.yaml", statefulSets: 1, sm: 1, secrets: 1},
		// The server and the aggregator, autoscaled, keys in the store.
		{values: "dynamodb.yaml", deployments: 2, pdbs: 1, hpas: 1, sm: 1},
		// The server and the reconciler; the Redis URL's Secret.
		{values: "redis.yaml", deployments: 2, pdbs: 1, secrets: 1},
		// The server alone, its URL from the user's Secret.
		{values: "redis-minimal.yaml", deployments: 1},
	} {
		t.Run(tc.values, func(t *testing.T) {
			out := mustRender(t, tc.values)
			for _, err := range check.Check(out) {
				t.Error(err)
			}
			m, _ := check.Decode(out)
			got := []int{len(m.Deployments), len(m.StatefulSets), len(m.PDBs), len(m.HPAs), len(m.ServiceMonitors), len(m.Secrets)}
			want := []int{tc.deployments, tc.statefulSets, tc.pdbs, tc.hpas, tc.sm, tc.secrets}
			if !slicesEqual(got, want) {
				t.Errorf("Deployments, StatefulSets, PDBs, HPAs, ServiceMonitors, Secrets = %v, want %v", got, want)
			}
		})
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHelmLint runs helm lint --strict with every values file.
func TestHelmLint(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no values files: %v", err)
	}
	for _, f := range files {
		out, err := exec.Command(helm(t), "lint", "--strict", "--kube-version", kubeVersion, chartDir, "-f", f).CombinedOutput()
		if err != nil {
			t.Errorf("helm lint -f %s: %v\n%s", f, err, out)
		}
	}
}

// TestMutationsAreCaught edits a passing render as a broken chart would
// render it, and checks the checker reports each edit: proof that each
// rule can fail.
func TestMutationsAreCaught(t *testing.T) {
	for _, tc := range []struct {
		name, values, old, new, want string
	}{
		{"unknown field", "redis.yaml", "          imagePullPolicy: IfNotPresent\n",
			"          imagePullPolicy: IfNotPresent\n          imagePulPolicy: Always\n", `unknown field "imagePulPolicy"`},
		{"duplicate field", "redis.yaml", "          imagePullPolicy: IfNotPresent\n",
			"          imagePullPolicy: IfNotPresent\n          imagePullPolicy: Always\n", "already set in map"},
		{"wrong type", "redis.yaml", "replicas: 3", "replicas: three", "Deployment/tollgate: error unmarshaling JSON"},
		{"readiness probe port", "redis.yaml", "              port: http\n", "              port: 9090\n", "readinessProbe: port 9090 is not the server's HTTP port 8080"},
		{"liveness probe path", "redis.yaml", "path: /healthz", "path: /readyz", `livenessProbe: path "/readyz", want "/healthz"`},
		{"container port", "redis.yaml", "containerPort: 8080", "containerPort: 8090", "--addr's port 8080 is not a container port"},
		{"service target port", "redis.yaml", "targetPort: http", "targetPort: web", "target port web is not a port of Deployment/tollgate"},
		{"rls port", "dynamodb.yaml", "--grpc-addr=0.0.0.0:8081", "--grpc-addr=0.0.0.0:8082", "--grpc-addr's port 8082 is not a container port"},
		{"root user", "redis.yaml", "runAsUser: 65532\n            allowPrivilegeEscalation", "runAsUser: 0\n            allowPrivilegeEscalation", "runAsUser is not 65532"},
		{"root allowed", "redis.yaml", "runAsNonRoot: true\n            runAsUser", "runAsNonRoot: false\n            runAsUser", "runAsNonRoot is not true"},
		{"privilege escalation", "redis.yaml", "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true", "allowPrivilegeEscalation is not false"},
		{"embedded replicas 2", "embedded.yaml", "  replicas: 1\n", "  replicas: 2\n", "the embedded store with 2 replicas"},
		{"embedded volume", "embedded.yaml", "      name: data\n", "      name: state\n", "is not on a volumeClaimTemplate"},
		{"missing IRSA", "dynamodb.yaml", "eks.amazonaws.com/role-arn: arn:aws:iam::123456789012:role/tollgate-server",
			"example.com/role: tollgate-server", "ServiceAccount \"tollgate\" has no eks.amazonaws.com/role-arn annotation"},
		{"aggregator over redis", "redis.yaml", "            - reconcile\n", "            - aggregator\n", "the aggregator reads a DynamoDB stream"},
		{"keys mount", "redis.yaml", "mountPath: /etc/tollgate/keys", "mountPath: /etc/tollgate/key", "--keys /etc/tollgate/keys/keys: no volume is mounted"},
		{"keys secret key", "embedded.yaml", "  keys: ", "  key: ", `Secret "tollgate-keys" has no key "keys"`},
		{"rls config key", "dynamodb.yaml", "  rls.yaml: ", "  rules.yaml: ", `ConfigMap "tollgate-rls" has no key "rls.yaml"`},
		{"pdb blocks drains", "redis.yaml", "minAvailable: 2", "minAvailable: 3", "no pod could ever be evicted"},
		{"pdb selector", "redis.yaml", "  minAvailable: 2\n  selector:\n    matchLabels:\n", "  minAvailable: 2\n  selector:\n    matchLabels:\n      tier: none\n", "selector selects no workload's pods"},
		{"hpa target", "dynamodb.yaml", "    kind: Deployment\n    name: tollgate\n", "    kind: Deployment\n    name: tollgate-server\n", "scaleTargetRef Deployment/tollgate-server is not rendered"},
		{"hpa with replicas", "dynamodb.yaml", "spec:\n  strategy:", "spec:\n  replicas: 2\n  strategy:", "sets replicas, which every upgrade would reset"},
		{"service monitor port", "dynamodb.yaml", "    - port: http\n", "    - port: metrics\n", `endpoint port "metrics" is not a port of Service/tollgate`},
		{"service monitor path", "dynamodb.yaml", "      path: /metrics\n", "      path: /metric\n", `endpoint path "/metric"`},
		{"selector", "redis-minimal.yaml", "    matchLabels:\n      app.kubernetes.io/name: tollgate\n", "    matchLabels:\n      app.kubernetes.io/name: tollgate-x\n", "spec.selector does not select"},
		{"old api", "redis.yaml", "apiVersion: policy/v1\n", "apiVersion: policy/v1beta1\n", `apiVersion "policy/v1beta1" kind "PodDisruptionBudget" is not one the chart renders`},
		{"label value", "redis.yaml", `app.kubernetes.io/version: "latest"`, `app.kubernetes.io/version: "1.0 beta"`, "label app.kubernetes.io/version="},
		{"no store", "redis-minimal.yaml", "- name: TOLLGATE_STORE", "- name: TOLLGATE_STOR", "no store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := string(mustRender(t, tc.values))
			if !strings.Contains(out, tc.old) {
				t.Fatalf("the render of %s has no %q to mutate", tc.values, tc.old)
			}
			for _, err := range check.Check([]byte(strings.Replace(out, tc.old, tc.new, 1))) {
				if strings.Contains(err.Error(), tc.want) {
					return
				}
				t.Log(err)
			}
			t.Errorf("mutation not caught: want a problem containing %q", tc.want)
		})
	}
}

// TestBadValuesRefused checks that values the server or the store cannot
// run with fail the render, naming the value.
func TestBadValuesRefused(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		sets         []string
		want         string
	}{
		{"embedded with autoscaling", "embedded.yaml", []string{"server.autoscaling.enabled=true"}, "server.autoscaling.enabled"},
		{"dynamodb without a role", "dynamodb.yaml", []string{"store.dynamodb.roleArn="}, "store.dynamodb.roleArn"},
		{"redis without a url", "redis.yaml", []string{"store.redis.url="}, "store.redis.url"},
		{"no keys", "redis.yaml", []string{"keys.existingSecret="}, "keys: the server refuses to listen beyond loopback without keys"},
		{"two keys sources", "embedded.yaml", []string{"keys.existingSecret=mine"}, "keys.file and keys.existingSecret"},
		{"rls without config", "redis.yaml", []string{"server.rls.enabled=true"}, "server.rls.config"},
		{"unknown store", "redis.yaml", []string{"store.type=postgres"}, `store.type "postgres"`},
		{"kubernetes too old", "redis.yaml", []string{"--kube-version", "v1.22.0"}, "chart requires kubeVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			for i := 0; i < len(tc.sets); i++ {
				if tc.sets[i] == "--kube-version" {
					args = append(args, tc.sets[i], tc.sets[i+1])
					i++
					continue
				}
				args = append(args, "--set", tc.sets[i])
			}
			out, err := renderArgs(t, tc.values, args...)
			if err == nil {
				t.Fatalf("helm template succeeded; want a failure naming %q", tc.want)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("helm template failed with %s; want it to name %q", out, tc.want)
			}
		})
	}
}
