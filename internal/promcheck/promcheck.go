// Package promcheck holds PromQL written for tollgate serve (the
// Prometheus rules of deploy/prometheus, the Grafana dashboard of
// deploy/grafana) to the metrics a real server exports: Exported drives
// servers through every outcome their metrics count, and CheckExpr says
// which metric or label an expression names that no series has.
package promcheck

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// downStore is a store whose buckets do not answer.
type downStore struct{ store.Store }

func (downStore) Consume(context.Context, string, *store.ConsumeRequest) (bool, error) {
	return false, errors.New("connection refused")
}

// Exported returns the metric families of two servers, after requests
// that produce every acquire outcome and every outcome of the per-limit
// decisions: one server whose store does not answer (unavailable,
// degraded, invalid), one whose store does (granted, limited; per limit
// granted, denied, shadow-denied, near the limit).
func Exported(t testing.TB) map[string]*dto.MetricFamily {
	t.Helper()
	down := newServer(t, downStore{memory.New()})
	limits := `"limits":["rpm:1/min"]`
	for _, body := range []string{
		`{"entity":"k","resource":"api","consume":{"rpm":1},` + limits + `}`,                          // unavailable
		`{"entity":"k","resource":"api","consume":{"rpm":1},"on_unavailable":"allow",` + limits + `}`, // degraded
		`{"entity":"k","resource":"api","consume":{"rpm":5},` + limits + `}`,                          // invalid
		`{"entity":"k k"}`, // invalid
	} {
		do(down, "POST", "/v1/acquire", body)
	}
	up := newServer(t, memory.New())
	for range 2 { // a grant and a refusal
		do(up, "POST", "/v1/acquire", `{"entity":"k","resource":"api","consume":{"rpm":1},"commit":true,`+limits+`}`)
	}
	do(up, "PUT", "/v1/limits/resources/llm", `{"limits":["rpm:2/min","tpm:10/min"],"shadow":["tpm"],"alert_at":[0.5,1]}`)
	for _, consume := range []string{`{"rpm":1,"tpm":20}`, `{"rpm":1}`, `{"rpm":1}`} { // shadow-denied; near; denied
		do(up, "POST", "/v1/acquire", `{"entity":"k","resource":"llm","consume":`+consume+`,"commit":true}`)
	}
	fams := Parse(t, do(down, "GET", "/metrics", ""))
	for name, f := range Parse(t, do(up, "GET", "/metrics", "")) {
		if have, found := fams[name]; found {
			have.Metric = append(have.Metric, f.Metric...)
		} else {
			fams[name] = f
		}
	}
	return fams
}

func newServer(t testing.TB, st store.Store) *server.Server {
	t.Helper()
	srv, err := server.New(st, server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	return srv
}

// do serves one request and returns the body of the answer.
func do(srv http.Handler, method, path, body string) string {
	rec := httptest.NewRecorder()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("Content-Type", "application/json")
	srv.ServeHTTP(rec, req)
	return rec.Body.String()
}

// Parse reads metrics in the text format.
func Parse(t testing.TB, text string) map[string]*dto.MetricFamily {
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
	groupingRe = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// CheckExpr returns what is wrong with the PromQL expr against the
// exported families: each metric it selects must be exported, and each
// label it matches must have a series with a matching value. Labels
// Prometheus sets (job, instance), negations, and values holding a
// Grafana variable ($namespace) are taken as they are.
func CheckExpr(expr string, fams map[string]*dto.MetricFamily) []string {
	var bad []string
	var names []string
	for _, sel := range selectorRe.FindAllStringSubmatch(expr, -1) {
		name, matchers := sel[1], sel[2]
		fam := Family(fams, name)
		if fam == nil {
			bad = append(bad, name+" is not exported by the server")
			continue
		}
		names = append(names, name)
		for _, m := range matcherRe.FindAllStringSubmatch(matchers, -1) {
			label, op, value := m[1], m[2], m[3]
			if label == "job" || label == "instance" || op[0] == '!' {
				continue // set by Prometheus; negations need no series
			}
			if strings.Contains(value, "$") {
				if !hasLabel(fam, name, label) {
					bad = append(bad, name+": no series has the label "+label)
				}
				continue
			}
			if !anySeries(fam, name, label, op, value) {
				bad = append(bad, name+": no series has "+label+op+`"`+value+`"`)
			}
		}
	}
	// Labels aggregated by must be labels of a metric selected.
	for _, g := range groupingRe.FindAllStringSubmatch(expr, -1) {
		for _, label := range strings.Split(g[1], ",") {
			label = strings.TrimSpace(label)
			if label == "" || label == "job" || label == "instance" || label == "le" {
				continue
			}
			found := false
			for _, name := range names {
				found = found || hasLabel(Family(fams, name), name, label)
			}
			if !found {
				bad = append(bad, "by ("+label+"): no metric of the expression has the label")
			}
		}
	}
	return bad
}

// Family returns the family that exports name: itself, or the histogram
// or summary whose series it is.
func Family(fams map[string]*dto.MetricFamily, name string) *dto.MetricFamily {
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

func hasLabel(f *dto.MetricFamily, name, label string) bool {
	if label == "le" && strings.HasSuffix(name, "_bucket") {
		return true
	}
	for _, m := range f.Metric {
		for _, lp := range m.Label {
			if lp.GetName() == label {
				return true
			}
		}
	}
	return false
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
