// Command benchratio summarises `go test -bench` output read from stdin: the
// median of each benchmark's runs, its allocations, and its ratio to the
// baseline of its group. A group is a benchmark name without its last
// path element; its baseline is the member named by -baseline (by default
// "rate.Allow", golang.org/x/time/rate's Allow measured in the same run).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

var line = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:.*?\s([\d.]+) B/op\s+(\d+) allocs/op)?`)

// metricValue finds "<number> <unit>" in a benchmark line.
func metricValue(text, unit string) (float64, bool) {
	m := regexp.MustCompile(`\s([\d.]+) ` + regexp.QuoteMeta(unit) + `(\s|$)`).FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

type result struct {
	ns     []float64
	allocs string
	bytes  string
}

func main() {
	baseline := flag.String("baseline", "rate.Allow", "last name element of each group's baseline benchmark")
	metric := flag.String("metric", "ns/op", "the unit to take medians and ratios of, e.g. p50-us")
	flag.Parse()
	if err := summarise(os.Stdin, os.Stdout, *baseline, *metric); err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
}

func summarise(in io.Reader, out io.Writer, baseline, metric string) error {
	results := map[string]*result{}
	var order []string
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		ns, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return err
		}
		if metric != "ns/op" {
			v, ok := metricValue(sc.Text(), metric)
			if !ok {
				continue
			}
			ns = v
		}
		r := results[m[1]]
		if r == nil {
			r = &result{}
			results[m[1]] = r
			order = append(order, m[1])
		}
		r.ns = append(r.ns, ns)
		r.bytes, r.allocs = m[3], m[4]
	}
	if err := sc.Err(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%-58s %5s %12s %8s %8s %9s\n", "benchmark", "runs", "median "+metric, "B/op", "allocs", "x baseline")
	for _, name := range order {
		r := results[name]
		med := median(r.ns)
		ratio := "-"
		if i := strings.LastIndexByte(name, '/'); i > 0 {
			if base, ok := results[name[:i+1]+baseline]; ok && name[i+1:] != baseline {
				ratio = fmt.Sprintf("%.2f", med/median(base.ns))
			}
		}
		// Small values of reported metrics are mostly ratios (x-paired):
		// show them to three decimals.
		prec := 1
		if metric != "ns/op" && med < 100 {
			prec = 3
		}
		fmt.Fprintf(out, "%-58s %5d %12.*f %8s %8s %9s\n", name, len(r.ns), prec, med, r.bytes, r.allocs, ratio)
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
