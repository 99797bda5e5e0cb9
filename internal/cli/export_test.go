package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
)

// writeFile writes text to a new file under t's temporary directory.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLimitsExportRoundTrip: what export writes, plan reads as no change,
// at every level.
func TestLimitsExportRoundTrip(t *testing.T) {
	c := newCLI(t)
	c.want(ExitOK, "entity", "create", "org-1")
	c.want(ExitOK, "entity", "create", "key:a@b.c")
	for _, args := range [][]string{
		{"--system", "rpm:10000/min", "--on-unavailable", "allow"},
		{"--resource", "openai/gpt-4o", "tpm:100000/min:150000", "rpm:500/min"},
		{"--resource", "emr", "clusters:3/reserved", "inflight:10/concurrent"},
		{"--entity", "org-1", "rpm:1000/min", "rpd:5/day"},
		{"--entity", "org-1", "--for-resource", "openai/gpt-4o", "tpm:5000/min"},
		{"--entity", "key:a@b.c", "--for-resource", "api", "rps:7/sec:20"},
	} {
		c.want(ExitOK, append([]string{"limits", "set"}, args...)...)
	}
	exported := c.want(ExitOK, "limits", "export")
	for _, want := range []string{"system:", "on_unavailable: allow", "openai/gpt-4o:", `"tpm:100000/min:150000"`, "org-1:", "key:a@b.c"} {
		if !strings.Contains(exported, want) {
			t.Errorf("export lacks %q:\n%s", want, exported)
		}
	}
	file := writeFile(t, "limits.yaml", exported)
	var changes []change
	decode(t, c.want(ExitOK, "limits", "plan", "-f", file, "-o", "json"), &changes)
	if len(changes) != 6 || countChanges(changes) != 0 {
		t.Errorf("plan of the export: %+v, want 6 levels unchanged\n%s", changes, exported)
	}
	c.want(ExitOK, "limits", "diff", "-f", file)
	// In another namespace the file is refused: its entities do not
	// exist there.
	c.want(ExitOK, "namespace", "register", "other")
	if code, _, errOut := run(t, "", "limits", "plan", "-f", file, "--store", c.store, "-n", "other"); code != ExitFailure ||
		!strings.Contains(errOut, "key:a@b.c, org-1") {
		t.Errorf("plan in another namespace: exit %d, stderr %q", code, errOut)
	}
}

func TestExportOf(t *testing.T) {
	rpm := tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 5)}}
	cfgs := []tollgate.ScopedConfig{
		{Scope: tollgate.SystemScope(), Config: tollgate.Config{OnUnavailable: tollgate.Allow}},
		{Scope: tollgate.ResourceScope("api"), Config: rpm},
		{Scope: tollgate.ResourceScope("empty"), Config: tollgate.Config{}},
		{Scope: tollgate.EntityScope("org", ""), Config: rpm},
		{Scope: tollgate.EntityScope("org", "api"), Config: rpm},
	}
	f, skipped := exportOf(cfgs)
	if !slices.Equal(skipped, []tollgate.Scope{tollgate.SystemScope(), tollgate.ResourceScope("empty")}) {
		t.Errorf("skipped %v, want the system and the empty resource levels", skipped)
	}
	var buf bytes.Buffer
	if err := writeExport(&buf, f); err != nil {
		t.Fatal(err)
	}
	want := `resources:
  api:
    limits: ["rpm:5/min"]
entities:
  org:
    limits: ["rpm:5/min"]
    resources:
      api: ["rpm:5/min"]
`
	if buf.String() != want {
		t.Errorf("export:\n%s\nwant:\n%s", buf.String(), want)
	}
	ds, err := parseLimitsFile(buf.Bytes())
	if err != nil || len(ds) != 3 {
		t.Errorf("the export parses as %d levels, %v; want 3", len(ds), err)
	}
}

// TestLimitsPlanRefusesMissingEntities: plan, diff and apply fail before
// writing anything when the file sets limits of entities that do not
// exist, and name them all.
func TestLimitsPlanRefusesMissingEntities(t *testing.T) {
	c := newCLI(t)
	c.want(ExitOK, "entity", "create", "org-1")
	file := writeFile(t, "limits.yaml", `
resources:
  api: {limits: ["rpm:100/min"]}
entities:
  org-1: {limits: ["rpm:10/min"]}
  org-2: {limits: ["rpm:10/min"]}
  org-3: {resources: {api: ["rpm:1/min"]}}
  org-4: {resources: {api: []}}   # a deletion needs no entity
`)
	for _, verb := range []string{"plan", "diff", "apply"} {
		code, _, errOut := run(t, "", "limits", verb, "-f", file, "--store", c.store)
		if code != ExitFailure || !strings.Contains(errOut, "2 entities that do not exist: org-2, org-3") ||
			strings.Contains(errOut, "org-4") {
			t.Errorf("limits %s: exit %d, stderr %q; want 1 naming org-2 and org-3", verb, code, errOut)
		}
	}
	c.want(ExitFailure, "limits", "get", "--resource", "api") // nothing was written
}

// failingAdmin fails the nth write (SetLimits or DeleteLimits) once.
type failingAdmin struct {
	model.Administrator
	n, writes int
}

var errInjected = errors.New("injected failure")

func (f *failingAdmin) write() error {
	f.writes++
	if f.writes == f.n {
		return errInjected
	}
	return nil
}

func (f *failingAdmin) SetLimits(ctx context.Context, scope tollgate.Scope, cfg tollgate.Config, opts ...tollgate.WriteOption) error {
	if err := f.write(); err != nil {
		return err
	}
	return f.Administrator.SetLimits(ctx, scope, cfg, opts...)
}

func (f *failingAdmin) DeleteLimits(ctx context.Context, scope tollgate.Scope, opts ...tollgate.WriteOption) error {
	if err := f.write(); err != nil {
		return err
	}
	return f.Administrator.DeleteLimits(ctx, scope, opts...)
}

// TestLimitsApplyResumes: a write failing midway is reported with what
// was applied, and apply run again finishes the rest.
func TestLimitsApplyResumes(t *testing.T) {
	c := newCLI(t)
	c.want(ExitOK, "limits", "set", "--resource", "old", "rpm:1/min")
	desired, err := parseLimitsFile([]byte(`
resources:
  a: {limits: ["rpm:1/min"]}
  b: {limits: ["rpm:2/min"]}
  c: {limits: ["rpm:3/min"]}
  old: {limits: []}
`))
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	g := &globals{store: c.store, namespace: model.DefaultNamespace, stdout: &bytes.Buffer{}, stderr: &errOut}
	ctx := context.Background()
	pl, err := g.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.close()

	changes, err := plan(ctx, pl, desired)
	if err != nil || countChanges(changes) != 4 {
		t.Fatalf("plan: %d changes, %v", countChanges(changes), err)
	}
	failing := *pl
	failing.adm = &failingAdmin{Administrator: pl.adm, n: 3}
	err = g.apply(ctx, &failing, changes)
	var ae *ApplyError
	if !errors.As(err, &ae) || !errors.Is(err, errInjected) {
		t.Fatalf("apply = %v, want an *ApplyError of the injected failure", err)
	}
	if want := []string{"create resource a", "create resource b"}; !slices.Equal(ae.Applied, want) || ae.Failed != "create resource c" {
		t.Errorf("ApplyError applied %v, failed %q; want %v and create resource c", ae.Applied, ae.Failed, want)
	}
	if !strings.Contains(err.Error(), "run apply again to resume") {
		t.Errorf("error %q does not say how to resume", err)
	}
	changes, err = plan(ctx, pl, desired)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, ch := range changes {
		if ch.Action != "unchanged" {
			left = append(left, ch.Action+" "+ch.Scope)
		}
	}
	if want := []string{"create resource c", "delete resource old"}; !slices.Equal(left, want) {
		t.Errorf("plan after the failure = %v, want %v", left, want)
	}
	if err := g.apply(ctx, pl, changes); err != nil {
		t.Fatal(err)
	}
	if changes, _ = plan(ctx, pl, desired); countChanges(changes) != 0 {
		t.Errorf("plan after resuming: %+v, want no change", changes)
	}
}

// Shadow limits at every level: set with --shadow, shown by get, written
// by export (an entity's level as a mapping), read back by plan as no
// change; a file that shadows a limit it does not have is refused, and
// one that drops a shadow is a change.
func TestLimitsShadow(t *testing.T) {
	c := newCLI(t)
	c.want(ExitOK, "entity", "create", "org-1")
	for _, args := range [][]string{
		{"--system", "rpm:10000/min", "--shadow", "rpm"},
		{"--resource", "api", "tpm:100000/min", "rpm:500/min", "--shadow", "tpm"},
		{"--entity", "org-1", "rpm:1000/min", "rpd:5/day", "--shadow", "rpd,rpm"},
		{"--entity", "org-1", "--for-resource", "api", "tpm:5000/min"},
	} {
		c.want(ExitOK, append([]string{"limits", "set"}, args...)...)
	}
	if out := c.want(ExitOK, "limits", "get", "--resource", "api"); !strings.Contains(out, "SHADOW") || !strings.Contains(out, " tpm ") {
		t.Errorf("get shows no shadow:\n%s", out)
	}
	exported := c.want(ExitOK, "limits", "export")
	for _, want := range []string{`shadow: ["tpm"]`, `shadow: ["rpd", "rpm"]`, `limits: ["rpm:1000/min", "rpd:5/day"]`} {
		if !strings.Contains(exported, want) {
			t.Errorf("export lacks %q:\n%s", want, exported)
		}
	}
	var changes []change
	decode(t, c.want(ExitOK, "limits", "plan", "-f", writeFile(t, "limits.yaml", exported), "-o", "json"), &changes)
	if len(changes) != 4 || countChanges(changes) != 0 {
		t.Errorf("plan of the export: %+v, want 4 levels unchanged\n%s", changes, exported)
	}
	dropped := strings.Replace(exported, `shadow: ["tpm"]`, ``, 1)
	decode(t, c.want(ExitOK, "limits", "plan", "-f", writeFile(t, "dropped.yaml", dropped), "-o", "json"), &changes)
	if countChanges(changes) != 1 {
		t.Errorf("plan without the resource's shadow: %+v, want one change", changes)
	}
	bad := "resources:\n  api:\n    limits: [\"rpm:5/min\"]\n    shadow: [\"tpm\"]\n"
	if code, _, errOut := run(t, "", "limits", "plan", "-f", writeFile(t, "bad.yaml", bad), "--store", c.store); code != ExitUsage ||
		!strings.Contains(errOut, "shadow") {
		t.Errorf("a shadow naming no limit: exit %d, stderr %q", code, errOut)
	}
	if code, _, _ := run(t, "", "limits", "set", "--resource", "x", "rpm:5/min", "--shadow", "tpm", "--store", c.store); code != ExitUsage {
		t.Errorf("set --shadow naming no limit: exit %d, want usage", code)
	}
}
