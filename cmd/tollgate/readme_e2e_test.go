package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeBlock returns the first ```sh block after heading in README.md.
func readmeBlock(t *testing.T, heading string) string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i := strings.Index(text, heading)
	if i < 0 {
		t.Fatalf("README.md has no %q", heading)
	}
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(text[i:])
	if m == nil {
		t.Fatalf("README.md has no sh block after %q", heading)
	}
	return m[1]
}

// The README's CLI tour runs as written, command after command, in an empty
// directory (so it cannot rot again): every command succeeds, the acquire is
// granted and debits the key and its organisation.
func TestReadmeCLITour(t *testing.T) {
	script := readmeBlock(t, "### The CLI")
	bin := tollgateBinary(t)
	dir := t.TempDir()
	cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TOLLGATE_") && !strings.HasPrefix(kv, "PATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the tour failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	if strings.Contains(out, "rate limited") || strings.Contains(stderr.String(), "tollgate:") {
		t.Errorf("the tour reported an error:\n%s\n%s", out, stderr.String())
	}
	for _, want := range []string{
		`key-1\s+api\s+rpm\s+rate\s+resource\s+99\s+100\s+1\s+false`,    // the acquire, for the key
		`org-acme\s+api\s+rpm\s+rate\s+entity\s+999\s+1000\s+1\s+false`, // and its organisation
		`resource llm\s+rpm:60/min tok:1000000/month@UTC`,               // a calendar quota, stored as written
		`update\s+resource api`,                                         // plan and apply
		`tenant-b`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("the tour's output lacks %s:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "tollgate.db")); err != nil {
		t.Errorf("the tour did not use the default store: %v", err)
	}
}
