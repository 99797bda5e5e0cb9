package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// Backup flushes bucket state, then writes a consistent copy of the whole
// file to w while the store keeps serving. The copy is a valid store file
// that Open accepts. It returns the number of bytes written.
func (s *Store) Backup(ctx context.Context, w io.Writer) (int64, error) {
	if err := s.Flush(ctx); err != nil {
		return 0, err
	}
	var n int64
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	return n, s.mapErr(err)
}

// BackupFile writes a backup (Backup) to the file path, atomically: the
// copy goes to a temporary file beside path, is synced, passes Check,
// and only then is renamed onto path (replacing an earlier backup there),
// the directory synced after. On an error path is left as it was and the
// temporary file is removed. It refuses to write onto the store's own
// file. It returns the size of the copy.
func (s *Store) BackupFile(ctx context.Context, path string) (int64, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	if err := s.notOwnFile(path); err != nil {
		return 0, err
	}
	return writeBackupFile(path, func(w io.Writer) (int64, error) { return s.Backup(ctx, w) }, WithLockTimeout(s.opts.lockTimeout))
}

// WriteBackupFile writes the copy of a store file that write produces
// (a server's, through client.Backup) to the file path as BackupFile
// does: to a temporary file beside path, synced, checked (Check, which a
// copy cut short fails), and only then renamed onto path, the directory
// synced after. On an error path is left as it was. It returns the size
// of the copy.
func WriteBackupFile(path string, write func(w io.Writer) (int64, error)) (int64, error) {
	return writeBackupFile(path, write)
}

func writeBackupFile(path string, write func(w io.Writer) (int64, error), checkOpts ...Option) (int64, error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return 0, err
	}
	n, err := write(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	err = errors.Join(err, tmp.Close())
	if err == nil {
		err = Check(tmp.Name(), checkOpts...)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return 0, fmt.Errorf("embedded: backup to %s: %w", path, err)
	}
	return n, syncDir(dir)
}

// notOwnFile refuses path if it is the store's file: renaming a copy onto
// it would swap the file under the open store.
func (s *Store) notOwnFile(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	own, err := os.Stat(s.db.Path())
	if err != nil {
		return err
	}
	if os.SameFile(fi, own) {
		return fmt.Errorf("embedded: backup to %s: that is the store's own file", path)
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
