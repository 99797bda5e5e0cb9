package terraform_test

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/zclconf/go-cty/cty"
)

// (f) alarms: the checks of the module's CloudWatch alarms.

// metricCatalog is testdata/cloudwatch_metrics.json: namespace -> metric
// -> the dimension sets it is published under.
type metricCatalog struct {
	Namespaces map[string]struct {
		Metrics map[string][][]string `json:"metrics"`
	} `json:"namespaces"`
}

var statistics = map[string]bool{"SampleCount": true, "Average": true, "Sum": true, "Minimum": true, "Maximum": true}

var queryID = regexp.MustCompile(`\b[a-z][a-zA-Z0-9_]*\b`)

// alarmProblems checks every alarm instance of m (under vars): each metric
// is one CloudWatch publishes, under the dimensions it publishes it with,
// with a valid statistic; metric math alarms have at most 10 queries, one
// result, and use each metric they fetch. It returns the metrics alarmed
// on ("namespace metric") too.
func alarmProblems(m *module, vars map[string]cty.Value, cat metricCatalog) ([]string, map[string]bool) {
	var p problems
	covered := map[string]bool{}
	e := newEvaluator(m, withVars(vars), nil)
	checkMetric := func(where string, in instance, statAttr string) {
		ns, _ := in.str("namespace")
		name, _ := in.str("metric_name")
		stat, _ := in.str(statAttr)
		if ext, _ := in.str("extended_statistic"); stat == "" && statAttr == "statistic" {
			stat = ext // a percentile
		}
		n, ok := cat.Namespaces[ns]
		if !ok {
			p.addf("%s: namespace %q is not in testdata/cloudwatch_metrics.json", where, ns)
			return
		}
		sets, ok := n.Metrics[name]
		if !ok {
			p.addf("%s: %s has no metric %q", where, ns, name)
			return
		}
		covered[ns+" "+name] = true
		if !statistics[stat] && !regexp.MustCompile(`^p\d+(\.\d+)?$`).MatchString(stat) {
			p.addf("%s: statistic %q", where, stat)
		}
		var dims []string
		if d, err := in.value("dimensions"); err == nil && d != cty.NilVal && !d.IsNull() {
			for it := d.ElementIterator(); it.Next(); {
				k, _ := it.Element()
				dims = append(dims, k.AsString())
			}
		}
		sort.Strings(dims)
		for _, set := range sets {
			s := slices.Clone(set)
			sort.Strings(s)
			if slices.Equal(s, dims) || (len(s) == 0 && len(dims) == 0) {
				return
			}
		}
		p.addf("%s: %s %s by %v: CloudWatch publishes it by %v", where, ns, name, dims, sets)
	}
	alarms := 0
	for _, key := range keys(m.resources) {
		if !strings.HasPrefix(key, "aws_cloudwatch_metric_alarm.") {
			continue
		}
		insts, err := e.instances(m.resources[key])
		if err != nil {
			p.addf("%s: %v", key, err)
			continue
		}
		for i, in := range insts {
			alarms++
			where := fmt.Sprintf("%s[%d]", key, i)
			queries, err := in.blocks("metric_query")
			if err != nil {
				p.addf("%s: %v", where, err)
				continue
			}
			if len(queries) == 0 {
				checkMetric(where, in, "statistic")
				continue
			}
			if in.body.Attributes["metric_name"] != nil || in.body.Attributes["namespace"] != nil {
				p.addf("%s: metric_name/namespace and metric_query together", where)
			}
			if len(queries) > 10 {
				p.addf("%s: %d metric queries: an alarm takes at most 10", where, len(queries))
			}
			results := 0
			var expressions []string
			fetched := map[string]bool{}
			for _, q := range queries {
				id, _ := q.str("id")
				if rd, _ := q.str("return_data"); rd == "true" {
					results++
				}
				expr, _ := q.str("expression")
				metrics, _ := q.blocks("metric")
				switch {
				case expr != "" && len(metrics) == 0:
					expressions = append(expressions, expr)
				case expr == "" && len(metrics) == 1:
					fetched[id] = true
					checkMetric(where+" query "+id, metrics[0], "stat")
				default:
					p.addf("%s: query %s needs an expression or one metric", where, id)
				}
			}
			if results != 1 {
				p.addf("%s: %d queries return data, want 1", where, results)
			}
			used := map[string]bool{}
			for _, x := range expressions {
				for _, id := range queryID.FindAllString(x, -1) {
					if strings.ToUpper(id) != id { // SUM, METRICS are functions
						used[id] = true
					}
				}
			}
			for id := range used {
				if !fetched[id] {
					p.addf("%s: the expression uses %s, which no query fetches", where, id)
				}
			}
			for id := range fetched {
				if !used[id] {
					p.addf("%s: query %s is fetched but no expression uses it", where, id)
				}
			}
		}
	}
	if alarms == 0 {
		p.addf("no alarms with %v", vars)
	}
	return p, covered
}
