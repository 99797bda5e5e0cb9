package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// run runs the command in-process and returns its exit code and outputs.
func run(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// cli runs commands against one embedded store file.
type cli struct {
	t     *testing.T
	store string
}

func newCLI(t *testing.T) *cli {
	return &cli{t: t, store: "embedded:" + filepath.Join(t.TempDir(), "t.db")}
}

func (c *cli) want(code int, args ...string) string {
	c.t.Helper()
	got, out, errOut := run(c.t, "", append(args, "--store", c.store)...)
	if got != code {
		c.t.Fatalf("tollgate %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, code, out, errOut)
	}
	return out
}

func TestParseStoreURL(t *testing.T) {
	tests := []struct {
		in   string
		want storeSpec
		bad  bool
	}{
		{in: "memory:", want: storeSpec{kind: "memory"}},
		{in: "embedded:/var/lib/tollgate.db", want: storeSpec{kind: "embedded", path: "/var/lib/tollgate.db"}},
		{in: "dynamodb://tollgate?region=eu-west-1", want: storeSpec{kind: "dynamodb", table: "tollgate", region: "eu-west-1"}},
		{in: "dynamodb://t?endpoint=http://127.0.0.1:8000", want: storeSpec{kind: "dynamodb", table: "t", endpoint: "http://127.0.0.1:8000"}},
		{in: "embedded:", bad: true},
		{in: "dynamodb://", bad: true},
		{in: "dynamodb://t?regoin=x", bad: true},
		{in: "postgres://x", bad: true},
	}
	for _, tt := range tests {
		got, err := parseStoreURL(tt.in)
		if tt.bad {
			if err == nil || exitCode(err) != ExitUsage {
				t.Errorf("parseStoreURL(%q) = %+v, %v; want a usage error", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseStoreURL(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestWorkflow(t *testing.T) {
	c := newCLI(t)
	c.want(ExitOK, "entity", "create", "org-1", "--name", "Acme")
	c.want(ExitOK, "entity", "create", "key-1", "--parent", "org-1", "--cascade", "--meta", "owner=alice")
	c.want(ExitFailure, "entity", "create", "key-1")
	var kids api.EntitiesResponse
	decode(t, c.want(ExitOK, "entity", "children", "org-1", "-o", "json"), &kids)
	if len(kids.Entities) != 1 || kids.Entities[0].Metadata["owner"] != "alice" {
		t.Errorf("children %+v", kids)
	}
	c.want(ExitOK, "limits", "set", "--entity", "org-1", "--for-resource", "api", "rpm:2/hour")
	if out := c.want(ExitOK, "limits", "get", "--entity", "org-1", "--for-resource", "api"); !strings.Contains(out, "rpm:2/hour") {
		t.Errorf("limits get: %s", out)
	}
	c.want(ExitOK, "acquire", "-e", "org-1", "-r", "api", "-c", "rpm=1")
	c.want(ExitOK, "acquire", "-e", "org-1", "-r", "api", "-c", "rpm=1")
	if out := c.want(ExitRateLimited, "acquire", "-e", "org-1", "-r", "api", "-c", "rpm=1"); !strings.Contains(out, "true") {
		t.Errorf("rate-limited acquire should print the exceeded limit: %s", out)
	}
	var av api.AvailableResponse
	decode(t, c.want(ExitOK, "available", "-e", "org-1", "-r", "api", "-o", "json"), &av)
	if len(av.Limits) != 1 || av.Limits[0].Available != 0 || av.Limits[0].Capacity != 2 {
		t.Errorf("available %+v", av.Limits)
	}
	var audit api.AuditResponse
	decode(t, c.want(ExitOK, "audit", "list", "-e", "org-1", "-o", "json"), &audit)
	if len(audit.Events) != 2 || !strings.HasPrefix(audit.Events[0].Principal, "cli:") {
		t.Errorf("audit %+v", audit.Events)
	}
	c.want(ExitOK, "namespace", "register", "tenant-b")
	if out := c.want(ExitOK, "namespace", "list"); !strings.Contains(out, "tenant-b") {
		t.Errorf("namespace list: %s", out)
	}
	c.want(ExitFailure, "entity", "show", "org-1", "-n", "tenant-b")
	c.want(ExitOK, "limits", "delete", "--entity", "org-1", "--for-resource", "api")
	c.want(ExitFailure, "limits", "get", "--entity", "org-1", "--for-resource", "api")
}

func TestUsageErrors(t *testing.T) {
	c := newCLI(t)
	for _, args := range [][]string{
		{"entity", "create"},
		{"acquire", "-r", "api", "-c", "rpm=1"},
		{"acquire", "-e", "k", "-r", "api", "-c", "rpm=x"},
		{"limits", "set", "--system", "--resource", "api", "rpm:1/min"},
		{"limits", "get"},
		{"no-such-command"},
		{"entity", "show", "x", "--bogus"},
		{"available", "-e", "k", "-r", "api", "-o", "yaml"},
		{"limits", "set", "--system", "rpm:lots"},
	} {
		c.want(ExitUsage, args...)
	}
	if code, _, _ := run(t, "", "entity", "show", "x", "--store", "mysql://x"); code != ExitUsage {
		t.Errorf("bad --store: exit %d", code)
	}
}

func TestLimitsFile(t *testing.T) {
	c := newCLI(t)
	file := filepath.Join(t.TempDir(), "limits.yaml")
	write := func(text string) {
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`
system:
  limits: ["rpm:10000/min"]
  on_unavailable: allow
resources:
  openai/gpt-4o:
    limits: ["tpm:100000/min", "rpm:500/min"]
entities:
  org-1:
    limits: ["rpm:1000/min"]
    resources:
      api: ["rpm:100/min"]
`)
	var changes []change
	c.want(ExitFailure, "limits", "plan", "-f", file) // org-1 does not exist yet
	c.want(ExitOK, "entity", "create", "org-1")
	decode(t, c.want(ExitOK, "limits", "plan", "-f", file, "-o", "json"), &changes)
	if len(changes) != 4 || changes[0].Action != "create" {
		t.Fatalf("plan %+v", changes)
	}
	c.want(ExitFailure, "limits", "diff", "-f", file)
	c.want(ExitOK, "limits", "apply", "-f", file)
	c.want(ExitOK, "limits", "diff", "-f", file)
	if out := c.want(ExitOK, "limits", "get", "--resource", "openai/gpt-4o"); !strings.Contains(out, "tpm:100000/min rpm:500/min") {
		t.Errorf("applied resource limits: %s", out)
	}
	write(`
resources:
  openai/gpt-4o:
    limits: ["tpm:200000/min"]
entities:
  org-1:
    resources:
      api: []
`)
	decode(t, c.want(ExitOK, "limits", "plan", "-f", file, "-o", "json"), &changes)
	if len(changes) != 2 || changes[0].Action != "update" || changes[1].Action != "delete" {
		t.Fatalf("plan of the change %+v", changes)
	}
	c.want(ExitFailure, "limits", "diff", "-f", file)
	c.want(ExitOK, "limits", "apply", "-f", file)
	c.want(ExitOK, "limits", "diff", "-f", file)
	c.want(ExitFailure, "limits", "get", "--entity", "org-1", "--for-resource", "api")
	for _, bad := range []string{"system: {limits: [\"x\"]}", "resourcez: {}", "{}", "resources: {api: {limits: [\"rpm:1/min\"], on_unavailable: allow}}"} {
		write(bad)
		c.want(ExitUsage, "limits", "plan", "-f", file)
	}
}

func TestKeysNew(t *testing.T) {
	code, out, errOut := run(t, "", "keys", "new", "--name", "checkout", "--role", "acquire")
	if code != ExitOK || !strings.Contains(errOut, "tg_") {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	if _, err := server.LoadKeys(strings.NewReader(out)); err != nil {
		t.Fatalf("the printed line is not a keys file: %v\n%s", err, out)
	}
	key := strings.TrimSpace(errOut[strings.Index(errOut, "tg_"):])
	if want := server.HashKey(key) + " default acquire checkout\n"; out != want {
		t.Errorf("keys line %q, want %q", out, want)
	}
	if code, _, _ := run(t, "", "keys", "new", "--name", "x", "--role", "root"); code != ExitUsage {
		t.Errorf("bad role: exit %d", code)
	}
}

func decode(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%v in %s", err, s)
	}
}

// With --server the same commands go through the HTTP API.
func TestThroughServer(t *testing.T) {
	admin, hash := server.GenerateKey()
	keys, err := server.LoadKeys(strings.NewReader(hash + " * admin ops\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(memory.New(), server.WithKeys(keys), server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close(context.Background())
	via := func(code int, args ...string) string {
		t.Helper()
		got, out, errOut := run(t, "", append(args, "--server", ts.URL, "--api-key", admin)...)
		if got != code {
			t.Fatalf("tollgate %s: exit %d, want %d\n%s%s", strings.Join(args, " "), got, code, out, errOut)
		}
		return out
	}
	via(ExitOK, "entity", "create", "org-1")
	if out := via(ExitOK, "entity", "show", "org-1"); !strings.Contains(out, "org-1") {
		t.Errorf("entity show: %s", out)
	}
	via(ExitOK, "acquire", "-e", "org-1", "-r", "api", "-c", "rpm=1", "-l", "rpm:1/hour")
	via(ExitRateLimited, "acquire", "-e", "org-1", "-r", "api", "-c", "rpm=1", "-l", "rpm:1/hour")
	via(ExitOK, "limits", "set", "--resource", "openai/gpt-4o", "tpm:1000/min")
	if out := via(ExitOK, "limits", "get", "--resource", "openai/gpt-4o"); !strings.Contains(out, "tpm:1000/min") {
		t.Errorf("limits get: %s", out)
	}
	if out := via(ExitOK, "limits", "export"); !strings.Contains(out, "openai/gpt-4o") || !strings.Contains(out, "tpm:1000/min") {
		t.Errorf("limits export through a server printed %q, want the resource's limits", out)
	}
	via(ExitOK, "namespace", "register", "tenant-b")
	via(ExitOK, "namespace", "delete", "tenant-b")
	if out := via(ExitOK, "namespace", "purge", "tenant-b"); out != "" {
		t.Errorf("purge printed %q on stdout", out)
	}
	if code, _, _ := run(t, "", "entity", "show", "org-1", "--server", ts.URL); code != ExitFailure {
		t.Errorf("without the key: exit %d, want 1", code)
	}
}

// The limits refill slowly (a day's worth), so that the wall-clock time
// the commands take does not refill what they consumed before capacity
// reads it.
func TestUsageCommands(t *testing.T) {
	c := newCLI(t)
	for range 3 {
		c.want(ExitOK, "acquire", "-e", "key-1", "-r", "llm", "-c", "tpm=400", "-l", "tpm:100000/day")
	}
	c.want(ExitOK, "acquire", "-e", "key-2", "-r", "llm", "-c", "tpm=100", "-l", "tpm:100000/day")
	var u api.UsageResponse
	decode(t, c.want(ExitOK, "usage", "list", "-e", "key-1", "-o", "json"), &u)
	if len(u.Usage) != 1 || u.Usage[0].Consumed["tpm"] != 1200 || u.Usage[0].Events != 3 {
		t.Errorf("usage of key-1: %+v", u)
	}
	var sum api.UsageSummary
	decode(t, c.want(ExitOK, "usage", "summary", "-r", "llm", "-o", "json"), &sum)
	if sum.Events != 4 || sum.Limits["tpm"].Total != 1300 {
		t.Errorf("summary %+v", sum)
	}
	if out := c.want(ExitOK, "usage", "list", "-r", "llm", "--plot", "tpm"); !strings.Contains(out, "#") || !strings.Contains(out, " 1300") {
		t.Errorf("plot:\n%s", out)
	}
	var capacity api.Capacity
	decode(t, c.want(ExitOK, "capacity", "-r", "llm", "-o", "json"), &capacity)
	if capacity.Entities != 2 || len(capacity.Limits) != 1 || capacity.Limits[0].Capacity != 200_000 || capacity.Limits[0].Available < 200_000-1300 || capacity.Limits[0].Available >= 200_000 {
		t.Errorf("capacity %+v", capacity)
	}
	c.want(ExitUsage, "capacity")
	c.want(ExitUsage, "usage", "list")
	c.want(ExitUsage, "usage", "list", "-e", "k", "--window", "week")
}

// Every command a user can run documents itself with examples (issue 4:
// help text with examples on every command).
func TestEveryCommandHasExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			walk(sub)
		}
		// Every command: leaves, the groups above them (entity, limits,
		// ...) and the root.
		n++
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%q has no examples", c.CommandPath())
		}
		if strings.TrimSpace(c.Short) == "" {
			t.Errorf("%q has no short help", c.CommandPath())
		}
	}
	walk(newRoot(&globals{}))
	if n < 38 {
		t.Errorf("walked %d commands; the tree looks incomplete", n)
	}
	t.Logf("%d commands checked", n)
}
