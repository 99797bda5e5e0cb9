package cli

import (
	"strings"
	"testing"
)

// Alert thresholds at every level: set with --alert-at, shown by get,
// written by export (an entity's level as a mapping), read back by plan
// as no change; a file that changes them is a change, and bad thresholds
// are refused by set and by plan.
func TestLimitsAlertAt(t *testing.T) {
	c := newCLI(t)
	c.want(ExitOK, "entity", "create", "org-1")
	for _, args := range [][]string{
		{"--system", "rpm:10000/min", "--alert-at", "1"},
		{"--resource", "api", "tpm:100000/min", "rpm:500/min", "--alert-at", "0.8,1.0", "--shadow", "tpm"},
		{"--entity", "org-1", "rpm:1000/min", "--alert-at", "0.5", "--alert-at", "0.9"},
		{"--entity", "org-1", "--for-resource", "api", "tpm:5000/min"},
	} {
		c.want(ExitOK, append([]string{"limits", "set"}, args...)...)
	}
	if out := c.want(ExitOK, "limits", "get", "--resource", "api"); !strings.Contains(out, "ALERT AT") || !strings.Contains(out, " 0.8 1 ") {
		t.Errorf("get shows no alert thresholds:\n%s", out)
	}
	exported := c.want(ExitOK, "limits", "export")
	for _, want := range []string{"alert_at: [0.8, 1]", "alert_at: [0.5, 0.9]", "alert_at: [1]"} {
		if !strings.Contains(exported, want) {
			t.Errorf("export lacks %q:\n%s", want, exported)
		}
	}
	var changes []change
	decode(t, c.want(ExitOK, "limits", "plan", "-f", writeFile(t, "limits.yaml", exported), "-o", "json"), &changes)
	if len(changes) != 4 || countChanges(changes) != 0 {
		t.Errorf("plan of the export: %+v, want 4 levels unchanged\n%s", changes, exported)
	}
	moved := strings.Replace(exported, "alert_at: [0.8, 1]", "alert_at: [0.9]", 1)
	decode(t, c.want(ExitOK, "limits", "plan", "-f", writeFile(t, "moved.yaml", moved), "-o", "json"), &changes)
	if countChanges(changes) != 1 {
		t.Errorf("plan with the resource's thresholds changed: %+v, want one change", changes)
	}
	bad := "resources:\n  api:\n    limits: [\"rpm:5/min\"]\n    alert_at: [1.5]\n"
	if code, _, errOut := run(t, "", "limits", "plan", "-f", writeFile(t, "bad.yaml", bad), "--store", c.store); code != ExitUsage ||
		!strings.Contains(errOut, "alert_at") {
		t.Errorf("a threshold above 1: exit %d, stderr %q", code, errOut)
	}
	if code, _, _ := run(t, "", "limits", "set", "--resource", "x", "rpm:5/min", "--alert-at", "0.9,0.8", "--store", c.store); code != ExitUsage {
		t.Errorf("set --alert-at descending: exit %d, want usage", code)
	}
}
