package cli

import (
	"strings"
	"testing"
)

// Every flag that takes a list takes it repeated, comma-separated, or
// both, as the HTTP API's list parameters do.
func TestCommaLists(t *testing.T) {
	other := strings.Replace(testTableARN, "table/tollgate", "table/other", 1)
	for _, c := range []struct {
		name string
		args []string
		want []string // in stdout
	}{
		{"acquire -l and -c comma-separated", []string{"acquire", "-e", "k", "-r", "api", "-l", "rpm:5/min,tpm:100/min", "-c", "rpm=1,tpm=10", "-o", "json"},
			[]string{`"limit": "rpm"`, `"limit": "tpm"`, `"requested": 10`}},
		{"acquire -l repeated", []string{"acquire", "-e", "k", "-r", "api", "-l", "rpm:5/min", "-l", "tpm:100/min", "-c", "rpm=1", "-c", "tpm=10", "-o", "json"},
			[]string{`"limit": "rpm"`, `"limit": "tpm"`, `"requested": 10`}},
		{"available -l comma-separated", []string{"available", "-e", "k", "-r", "api", "-l", "rpm:5/min,inflight:2/concurrent", "-o", "json"},
			[]string{`"limit": "rpm"`, `"limit": "inflight"`}},
		{"iam --table comma-separated", []string{"iam", "policy", "--persona", "acquire", "--table", testTableARN + "," + other},
			[]string{"table/tollgate", "table/other"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if args[0] != "iam" {
				args = append(args, "--store", "memory:")
			}
			code, out, errOut := run(t, "", args...)
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
