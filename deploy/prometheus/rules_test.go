// Package prometheus_test checks the Prometheus alerting rules of
// tollgate-rules.yml against what a real tollgate server exports.
package prometheus_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"gopkg.in/yaml.v3"

	"github.com/tollgate-rl/tollgate/internal/promcheck"
)

const rulesFile = "tollgate-rules.yml"

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadRules(t *testing.T, text string) []rule {
	t.Helper()
	var f ruleFile
	dec := yaml.NewDecoder(strings.NewReader(text))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

var anchorRe = regexp.MustCompile(`^docs/operations\.md#([a-z0-9-]+)$`)

// checkRule returns what is wrong with r against the exported families
// and the runbook anchors of docs/operations.md.
func checkRule(r rule, fams map[string]*dto.MetricFamily, anchors map[string]bool) []string {
	var bad []string
	if r.Alert == "" || r.Expr == "" {
		bad = append(bad, "an alert needs a name and an expression")
	}
	if _, err := time.ParseDuration(r.For); err != nil {
		bad = append(bad, "for: "+r.For+" is not a duration")
	}
	if s := r.Labels["severity"]; s != "page" && s != "ticket" {
		bad = append(bad, "severity "+s+", want page or ticket")
	}
	if r.Annotations["summary"] == "" {
		bad = append(bad, "no summary")
	}
	if m := anchorRe.FindStringSubmatch(r.Annotations["runbook"]); m == nil || !anchors[m[1]] {
		bad = append(bad, "runbook "+r.Annotations["runbook"]+" is not a heading of docs/operations.md")
	}
	bad = append(bad, promcheck.CheckExpr(r.Expr, fams)...)
	return bad
}

// anchors returns the GitHub anchors of docs/operations.md's headings.
func anchors(t *testing.T) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 -]`)
	for _, line := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			h = strings.ToLower(strings.TrimSpace(strings.TrimLeft(h, "#")))
			out[strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-")] = true
		}
	}
	return out
}

func TestRulesMatchTheServersMetrics(t *testing.T) {
	text, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	rules := loadRules(t, string(text))
	if len(rules) < 5 {
		t.Fatalf("%d rules, want the set docs/operations.md describes", len(rules))
	}
	fams, heads := promcheck.Exported(t), anchors(t)
	for _, r := range rules {
		for _, problem := range checkRule(r, fams, heads) {
			t.Errorf("%s: %s", r.Alert, problem)
		}
	}
}

// The check catches what it is for: each broken copy of a good rule is
// refused for its own reason.
func TestRuleCheckCatchesMistakes(t *testing.T) {
	fams, heads := promcheck.Exported(t), anchors(t)
	good := rule{Alert: "TollgateDegradedGrants", For: "5m", Labels: map[string]string{"severity": "ticket"},
		Expr:        `sum(rate(tollgate_acquires_total{job="tollgate", outcome="degraded"}[5m])) > 0`,
		Annotations: map[string]string{"summary": "s", "runbook": "docs/operations.md#tollgatedegradedgrants"}}
	if bad := checkRule(good, fams, heads); len(bad) != 0 {
		t.Fatalf("the good rule is refused: %v", bad)
	}
	cases := map[string]func(r *rule){
		"unknown metric":      func(r *rule) { r.Expr = strings.Replace(r.Expr, "acquires_total", "acquire_total", 1) },
		"unknown label value": func(r *rule) { r.Expr = strings.Replace(r.Expr, "degraded", "degradd", 1) },
		"unknown label":       func(r *rule) { r.Expr = strings.Replace(r.Expr, "outcome=", "result=", 1) },
		"missing runbook": func(r *rule) {
			r.Annotations = map[string]string{"summary": "s", "runbook": "docs/operations.md#nowhere"}
		},
		"bad severity": func(r *rule) { r.Labels = map[string]string{"severity": "critical"} },
		"bad for":      func(r *rule) { r.For = "five minutes" },
	}
	for name, mutate := range cases {
		r := good
		mutate(&r)
		if bad := checkRule(r, fams, heads); len(bad) == 0 {
			t.Errorf("%s: not caught", name)
		}
	}
}

// promtool, when installed, checks the file's syntax and PromQL as
// Prometheus will.
func TestRulesWithPromtool(t *testing.T) {
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian: apt-get install prometheus); the PromQL is checked only against the server's metrics")
	}
	out, err := exec.Command(path, "check", "rules", rulesFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}
