package deploy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/store/dynamodb"
)

// tableAlarmProblems checks the template's alarms on per-operation table
// metrics: each sums its metric over exactly dynamodb.Operations (the
// calls the backend makes), in at most maxAlarmMetrics metrics.
func tableAlarmProblems(resources map[string]any) []string {
	var p []string
	want := slices.Sorted(slices.Values(dynamodb.Operations()))
	found := 0
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range resources {
			if !yield(k) {
				return
			}
		}
	}) {
		r, _ := resources[name].(map[string]any)
		props, _ := r["Properties"].(map[string]any)
		ms, ok := props["Metrics"].([]any)
		if r["Type"] != "AWS::CloudWatch::Alarm" || !ok {
			continue
		}
		found++
		var ops, exprs []string
		for _, m := range ms {
			mq, _ := m.(map[string]any)
			if e, ok := mq["Expression"].(string); ok {
				exprs = append(exprs, e)
			}
			st, _ := mq["MetricStat"].(map[string]any)
			metric, _ := st["Metric"].(map[string]any)
			dims, _ := metric["Dimensions"].([]any)
			for _, d := range dims {
				if dm, _ := d.(map[string]any); dm["Name"] == "Operation" {
					ops = append(ops, fmt.Sprint(dm["Value"]))
				}
			}
		}
		slices.Sort(ops)
		if !slices.Equal(ops, want) {
			p = append(p, fmt.Sprintf("%s: sums operations %v, the backend calls %v (dynamodb.Operations)", name, ops, want))
		}
		if len(ms) > maxAlarmMetrics {
			p = append(p, fmt.Sprintf("%s: %d metrics, CloudWatch takes at most %d", name, len(ms), maxAlarmMetrics))
		}
		if !slices.Equal(exprs, []string{"SUM(METRICS())"}) {
			p = append(p, fmt.Sprintf("%s: expressions %q, want SUM(METRICS()) alone", name, exprs))
		}
	}
	if found != 2 {
		p = append(p, fmt.Sprintf("%d metric math alarms, want 2 (ThrottledRequests, SystemErrors)", found))
	}
	return p
}

// TestTemplateAlarmOperations: the table's alarms watch every operation
// the backend calls, and a template that misses one fails the check.
func TestTemplateAlarmOperations(t *testing.T) {
	b, err := Template(TemplateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	load := func() map[string]any {
		var tpl map[string]any
		if err := json.Unmarshal(b, &tpl); err != nil {
			t.Fatal(err)
		}
		return tpl["Resources"].(map[string]any)
	}
	if p := tableAlarmProblems(load()); len(p) > 0 {
		t.Fatal(strings.Join(p, "\n"))
	}
	metrics := func(r map[string]any, alarm string) []any {
		return r[alarm].(map[string]any)["Properties"].(map[string]any)["Metrics"].([]any)
	}
	for _, tc := range []struct {
		name, want string
		mutate     func(map[string]any)
	}{
		{"operation dropped", "sums operations", func(r map[string]any) {
			props := r["TableThrottlesAlarm"].(map[string]any)["Properties"].(map[string]any)
			props["Metrics"] = slices.Delete(metrics(r, "TableThrottlesAlarm"), 3, 4)
		}},
		{"too many metrics", "at most 10", func(r map[string]any) {
			props := r["TableSystemErrorsAlarm"].(map[string]any)["Properties"].(map[string]any)
			ms := metrics(r, "TableSystemErrorsAlarm")
			props["Metrics"] = append(ms, ms[0], ms[1], ms[2])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := load()
			tc.mutate(r)
			for _, p := range tableAlarmProblems(r) {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Errorf("mutation not caught: want a problem containing %q", tc.want)
		})
	}
}
