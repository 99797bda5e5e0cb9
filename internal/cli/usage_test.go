package cli

import (
	"strings"
	"testing"
)

// TestUsagePlot checks the ASCII chart of one limit over time: after the
// summary with usage summary --plot, alone with usage list --plot, in
// plain ASCII so that any terminal and log shows it.
func TestUsagePlot(t *testing.T) {
	c := newCLI(t)
	c.want(ExitOK, "acquire", "-e", "key-1", "-r", "llm", "-c", "tpm=400", "-l", "tpm:100000/min")
	c.want(ExitOK, "acquire", "-e", "key-2", "-r", "llm", "-c", "tpm=100", "-l", "tpm:100000/min")
	for _, args := range [][]string{
		{"usage", "list", "-r", "llm", "--plot", "tpm"},
		{"usage", "summary", "-r", "llm", "--plot", "tpm"},
	} {
		out := c.want(ExitOK, args...)
		i := strings.Index(out, "tpm per hour")
		if i < 0 || !strings.Contains(out[i:], "|"+strings.Repeat("#", 50)+" 500") {
			t.Errorf("%s: no full bar for the only window's 500 tokens:\n%s", strings.Join(args, " "), out)
		}
		for _, r := range out {
			if r > 127 {
				t.Errorf("%s: non-ASCII %q in the output:\n%s", strings.Join(args, " "), r, out)
				break
			}
		}
		if isSummary := args[1] == "summary"; isSummary != strings.Contains(out, "PEAK") {
			t.Errorf("%s: summary table present = %v:\n%s", strings.Join(args, " "), !isSummary, out)
		}
	}
}
