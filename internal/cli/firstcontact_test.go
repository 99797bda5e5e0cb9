package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "90m", want: 90 * time.Minute},
		{in: "7d", want: 7 * 24 * time.Hour},
		{in: "1d12h", want: 36 * time.Hour},
		{in: "90d", want: 90 * 24 * time.Hour},
		{in: "0d", want: 0},
		{in: "d", bad: true},
		{in: "-1d", bad: true},
		{in: "1d-1h", bad: true},
		{in: "1.5d", bad: true},
		{in: "1dx", bad: true},
		{in: "200000d", bad: true},
		{in: "106751d24h", bad: true}, // past what a time.Duration holds
	}
	for _, c := range cases {
		got, err := parseDuration(c.in)
		if c.bad != (err != nil) || !c.bad && got != c.want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v (bad %v)", c.in, got, err, c.want, c.bad)
		}
	}
	for _, d := range []time.Duration{0, time.Hour, 7 * 24 * time.Hour, 36*time.Hour + 30*time.Minute} {
		if got, err := parseDuration(formatDuration(d)); err != nil || got != d {
			t.Errorf("parseDuration(formatDuration(%v) = %q) = %v, %v", d, formatDuration(d), got, err)
		}
	}
}

// A newcomer's first commands: a mistyped subcommand fails, --version and
// version answer, a window in days is taken.
func TestFirstContact(t *testing.T) {
	if code, _, errOut := run(t, "", "limits", "exprot"); code != 2 || !strings.Contains(errOut, `unknown command "exprot" for "tollgate limits"`) {
		t.Errorf("tollgate limits exprot: exit %d, stderr %q; want 2 and unknown command", code, errOut)
	}
	if code, out, _ := run(t, "", "limits"); code != 0 || !strings.Contains(out, "Available Commands") {
		t.Errorf("tollgate limits: exit %d; want its help and 0", code)
	}
	if code, out, _ := run(t, "", "--version"); code != 0 || !strings.HasPrefix(out, "tollgate ") {
		t.Errorf("tollgate --version: exit %d, %q", code, out)
	}
	code, out, _ := run(t, "", "version", "-o", "json")
	var b buildInfo
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil || !strings.HasPrefix(b.Go, "go") {
		t.Errorf("tollgate version -o json: exit %d, %q", code, out)
	}
	c := newCLI(t)
	c.want(0, "usage", "list", "-e", "key-1", "--since", "7d")
	c.want(2, "usage", "list", "-e", "key-1", "--since", "7days")
}

// What a resource's totals sum is said with them.
func TestUsageHints(t *testing.T) {
	c := newCLI(t)
	code, _, stderr := run(t, "", "usage", "summary", "-r", "api", "--store", c.store)
	if code != 0 || !strings.Contains(stderr, "counts once at each level") {
		t.Errorf("usage summary -r: exit %d, stderr %q; want the note on cascades", code, stderr)
	}
	if code, _, stderr := run(t, "", "usage", "list", "-e", "key-1", "--store", c.store); code != 0 || strings.Contains(stderr, "aggregator") {
		t.Errorf("usage list on the embedded store: exit %d, stderr %q; want 0 and no word of an aggregator (tollgate serve records usage there)", code, stderr)
	}
}
