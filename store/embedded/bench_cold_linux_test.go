//go:build linux && (amd64 || arm64)

package embedded

import (
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkOpenCold opens the files of BenchmarkOpen with their pages
// dropped from the page cache first (posix_fadvise DONTNEED, as after a
// reboot), without the full check and with it, in alternation: the medians
// are reported as no-check-ms and check-ms.
func BenchmarkOpenCold(b *testing.B) {
	const n = 100_000
	for _, audit := range []int{0, n} {
		path := openBenchFile(b, n, audit)
		b.Run("buckets-"+strconv.Itoa(n)+"+audit-"+strconv.Itoa(audit), func(b *testing.B) {
			var without, with []time.Duration
			for b.Loop() {
				without = append(without, coldOpen(b, path, false))
				with = append(with, coldOpen(b, path, true))
			}
			median := func(ds []time.Duration) float64 {
				slices.Sort(ds)
				return float64(ds[len(ds)/2]) / float64(time.Millisecond)
			}
			b.ReportMetric(median(without), "no-check-ms")
			b.ReportMetric(median(with), "check-ms")
		})
	}
}

// coldOpen drops path from the page cache, then times Open.
func coldOpen(b *testing.B, path string, full bool) time.Duration {
	b.StopTimer()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	const fadvDontNeed = 4
	_, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontNeed, 0, 0)
	if err := f.Close(); errno != 0 || err != nil {
		b.Fatal(errno, err)
	}
	b.StartTimer()
	start := time.Now()
	s, err := Open(path, WithOpenCheck(full), WithFlushInterval(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	return d
}
