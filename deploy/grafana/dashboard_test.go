// Package grafana_test checks the Grafana dashboard of tollgate.json
// against what a real tollgate server exports, as deploy/prometheus's
// tests check the alerting rules.
package grafana_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/tollgate-rl/tollgate/internal/promcheck"
)

const dashboardFile = "tollgate.json"

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

type variable struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Query any    `json:"query"`
}

func load(t *testing.T, data []byte) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

var labelValuesRe = regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`)

// check returns what is wrong with d: a panel without a title, a data
// source other than the $datasource variable, an id used twice, a grid
// position off the 24 columns, no query; and every query (of panels and
// of template variables) held to the exported families.
func check(d dashboard, fams map[string]*dto.MetricFamily) []string {
	var bad []string
	if d.UID == "" || d.Title == "" {
		bad = append(bad, "the dashboard needs a uid and a title")
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		where := p.Title
		if p.Title == "" {
			bad = append(bad, "a panel without a title")
		}
		if ids[p.ID] {
			bad = append(bad, where+": id used twice")
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			bad = append(bad, where+": grid position off the 24 columns")
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			bad = append(bad, where+": data source is not ${datasource}")
		}
		if len(p.Targets) == 0 {
			bad = append(bad, where+": no query")
		}
		for _, q := range p.Targets {
			if strings.TrimSpace(q.Expr) == "" {
				bad = append(bad, where+" "+q.RefID+": empty query")
			}
			for _, problem := range promcheck.CheckExpr(q.Expr, fams) {
				bad = append(bad, where+" "+q.RefID+": "+problem)
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		text, _ := q["query"].(string)
		m := labelValuesRe.FindStringSubmatch(text)
		if m == nil {
			bad = append(bad, "variable "+v.Name+": want label_values(selector, label), got "+text)
			continue
		}
		for _, problem := range promcheck.CheckExpr(m[1], fams) {
			bad = append(bad, "variable "+v.Name+": "+problem)
		}
		if name, _, _ := strings.Cut(m[1], "{"); len(promcheck.CheckExpr(name+`{`+m[2]+`=~".+"}`, fams)) != 0 {
			bad = append(bad, "variable "+v.Name+": no series of "+name+" has the label "+m[2])
		}
	}
	return bad
}

func TestDashboardMatchesTheServersMetrics(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	d := load(t, data)
	queries := 0
	for _, p := range d.Panels {
		queries += len(p.Targets)
	}
	if queries < 10 {
		t.Fatalf("%d queries, want the panels docs/operations.md describes", queries)
	}
	for _, problem := range check(d, promcheck.Exported(t)) {
		t.Errorf("%s", problem)
	}
}

// The check catches what it is for: each broken copy of the dashboard is
// refused.
func TestDashboardCheckCatchesMistakes(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	fams := promcheck.Exported(t)
	if bad := check(load(t, data), fams); len(bad) != 0 {
		t.Fatalf("the dashboard is refused: %v", bad)
	}
	// replace edits the first query that holds old.
	replace := func(old, new string) func(*dashboard) bool {
		return func(d *dashboard) bool {
			for i := range d.Panels {
				for j := range d.Panels[i].Targets {
					if q := &d.Panels[i].Targets[j]; strings.Contains(q.Expr, old) {
						q.Expr = strings.Replace(q.Expr, old, new, 1)
						return true
					}
				}
			}
			return false
		}
	}
	for name, edit := range map[string]func(*dashboard) bool{
		"unknown metric":  replace("tollgate_near_limit_total", "tollgate_near_limits_total"),
		"unknown outcome": replace(`outcome="denied"`, `outcome="refused"`),
		"unknown label":   replace("sum by (resource, limit, outcome)", "sum by (resource, limit, result)"),
		"unknown variable label": func(d *dashboard) bool {
			v := d.Templating.List[len(d.Templating.List)-1]
			q := v.Query.(map[string]any)
			q["query"] = strings.Replace(q["query"].(string), ", limit)", ", limits)", 1)
			return true
		},
		"another data source": func(d *dashboard) bool {
			d.Panels[1].Datasource.UID = "prom"
			return true
		},
		"a panel off the grid": func(d *dashboard) bool {
			d.Panels[1].GridPos.X = 20
			return true
		},
	} {
		d := load(t, data)
		if !edit(&d) {
			t.Fatalf("%s: nothing to edit in %s", name, dashboardFile)
		}
		if bad := check(d, fams); len(bad) == 0 {
			t.Errorf("%s: not caught", name)
		}
	}
}
