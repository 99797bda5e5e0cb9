package embedded_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/limitertest"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/embedded"
	"github.com/tollgate-rl/tollgate/store/storetest"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(crashChild())
	}
	os.Exit(m.Run())
}

// open opens a store on path and closes it when the test ends.
func open(t testing.TB, path string, opts ...embedded.Option) *embedded.Store {
	t.Helper()
	s, err := embedded.Open(path, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// tempFile is a fresh store file path in the test's temporary directory.
func tempFile(t testing.TB) string {
	return filepath.Join(t.TempDir(), "tollgate.db")
}

// A fresh file for every case.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, tempFile(t)) })
}

// One file for every case: the suite keeps cases apart by namespace, and
// the background flusher writes many namespaces at once.
func TestConformanceSharedFile(t *testing.T) {
	s := open(t, tempFile(t), embedded.WithFlushInterval(5*time.Millisecond)) // flush often while the cases run
	storetest.Run(t, func(t *testing.T) store.Store { return s })
}

// The limiter's suite, with a fresh file for every case, then with one file
// for every case.
func TestLimiterConformance(t *testing.T) {
	limitertest.Run(t, func(t *testing.T) store.Store { return open(t, tempFile(t)) })
}

func TestLimiterConformanceSharedFile(t *testing.T) {
	s := open(t, tempFile(t), embedded.WithFlushInterval(5*time.Millisecond)) // flush often while the cases run
	limitertest.Run(t, func(t *testing.T) store.Store { return s })
}

// The usage conformance suite, with a fresh file per case, then with every
// case sharing one file (cases keep apart by namespace). The suite dates
// expiries from storetest.T0, long past: the fresh files keep the system
// clock (the default must pass as it is), the shared one runs at T0, as a
// store behind an aggregator with the same fake clock would.
func TestUsageConformance(t *testing.T) {
	t.Run("FreshFile", func(t *testing.T) {
		storetest.RunUsage(t, func(t *testing.T) store.UsageStore { return open(t, tempFile(t)) })
	})
	t.Run("SharedFile", func(t *testing.T) {
		s := open(t, tempFile(t), embedded.WithFlushInterval(5*time.Millisecond),
			embedded.WithClock(clock.NewFake(time.UnixMilli(storetest.T0))))
		storetest.RunUsage(t, func(t *testing.T) store.UsageStore { return s })
	})
}

func TestBucketListerConformance(t *testing.T) {
	storetest.RunBucketLister(t, func(t *testing.T) storetest.ListerStore { return open(t, tempFile(t)) })
}
