// Package prometheus_test checks the Prometheus alerting rules of
// tollgate-rules.yml against what a real tollgate server exports.
package prometheus_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
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

// downStore is a store whose buckets do not answer.
type downStore struct{ store.Store }

func (downStore) Consume(context.Context, string, *store.ConsumeRequest) (bool, error) {
	return false, errors.New("connection refused")
}

// series scrapes a server after requests that produce every acquire
// outcome the rules name, and returns its metric families.
func series(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	srv, err := server.New(downStore{memory.New()}, server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); _ = srv.Close(context.Background()) })
	limits := `"limits":["rpm:1/min"]`
	for _, body := range []string{
		`{"entity":"k","resource":"api","consume":{"rpm":1},` + limits + `}`,                          // unavailable
		`{"entity":"k","resource":"api","consume":{"rpm":1},"on_unavailable":"allow",` + limits + `}`, // degraded
		`{"entity":"k","resource":"api","consume":{"rpm":5},` + limits + `}`,                          // invalid
		`{"entity":"k k"}`, // invalid
	} {
		resp, err := http.Post(ts.URL+"/v1/acquire", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// A grant and a refusal, from a server whose store answers.
	ok, err := server.New(memory.New(), server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ok.Close(context.Background()) })
	for range 2 {
		req := httptest.NewRequest("POST", "/v1/acquire", strings.NewReader(`{"entity":"k","resource":"api","consume":{"rpm":1},"commit":true,`+limits+`}`))
		ok.ServeHTTP(httptest.NewRecorder(), req)
	}
	fams := scrape(t, ts.URL+"/metrics")
	rec := httptest.NewRecorder()
	ok.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for name, f := range parse(t, rec.Body.String()) {
		if have, found := fams[name]; found {
			have.Metric = append(have.Metric, f.Metric...)
		} else {
			fams[name] = f
		}
	}
	return fams
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, string(body))
}

func parse(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

var (
	selectorRe = regexp.MustCompile(`\b(tollgate_[a-z_]+)(\{[^}]*\})?`)
	matcherRe  = regexp.MustCompile(`(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	anchorRe   = regexp.MustCompile(`^docs/operations\.md#([a-z0-9-]+)$`)
)

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
	for _, sel := range selectorRe.FindAllStringSubmatch(r.Expr, -1) {
		name, matchers := sel[1], sel[2]
		fam := family(fams, name)
		if fam == nil {
			bad = append(bad, name+" is not exported by the server")
			continue
		}
		for _, m := range matcherRe.FindAllStringSubmatch(matchers, -1) {
			label, op, value := m[1], m[2], m[3]
			if label == "job" || label == "instance" || op[0] == '!' {
				continue // set by Prometheus; negations need no series
			}
			if !anySeries(fam, name, label, op, value) {
				bad = append(bad, name+": no series has "+label+op+`"`+value+`"`)
			}
		}
	}
	return bad
}

// family returns the family that exports name: itself, or the histogram
// or summary whose series it is.
func family(fams map[string]*dto.MetricFamily, name string) *dto.MetricFamily {
	if f := fams[name]; f != nil {
		return f
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && fams[base] != nil {
			return fams[base]
		}
	}
	return nil
}

func anySeries(f *dto.MetricFamily, name, label, op, value string) bool {
	if label == "le" && strings.HasSuffix(name, "_bucket") {
		return true
	}
	re := regexp.MustCompile("^(?:" + value + ")$")
	for _, m := range f.Metric {
		for _, lp := range m.Label {
			if lp.GetName() == label && (op == "=" && lp.GetValue() == value || op == "=~" && re.MatchString(lp.GetValue())) {
				return true
			}
		}
	}
	return false
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
	fams, heads := series(t), anchors(t)
	for _, r := range rules {
		for _, problem := range checkRule(r, fams, heads) {
			t.Errorf("%s: %s", r.Alert, problem)
		}
	}
}

// The check catches what it is for: each broken copy of a good rule is
// refused for its own reason.
func TestRuleCheckCatchesMistakes(t *testing.T) {
	fams, heads := series(t), anchors(t)
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
