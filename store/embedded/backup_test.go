package embedded_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/embedded"
)

// A backup taken while another goroutine keeps acquiring (and the
// background flush keeps writing) is a sound store file that holds every
// bucket flushed before it started.
func TestBackupFileWhileAcquiring(t *testing.T) {
	ctx := t.Context()
	s := open(t, tempFile(t), embedded.WithFlushInterval(time.Millisecond))
	const n = 500
	keys := make([]store.BucketKey, n)
	for i := range keys {
		keys[i] = store.BucketKey{Entity: "key-" + strconv.Itoa(i), Resource: "api"}
		if ok, err := s.Consume(ctx, damageNS, consumeOne(keys[i].Entity)); !ok || err != nil {
			t.Fatalf("Consume = %v, %v", ok, err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	started := make(chan struct{})
	var wg sync.WaitGroup
	var acquired int
	var acquireErr error
	wg.Go(func() {
		for acquired = 0; ; acquired++ {
			if acquired == 1 {
				close(started)
			}
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Consume(ctx, damageNS, consumeOne("hot-"+strconv.Itoa(acquired%50))); err != nil {
				acquireErr = err
				return
			}
		}
	})
	<-started
	backup := filepath.Join(t.TempDir(), "backup.db")
	size, err := s.BackupFile(ctx, backup)
	close(stop)
	wg.Wait()
	if err != nil || acquireErr != nil {
		t.Fatalf("BackupFile = %d, %v; acquiring: %v", size, err, acquireErr)
	}
	if fi, err := os.Stat(backup); err != nil || fi.Size() != size {
		t.Fatalf("backup file %v, %v; BackupFile said %d bytes", fi, err, size)
	}
	t.Logf("%d acquires while the backup ran", acquired)

	if err := embedded.Check(backup); err != nil {
		t.Fatalf("Check(backup) = %v", err)
	}
	b := open(t, backup)
	recs, err := b.ReadBuckets(ctx, damageNS, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if r == nil || r.Limits[0].State.Tokens != 999 {
			t.Fatalf("backup's %s: %+v, want the flushed bucket (999 tokens left)", keys[i].Entity, r)
		}
	}
}

// BackupFile replaces an earlier backup only with a whole, checked one:
// a failed backup leaves the earlier one as it was and no temporary file.
// It refuses the store's own file.
func TestBackupFileIsAtomic(t *testing.T) {
	ctx := t.Context()
	path := tempFile(t)
	s := open(t, path)
	dir := t.TempDir()
	backup := filepath.Join(dir, "backup.db")
	if err := os.WriteFile(backup, []byte("the previous backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A backup that fails once its copy is written: renaming it onto a
	// directory fails.
	if err := os.Mkdir(filepath.Join(dir, "a dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BackupFile(ctx, filepath.Join(dir, "a dir")); err == nil {
		t.Error("BackupFile onto a directory succeeded")
	}
	if _, err := s.BackupFile(ctx, path); err == nil {
		t.Error("BackupFile onto the store's own file succeeded")
	}
	closed, err := embedded.Open(tempFile(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := closed.BackupFile(ctx, backup); !errors.Is(err, embedded.ErrClosed) {
		t.Errorf("BackupFile on a closed store = %v, want ErrClosed", err)
	}
	if got, err := os.ReadFile(backup); err != nil || string(got) != "the previous backup" {
		t.Errorf("the earlier backup after failed backups: %q, %v", got, err)
	}
	if _, err := s.BackupFile(ctx, backup); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"a dir", "backup.db"}) {
		t.Errorf("backup directory holds %q, want only the backup and the directory", names)
	}
	if err := embedded.Check(backup); err != nil {
		t.Errorf("Check(backup) = %v", err)
	}
}
