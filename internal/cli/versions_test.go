package cli

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// TestLimitsApplyRefusesConcurrentEdits: a level someone else changes (or
// creates) between plan and apply is refused, named in the error, and
// left as the other writer made it; what apply wrote before it stays.
func TestLimitsApplyRefusesConcurrentEdits(t *testing.T) {
	c := newCLI(t)
	c.want(ExitOK, "limits", "set", "--resource", "b", "rpm:1/min")
	desired, err := parseLimitsFile([]byte(`
resources:
  a: {limits: ["rpm:1/min"]}
  b: {limits: ["rpm:2/min"]}
  c: {limits: ["rpm:3/min"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	g := &globals{store: c.store, namespace: model.DefaultNamespace, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	ctx := context.Background()
	pl, err := g.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.close()
	for _, c := range []struct {
		name  string
		other func() error // someone else's change between plan and apply
		want  []string     // applied before the refusal
		fail  string
	}{
		{"update", func() error {
			return pl.adm.SetLimits(ctx, tollgate.ResourceScope("b"), tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 9)}})
		}, []string{"create resource a"}, "update resource b"},
		{"create", func() error {
			return pl.adm.SetLimits(ctx, tollgate.ResourceScope("c"), tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 9)}})
		}, []string{"update resource b"}, "create resource c"}, // b as planned again, over the other's rpm:9
	} {
		t.Run(c.name, func(t *testing.T) {
			changes, err := plan(ctx, pl, desired)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.other(); err != nil {
				t.Fatal(err)
			}
			err = g.apply(ctx, pl, changes)
			var ae *ApplyError
			if !errors.As(err, &ae) || !errors.Is(err, tollgate.ErrPreconditionFailed) {
				t.Fatalf("apply = %v, want an *ApplyError matching ErrPreconditionFailed", err)
			}
			if ae.Failed != c.fail || strings.Join(ae.Applied, ";") != strings.Join(c.want, ";") {
				t.Errorf("ApplyError applied %v, failed %q; want %v, %s", ae.Applied, ae.Failed, c.want, c.fail)
			}
			if msg := err.Error(); !strings.Contains(msg, "changed by someone else") || !strings.Contains(msg, "plan again") {
				t.Errorf("error %q does not say the level changed and how to go on", msg)
			}
			scope := tollgate.ResourceScope(strings.TrimPrefix(c.fail, c.name+" resource "))
			if got, err := pl.adm.GetLimits(ctx, scope); err != nil || got.Limits[0].String() != "rpm:9/min" {
				t.Errorf("%s after the refusal: %+v, %v; want the other writer's rpm:9", c.fail, got, err)
			}
		})
	}
}

// TestLimitsSavedPlan: plan --out saves the plan, apply --plan applies
// exactly it, on the versions planned: a level changed between the two
// commands is refused (exit 1, named), and a plan applied once is stale
// the second time. Through a server too (If-Match over HTTP).
func TestLimitsSavedPlan(t *testing.T) {
	srv, err := server.New(memory.New(), server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close(context.Background())
	for name, target := range map[string][]string{
		"store":  {"--store", "embedded:" + filepath.Join(t.TempDir(), "t.db")},
		"server": {"--server", ts.URL},
	} {
		t.Run(name, func(t *testing.T) {
			do := func(code int, args ...string) (string, string) {
				t.Helper()
				got, out, errOut := run(t, "", append(args, target...)...)
				if got != code {
					t.Fatalf("tollgate %s: exit %d, want %d\n%s%s", strings.Join(args, " "), got, code, out, errOut)
				}
				return out, errOut
			}
			do(ExitOK, "entity", "create", "org-1")
			do(ExitOK, "limits", "set", "--entity", "org-1", "--for-resource", "api", "rpm:1/min")
			file := writeFile(t, "limits.yaml", `
resources:
  search: {limits: ["rpm:5/min"]}
entities:
  org-1:
    resources:
      api: ["rpm:2/min"]
`)
			saved := filepath.Join(t.TempDir(), "limits.plan")
			do(ExitOK, "limits", "plan", "-f", file, "--out", saved)
			if data, err := os.ReadFile(saved); err != nil || !strings.Contains(string(data), `"version": 1`) {
				t.Fatalf("saved plan: %s, %v; want the version planned", data, err)
			}
			// Someone else changes the entity's level in between.
			do(ExitOK, "limits", "set", "--entity", "org-1", "--for-resource", "api", "rpm:7/min")
			_, errOut := do(ExitFailure, "limits", "apply", "--plan", saved)
			if !strings.Contains(errOut, "update entity org-1 resource api") || !strings.Contains(errOut, "changed by someone else") {
				t.Errorf("apply of a stale plan: stderr %q, want the level named", errOut)
			}
			if out, _ := do(ExitOK, "limits", "get", "--entity", "org-1", "--for-resource", "api"); !strings.Contains(out, "rpm:7/min") {
				t.Errorf("the other writer's change was overwritten:\n%s", out)
			}
			// Planned again, applied once; the same plan again is stale.
			do(ExitOK, "limits", "plan", "-f", file, "--out", saved)
			do(ExitOK, "limits", "apply", "--plan", saved)
			if out, _ := do(ExitOK, "limits", "get", "--entity", "org-1", "--for-resource", "api"); !strings.Contains(out, "rpm:2/min") {
				t.Errorf("after apply --plan:\n%s", out)
			}
			do(ExitFailure, "limits", "apply", "--plan", saved)
			do(ExitUsage, "limits", "apply", "--plan", saved, "-f", file)
			do(ExitUsage, "limits", "apply")
			do(ExitUsage, "limits", "apply", "--plan", file) // not a plan
		})
	}
}

// entity update writes on the version it read; --if-version also
// requires one.
func TestEntityUpdateIfVersion(t *testing.T) {
	c := newCLI(t)
	c.want(ExitOK, "entity", "create", "org-1")
	c.want(ExitOK, "entity", "update", "org-1", "--name", "one", "--if-version", "1")
	code, _, errOut := run(t, "", "entity", "update", "org-1", "--name", "two", "--if-version", "1", "--store", c.store)
	if code != ExitFailure || !strings.Contains(errOut, "expected version 1, it is at version 2") {
		t.Errorf("update on a stale version: exit %d, stderr %q", code, errOut)
	}
	var out struct{ Entities []struct{ Name string } }
	decode(t, c.want(ExitOK, "entity", "show", "org-1", "-o", "json"), &out)
	if len(out.Entities) != 1 || out.Entities[0].Name != "one" {
		t.Errorf("after the refused update: %+v, want name one", out)
	}
	c.want(ExitUsage, "entity", "update", "org-1", "--name", "x", "--if-version", "0")
}
