// Package cputime reads the CPU time this process has used (user and
// system, every thread), for benchmarks that report CPU per operation
// beside wall time: a figure that moves less than throughput from one
// machine, and one load, to another.
package cputime

import (
	"syscall"
	"testing"
	"time"
)

// Process returns the user and system CPU time the process has used so
// far (getrusage RUSAGE_SELF; Linux accounts it to the nanosecond and
// reports microseconds). Its children (a DynamoDB Local or redis-server a
// test started) are not counted. Where the call fails it returns 0.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ReportPerOp reports the process's CPU time since start (Process) per
// operation of b, as cpu-ns/op. Call it deferred, with start read just
// before the benchmark's loop:
//
//	defer cputime.ReportPerOp(b, cputime.Process())
func ReportPerOp(b *testing.B, start time.Duration) {
	if b.N > 0 {
		b.ReportMetric(float64(Process()-start)/float64(b.N), "cpu-ns/op")
	}
}
