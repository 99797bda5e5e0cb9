package main

import (
	"strings"
	"testing"
)

func TestSummariseMediansAndRatios(t *testing.T) {
	in := `goos: linux
BenchmarkX/serial/rate.Allow-2   	 100	       100.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkX/serial/rate.Allow-2   	 100	       300.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkX/serial/rate.Allow-2   	 100	       200.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkX/serial/mine-2         	 100	       500.0 ns/op	      16 B/op	       1 allocs/op
BenchmarkX/serial/mine-2         	 100	       300.0 ns/op	      16 B/op	       1 allocs/op
BenchmarkNoGroup-2               	 100	        10.0 ns/op
PASS`
	var out strings.Builder
	if err := summarise(strings.NewReader(in), &out, "rate.Allow", "ns/op"); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"BenchmarkX/serial/rate.Allow                                   3        200.0        0        0         -",
		"BenchmarkX/serial/mine                                         2        400.0       16        1      2.00",
		"BenchmarkNoGroup                                               1         10.0",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

func TestSummariseOtherMetric(t *testing.T) {
	in := `BenchmarkD/write/baseline-2   	 500	 2000000 ns/op	      1000 p50-us	 8000 p99-us
BenchmarkD/write/baseline-2   	 500	 2000000 ns/op	      1200 p50-us	 8000 p99-us
BenchmarkD/write/acquire-2    	 500	 2000000 ns/op	      1100 p50-us	 7000 p99-us
BenchmarkD/write/acquire-2    	 500	 2000000 ns/op	      1320 p50-us	 7000 p99-us
BenchmarkD/other-2            	 500	 2000000 ns/op	 300 acquires/s`
	var out strings.Builder
	if err := summarise(strings.NewReader(in), &out, "baseline", "p50-us"); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"median p50-us", "BenchmarkD/write/acquire", "1210.0", "1.10"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "BenchmarkD/other") {
		t.Errorf("a line without the metric was summarised:\n%s", got)
	}
}

// Ratios reported as a metric (x-paired) keep three decimals.
func TestSummarisePairedRatio(t *testing.T) {
	in := `BenchmarkD/write/acquire-2    	 500	 4000000 ns/op	 1100 p50-us	 880.0 base-p50-us	 1.250 x-paired
BenchmarkD/write/acquire-2    	 500	 4000000 ns/op	 1100 p50-us	 900.0 base-p50-us	 1.222 x-paired
BenchmarkD/write/acquire-2    	 500	 4000000 ns/op	 1100 p50-us	 900.0 base-p50-us	 1.274 x-paired`
	var out strings.Builder
	if err := summarise(strings.NewReader(in), &out, "baseline", "x-paired"); err != nil {
		t.Fatal(err)
	}
	if want := "BenchmarkD/write/acquire                                       3        1.250"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
}
