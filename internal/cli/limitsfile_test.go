package cli

import (
	"strings"
	"testing"
)

// A limits file's mistakes name the file, the line, the level and the
// field in the file's words, not the CLI's Go types.
func TestLimitsFileErrors(t *testing.T) {
	for _, c := range []struct {
		name, yaml, want string
	}{
		{"unknown field of a resource", "system:\n  limits: [\"rpm:100\"]\nresources:\n  api:\n    limit: [\"rpm:10\"]\n",
			`:5: field "limit" not found in resources.api: want limits, shadow, alert_at and on_unavailable (system only)`},
		{"unknown top-level field", "sytem:\n  limits: [\"rpm:10\"]\n",
			`:1: field "sytem" not found in the top level: want system, resources and entities`},
		{"unknown field of an entity", "entities:\n  org-1:\n    limitz: [\"rpm:5\"]\n",
			`:3: field "limitz" not found in entities.org-1: want limits and resources`},
		{"unknown field of an entity's level", "entities:\n  org-1:\n    limits:\n      limits: [\"rpm:5\"]\n      shadw: [rpm]\n",
			`:5: field "shadw" not found in entities.org-1.limits: want limits, shadow and alert_at`},
		{"a bad limit", "resources:\n  api:\n    limits: [\"rpm:10\", \"tpm:abc\"]\n",
			`:3: resources.api: invalid limit "tpm:abc"`},
		{"a bad limit of an entity's resource", "entities:\n  org-1:\n    limits: [\"rpm:5\"]\n    resources:\n      llm:\n        limits: [\"d:3/day@Mars/Base\"]\n",
			`:6: entities.org-1.resources.llm: invalid`},
		{"a wrong type", "resources:\n  api:\n    limits: 5\n",
			":3: resources.api.limits: cannot unmarshal"},
		{"on_unavailable of a resource", "resources:\n  api:\n    limits: [\"rpm:1\"]\n    on_unavailable: allow\n",
			":4: resources.api.on_unavailable: meaningful at system level only"},
		{"a syntax error", "resources:\n  api:\n    limits: [\"rpm:10\"\n  bad\n",
			":2: did not find expected ',' or ']'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := writeFile(t, "limits.yaml", c.yaml)
			code, _, errOut := run(t, "", "limits", "plan", "-f", file, "--store", "memory:")
			if code != ExitUsage || !strings.Contains(errOut, file+c.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, ExitUsage, file+c.want)
			}
			if strings.Contains(errOut, "cli.") {
				t.Errorf("stderr %q names the CLI's Go types", errOut)
			}
		})
	}
	// Standard input is named as such.
	code, _, errOut := run(t, "sytem: {}\n", "limits", "plan", "-f", "-", "--store", "memory:")
	if code != ExitUsage || !strings.Contains(errOut, `<stdin>:1: field "sytem" not found`) {
		t.Errorf("from stdin: exit %d, stderr %q", code, errOut)
	}
}
