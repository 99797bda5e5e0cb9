package embedded

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// A damaged file is refused, never repaired and never reset: Open must not
// hand a limiter an empty or partial store in place of the one it had, and
// must not write to a file whose pages are wrong (a damaged freelist would
// hand live pages to the next write). What is refused, and why:
//
//   - an existing file of 0 bytes: bbolt would initialise it as a new store,
//     and every limit, entity and balance would be silently gone;
//   - a file bbolt cannot open (no valid meta page, or shorter than its two
//     meta pages);
//   - a file shorter than its high-water mark (the page count its last
//     committed transaction recorded, Tx.Size): its last pages are missing,
//     and reading them through bbolt's memory map would fault;
//   - a file that fails the full check (Check): every key and value of
//     every bucket read, then bbolt's Tx.Check (page types, key order,
//     every page reachable once or free), then every bucket and lease
//     record decoded.
//
// bbolt reads the memory-mapped file without bounds checks and panics (or
// faults) on some damaged pages. Every read of the file during Open and
// Check runs under guard, which turns a panic, and with
// debug.SetPanicOnFault a memory fault, into a *DamagedError. Tx.Check runs
// on a goroutine of bbolt's own, where a fault could not be caught: it only
// runs after readAll has touched, on this goroutine, every page and key it
// reads.

// ErrDamaged is matched (errors.Is) by every *DamagedError.
var ErrDamaged = errors.New("embedded: store file damaged")

// DamagedError reports a store file Open refuses to use, or the problems
// Check found in one. Open writes nothing to such a file. Restore the file
// from a backup, or move it away to start with an empty store.
type DamagedError struct {
	Path string
	// Problems says what is wrong, at least one entry: the first problem
	// found (Open), or every problem found (Check, up to maxProblems).
	Problems []string
}

func (e *DamagedError) Error() string {
	msg := fmt.Sprintf("embedded store %s is damaged", e.Path)
	if len(e.Problems) > 0 {
		msg += ": " + e.Problems[0]
	}
	if n := len(e.Problems) - 1; n > 0 {
		msg += fmt.Sprintf(" (and %d more problems)", n)
	}
	return msg + "; restore it from a backup, or move it away to start with an empty store"
}

// Is reports whether target is ErrDamaged.
func (e *DamagedError) Is(target error) bool { return target == ErrDamaged }

// maxProblems bounds the problems a DamagedError lists: one damaged
// branch page can make bbolt report every page below it.
const maxProblems = 100

func damaged(path string, problems ...string) *DamagedError {
	return &DamagedError{Path: path, Problems: problems}
}

// Check runs the full consistency check (the one Open runs unless
// WithOpenCheck(false)) on the store file at path, and writes nothing. It
// returns nil if the file is sound, a *DamagedError listing the problems
// found, ErrLocked if another process (a running server) holds the file
// beyond the lock timeout (WithLockTimeout; the other options do not
// apply), an error if the file is of a format this version does not read,
// or the error of reading the file (one that does not exist included:
// Check never creates it).
func Check(path string, opts ...Option) error {
	o, err := newOptions(opts)
	if err != nil {
		return err
	}
	exists, err := inspect(path, o.lockTimeout)
	if err != nil {
		return err
	}
	if !exists {
		return fmt.Errorf("embedded: check %s: %w", path, fs.ErrNotExist)
	}
	// The file holds every page its meta page counts: bbolt may read its
	// freelist now, as it opens (PreLoadFreelist), under guard rather than
	// in Tx.Check's goroutine.
	db, err := openBolt(path, &bolt.Options{ReadOnly: true, PreLoadFreelist: true, Timeout: o.lockTimeout})
	if err != nil {
		return openErr(path, o.lockTimeout, err)
	}
	defer db.Close()
	if err := fullCheck(db, path); err != nil {
		return err
	}
	return guard(path, func() error {
		return db.View(func(tx *bolt.Tx) error {
			if err := checkFormat(tx); err != nil {
				return fmt.Errorf("embedded: check %s: %w", path, err)
			}
			if err := readRecords(tx, nil, nil); err != nil {
				return damaged(path, err.Error())
			}
			return nil
		})
	})
}

// inspect is the check of an existing file Open always runs, and the
// first step of Check: the file is not empty, bbolt can read its meta
// pages, and it is as long as its high-water mark. Only then may bbolt
// read its other pages: one past the end of the file faults. It reports
// whether the file exists: a path that does not exist passes (Open creates
// it). The file is opened read-only, under a shared lock, without the
// freelist: nothing is written, nothing but the meta pages is read, and a
// process holding the file makes it fail with ErrLocked after lockTimeout.
func inspect(path string, lockTimeout time.Duration) (exists bool, err error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("embedded: open %s: %w", path, err)
	}
	if fi.Size() == 0 {
		return true, damaged(path, "the file is empty (0 bytes), while a store file always holds at least its meta pages: its content was lost (a failed copy or restore, a full disk)")
	}
	db, err := openBolt(path, &bolt.Options{ReadOnly: true, Timeout: lockTimeout})
	if err != nil {
		return true, openErr(path, lockTimeout, err)
	}
	defer db.Close()
	return true, db.View(func(tx *bolt.Tx) error {
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		if hwm := tx.Size(); fi.Size() < hwm {
			return damaged(path, fmt.Sprintf("the file is %d bytes, but its last committed transaction wrote pages up to byte %d: it was truncated (a copy cut short, a full disk)", fi.Size(), hwm))
		}
		return nil
	})
}

// fullCheck returns a *DamagedError listing what readAll and bbolt's
// Tx.Check find wrong in db, which inspect passed and whose freelist is
// loaded; nil if nothing. No other transaction may write meanwhile
// (Tx.Check in a read transaction). The records are decoded after it: by
// Open as it loads them, by Check with no use for them.
func fullCheck(db *bolt.DB, path string) error {
	warm(path)
	var problems []string
	err := guard(path, func() error {
		return db.View(func(tx *bolt.Tx) error {
			problems = checkTx(tx)
			return nil
		})
	})
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return damaged(path, problems...)
	}
	return nil
}

// warm reads the file at path from start to end, so that the full check
// finds its pages in the page cache. bbolt maps the file for random access
// (no read-ahead): on a cold cache, after a reboot, the check would fault
// the file in one page at a time, 1.3 s for 70 MiB here where a sequential
// read takes 50 ms; on a warm one, the read costs about 0.2 ms per MiB. An
// error is ignored: the check reads the same pages and reports it.
func warm(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Read(buf); err != nil {
			return
		}
	}
}

// checkTx returns the problems fullCheck reports. Tx.Check runs only if
// readAll found none: a page readAll could not read could fault Tx.Check.
func checkTx(tx *bolt.Tx) []string {
	if problems := readAll(tx); len(problems) > 0 {
		return problems
	}
	var problems []string
	more := 0
	for err := range tx.Check() {
		if len(problems) == maxProblems {
			more++
			continue
		}
		problems = append(problems, "bbolt check: "+err.Error())
	}
	if more > 0 {
		problems = append(problems, fmt.Sprintf("bbolt check: %d more problems", more))
	}
	return problems
}

// errStop ends a ForEach early.
var errStop = errors.New("stop")

// readAll reads every key and value of every bucket, nested ones included,
// and checks that each bucket's keys ascend. It runs on the caller's
// goroutine, where guard turns a fault into an error, so that Tx.Check
// (which reads the same pages and keys on a goroutine of its own) cannot
// fault; reading the first and last byte of each value proves the whole
// value is in the file, since a value is contiguous in the memory map.
func readAll(tx *bolt.Tx) (problems []string) {
	var at string // the bucket being read
	defer func() {
		if r := recover(); r != nil {
			problems = append(problems, fmt.Sprintf("bucket %s: bbolt failed reading a page: %v", at, r))
		}
	}()
	var sum byte // what was read, so that the reads are not optimised away
	var walk func(path string, b *bolt.Bucket)
	walk = func(path string, b *bolt.Bucket) {
		at = path
		var prev []byte
		_ = b.ForEach(func(k, v []byte) error {
			if prev != nil && bytes.Compare(prev, k) >= 0 {
				problems = append(problems, fmt.Sprintf("bucket %s: key %x does not sort after key %x", path, k, prev))
				return errStop // the rest of this bucket is not to be trusted
			}
			prev = k
			if v == nil {
				if sub := b.Bucket(k); sub != nil {
					walk(path+"/"+strconv.Quote(string(k)), sub)
					at = path
				}
			} else if len(v) > 0 {
				sum += v[0] ^ v[len(v)-1]
			}
			return nil
		})
	}
	_ = tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		walk(strconv.Quote(string(name)), b)
		return nil
	})
	_ = sum
	return problems
}

// checkFormat refuses a file format this version cannot read. A file
// without the meta bucket (created by bbolt, never written by a Tollgate)
// passes: Open initialises it.
func checkFormat(tx *bolt.Tx) error {
	meta := tx.Bucket(bktMeta)
	if meta == nil {
		return nil
	}
	if v := meta.Get(keyFormat); v != nil && string(v) != formatVersion {
		return fmt.Errorf("file format %q, this version reads %q", v, formatVersion)
	}
	return nil
}

// guard runs f, turning a panic of bbolt's, or a memory fault reading the
// mapped file, into a *DamagedError about path.
func guard(path string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = damaged(path, fmt.Sprintf("bbolt failed reading it: %v", r))
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return f()
}

// openBolt opens path with bbolt under guard. A panic inside bolt.Open
// loses bbolt's handle: the file it opened is unlocked and closed here;
// its memory map stays until the process exits.
func openBolt(path string, o *bolt.Options) (*bolt.DB, error) {
	var file *os.File
	o.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		file = f
		return f, err
	}
	var db *bolt.DB
	err := guard(path, func() error {
		var err error
		db, err = bolt.Open(path, 0o600, o)
		return err
	})
	if errors.Is(err, ErrDamaged) && file != nil {
		unlock(file)
		_ = file.Close()
	}
	return db, err
}

// openErr describes an error of openBolt. Once the file exists, is not
// empty and is locked, bbolt fails only on what the file holds (no valid
// meta page, a version or checksum mismatch, a file shorter than its two
// meta pages) or on an error of the system: the first are damage.
func openErr(path string, lockTimeout time.Duration, err error) error {
	var pe *fs.PathError
	var errno syscall.Errno
	switch {
	case errors.Is(err, ErrDamaged):
		return err
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("%w: %s (lock not acquired within %v): %w", ErrLocked, path, lockTimeout, err)
	case errors.As(err, &pe), errors.As(err, &errno):
		return fmt.Errorf("embedded: open %s: %w", path, err)
	}
	return damaged(path, fmt.Sprintf("bbolt cannot open it (%v): it is not a store file, or it was cut short or damaged at its start", err))
}
