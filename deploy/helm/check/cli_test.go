package check_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tollgate-rl/tollgate/deploy/helm/check"
)

// tollgateBin returns the tollgate binary scripts/test-helm.sh built
// (TOLLGATE_BIN); the tests skip without it, unless CI is set.
func tollgateBin(t *testing.T) string {
	t.Helper()
	b := os.Getenv("TOLLGATE_BIN")
	if b == "" {
		switch os.Getenv("CI") {
		case "", "0", "false", "False", "FALSE":
			t.Skip("TOLLGATE_BIN is not set: run scripts/test-helm.sh")
		}
		t.Fatal("TOLLGATE_BIN is not set (CI is set, so this fails): run scripts/test-helm.sh")
	}
	return b
}

// parses runs the container's command line with --help appended: the CLI
// parses every flag (names and values) before it prints the help, so a
// flag the command does not have, or a value of the wrong form, fails.
func parses(t *testing.T, bin string, c corev1.Container) error {
	t.Helper()
	args := append(append([]string(nil), c.Command...), c.Args...)
	if len(args) > 0 && args[0] == "/tollgate" {
		args = args[1:]
	}
	cmd := exec.Command(bin, append(args, "--help")...)
	cmd.Env = append(os.Environ(), "TOLLGATE_STORE=", "TOLLGATE_SERVER=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return &parseError{args: args, out: strings.TrimSpace(string(out)), err: err}
	}
	return nil
}

type parseError struct {
	args []string
	out  string
	err  error
}

func (e *parseError) Error() string {
	return "tollgate " + strings.Join(e.args, " ") + ": " + e.err.Error() + ": " + e.out
}

// containers are every container of the rendered workloads.
func containers(m *check.Manifest) []corev1.Container {
	var cs []corev1.Container
	for _, d := range m.Deployments {
		cs = append(cs, d.Spec.Template.Spec.Containers...)
	}
	for _, s := range m.StatefulSets {
		cs = append(cs, s.Spec.Template.Spec.Containers...)
	}
	return cs
}

// TestCommandLinesParse checks that the tollgate CLI accepts the command
// line of every container the chart renders, and refuses a misspelt flag.
func TestCommandLinesParse(t *testing.T) {
	bin := tollgateBin(t)
	for _, values := range []string{"embedded.yaml", "dynamodb.yaml", "redis.yaml", "redis-minimal.yaml"} {
		t.Run(values, func(t *testing.T) {
			m, errs := check.Decode(mustRender(t, values))
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			cs := containers(m)
			if len(cs) == 0 {
				t.Fatal("no containers")
			}
			for _, c := range cs {
				if err := parses(t, bin, c); err != nil {
					t.Error(err)
				}
			}
		})
	}
	t.Run("misspelt flag is refused", func(t *testing.T) {
		m, _ := check.Decode(mustRender(t, "redis.yaml"))
		c := m.Deployments[0].Spec.Template.Spec.Containers[0]
		c.Args = append(c.Args, "--reconcile-intervall=0")
		if err := parses(t, bin, c); err == nil || !strings.Contains(err.Error(), "unknown flag") {
			t.Errorf("got %v, want an unknown flag error", err)
		}
	})
}
