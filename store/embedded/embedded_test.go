package embedded_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

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
