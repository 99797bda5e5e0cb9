package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
)

// The demo is deterministic (simulated time, seeded randomness); check that
// it tells the whole story: grants, denials whose retry-after is honoured,
// debt, and its repayment.
func TestDemoStory(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	lines := strings.Split(text, "\n")
	denied := regexp.MustCompile(`DENIED by (rpm|tpm) of (key-\w+|org-acme): -?\d+ available, retry after \S+$`)
	var grants, denials, debts int
	for i, line := range lines {
		switch {
		case denied.MatchString(line):
			denials++
			// The retry after exactly the reported wait is granted.
			if i+1 >= len(lines) || !strings.Contains(lines[i+1], "granted") {
				t.Errorf("denial not followed by a grant:\n%s\n%s", line, lines[i+1])
			}
		case strings.Contains(line, "granted"):
			grants++
			if strings.Contains(line, "in debt") {
				debts++
			}
		}
	}
	if grants < 20 || denials == 0 || debts == 0 {
		t.Errorf("grants %d, denials %d, debts %d: want >= 20, > 0, > 0\n%s", grants, denials, debts, text)
	}
	for _, key := range []string{"key-alice", "key-bob", "key-carol"} {
		if !regexp.MustCompile(key + `\s+tpm available: 4000`).MatchString(text) {
			t.Errorf("%s not back to its full 4000 tpm after idling:\n%s", key, text)
		}
	}
}
