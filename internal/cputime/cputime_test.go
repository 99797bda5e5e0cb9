package cputime

import (
	"testing"
	"time"
)

// Spinning for 50 ms of wall time uses about that much CPU; sleeping
// uses almost none.
func TestProcess(t *testing.T) {
	start := Process()
	for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline); {
	}
	spun := Process() - start
	if spun < 20*time.Millisecond || spun > 2*time.Second {
		t.Errorf("50 ms of spinning used %v of CPU", spun)
	}
	start = Process()
	time.Sleep(50 * time.Millisecond)
	if slept := Process() - start; slept > 25*time.Millisecond {
		t.Errorf("50 ms of sleep used %v of CPU", slept)
	}
}
