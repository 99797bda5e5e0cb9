package embedded_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/embedded"
)

// damageNS is the namespace id of damagedFixture's data.
const damageNS = "ns"

// fixtureBuckets is how many buckets damagedFixture writes: enough for the
// buckets bucket (and the audit bucket) to span pages of their own.
const fixtureBuckets = 2000

func consumeOne(entity string) *store.ConsumeRequest {
	return &store.ConsumeRequest{Now: t0, Buckets: []store.BucketRequest{{
		Key:    store.BucketKey{Entity: entity, Resource: "api"},
		Limits: []store.LimitRequest{{Name: "rpm", Params: bucket.Params{Capacity: 1000}, Check: true, Amount: 1}},
	}}}
}

// storeFile writes a sound store file: fixtureBuckets buckets in damageNS
// (loaded by Open), and as many audit entries (which Open does not read:
// only the full check reads their pages).
func storeFile(t *testing.T) string {
	t.Helper()
	path := tempFile(t)
	s, err := embedded.Open(path, embedded.WithFlushInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for i := range fixtureBuckets {
		if ok, err := s.Consume(t.Context(), damageNS, consumeOne("key-"+strconv.Itoa(i))); !ok || err != nil {
			t.Fatalf("Consume = %v, %v", ok, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	withBolt(t, path, func(tx *bolt.Tx) error {
		audit := nsSub(tx, "audit")
		for i := range fixtureBuckets {
			if err := audit.Put([]byte("\x05key-0"+strconv.Itoa(100_000+i)), []byte(`{"action":"test"}`)); err != nil {
				return err
			}
		}
		return nil
	}, true)
	return path
}

// withBolt runs f in a bbolt transaction on the closed store file at path.
func withBolt(t *testing.T, path string, f func(tx *bolt.Tx) error, write bool) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	run := db.View
	if write {
		run = db.Update
	}
	if err := run(f); err != nil {
		t.Fatal(err)
	}
}

// nsSub is the sub-bucket name of damageNS.
func nsSub(tx *bolt.Tx, name string) *bolt.Bucket {
	return tx.Bucket([]byte("ns")).Bucket([]byte(damageNS)).Bucket([]byte(name))
}

// page returns the page size of the file at path and the id of the page
// find picks.
func page(t *testing.T, path string, find func(tx *bolt.Tx) int) (size, id int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		id = find(tx)
		return nil
	})
	if err != nil || id < 2 {
		t.Fatalf("no page to damage: id %d, %v", id, err)
	}
	return db.Info().PageSize, id
}

// rootOf picks the root page of one of damageNS's sub-buckets.
func rootOf(name string) func(tx *bolt.Tx) int {
	return func(tx *bolt.Tx) int { return int(nsSub(tx, name).Root()) }
}

// firstLeafOf picks the first leaf page of one of damageNS's sub-buckets:
// the page its root (a branch page) points to first. bbolt exposes no
// page's children, so this reads the first element of the branch page:
// after the 16-byte page header, a branch element is pos (4 bytes), ksize
// (4) and the child's page id (8, little-endian).
func firstLeafOf(t *testing.T, name string) func(tx *bolt.Tx) int {
	return func(tx *bolt.Tx) int {
		root := int(nsSub(tx, name).Root())
		if info, err := tx.Page(root); err != nil || info == nil || info.Type != "branch" {
			t.Fatalf("the root of %s: %+v, %v; want a branch page", name, info, err)
		}
		raw, err := os.ReadFile(tx.DB().Path())
		if err != nil {
			t.Fatal(err)
		}
		off := root*tx.DB().Info().PageSize + 16 + 8
		leaf := int(binary.LittleEndian.Uint64(raw[off : off+8]))
		if info, err := tx.Page(leaf); err != nil || info == nil || info.Type != "leaf" {
			t.Fatalf("the first child of %s's root: %+v, %v; want a leaf page", name, info, err)
		}
		return leaf
	}
}

// freeLivePage adds the root page of damageNS's buckets bucket to the
// freelist: a page both in use and free, which only bbolt's Tx.Check
// finds (every read succeeds), and which the next write could hand out
// again. After its 16-byte header (the count of ids at byte 10, 2 bytes),
// a freelist page lists page ids of 8 bytes, little-endian.
func freeLivePage(t *testing.T, path string) {
	size, list := page(t, path, freelistPage)
	_, live := page(t, path, rootOf("buckets"))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hdr := make([]byte, 16)
	if _, err := f.ReadAt(hdr, int64(list*size)); err != nil {
		t.Fatal(err)
	}
	count := int(binary.LittleEndian.Uint16(hdr[10:]))
	if count == 0xFFFF || 16+8*(count+1) > size {
		t.Fatalf("the freelist page has no room for one more id (%d ids)", count)
	}
	id := binary.LittleEndian.AppendUint64(nil, uint64(live))
	if _, err := f.WriteAt(id, int64(list*size+16+8*count)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(binary.LittleEndian.AppendUint16(nil, uint16(count+1)), int64(list*size+10)); err != nil {
		t.Fatal(err)
	}
}

// pageOfType returns a function that picks the first page of a type
// ("freelist", "free", "leaf", ...).
func pageOfType(typ string) func(tx *bolt.Tx) int {
	return func(tx *bolt.Tx) int {
		for id := 2; ; id++ {
			info, err := tx.Page(id)
			if err != nil || info == nil {
				return -1
			}
			if info.Type == typ {
				return id
			}
		}
	}
}

var freelistPage = pageOfType("freelist")

// garbage overwrites n bytes of the file at path from off with random
// bytes (the same every run).
func garbage(t *testing.T, path string, off int64, n int) {
	t.Helper()
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{21}).Read(b)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// garblePage overwrites the page find picks with random bytes.
func garblePage(find func(tx *bolt.Tx) int) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		size, id := page(t, path, find)
		garbage(t, path, int64(id*size), size)
	}
}

func truncate(size func(int64) int64) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, size(fi.Size())); err != nil {
			t.Fatal(err)
		}
	}
}

// damages are the ways a store file is damaged in these tests, with a word
// the problem reported must contain, and whether Open refuses the file
// with its full check turned off too.
var damages = []struct {
	name          string
	damage        func(t *testing.T, path string)
	want          string
	refusedNoFull bool
}{
	{"empty", truncate(func(int64) int64 { return 0 }), "empty (0 bytes)", true},
	{"shorter than its meta pages", truncate(func(int64) int64 { return 5000 }), "not a store file", true},
	{"truncated to half", truncate(func(n int64) int64 { return n / 2 }), "truncated", true},
	{"garbage meta pages", func(t *testing.T, path string) { garbage(t, path, 0, 8192) }, "not a store file", true},
	{"garbage freelist page", garblePage(freelistPage), "freelist", true},
	{"garbage bucket branch page", garblePage(rootOf("buckets")), "bbolt failed reading", true},
	{"garbage bucket records page", func(t *testing.T, path string) { garblePage(firstLeafOf(t, "buckets"))(t, path) }, "bbolt failed reading", true},
	{"garbage audit page", garblePage(rootOf("audit")), `"audit": bbolt failed reading`, false},
	{"a page in use listed as free", freeLivePage, "reachable freed", false},
	{"bucket record that does not decode", func(t *testing.T, path string) {
		withBolt(t, path, func(tx *bolt.Tx) error { return nsSub(tx, "buckets").Put([]byte("\x05key-1api"), []byte("junk")) }, true)
	}, "corrupt bucket record", true},
}

// A damaged file is refused by Open with a *DamagedError naming the file
// and what to do, never a panic and never an empty store, and nothing is
// written to it; Check reports it too.
func TestOpenRefusesDamagedFile(t *testing.T) {
	for _, tc := range damages {
		t.Run(tc.name, func(t *testing.T) {
			path := storeFile(t)
			tc.damage(t, path)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, full := range []bool{true, false} {
				s, err := embedded.Open(path, embedded.WithOpenCheck(full))
				if !full && !tc.refusedNoFull {
					if err != nil {
						t.Fatalf("Open without the full check = %v, want it to open (it does not read these pages)", err)
					}
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if s != nil {
					_ = s.Close()
				}
				checkDamaged(t, "Open(full check "+strconv.FormatBool(full)+")", err, path, tc.want)
			}
			checkDamaged(t, "Check", embedded.Check(path), path, tc.want)
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.refusedNoFull && !bytes.Equal(before, after) {
				t.Errorf("the refused file changed: %d bytes before, %d after", len(before), len(after))
			}
		})
	}
}

func checkDamaged(t *testing.T, call string, err error, path, want string) {
	t.Helper()
	var de *embedded.DamagedError
	if !errors.Is(err, embedded.ErrDamaged) || !errors.As(err, &de) {
		t.Fatalf("%s = %v, want a *DamagedError", call, err)
	}
	if de.Path != path || len(de.Problems) == 0 || !strings.Contains(strings.Join(de.Problems, "\n"), want) {
		t.Errorf("%s: DamagedError{Path: %q, Problems: %q}, want the path and a problem with %q", call, de.Path, de.Problems, want)
	}
	for _, s := range []string{path, "damaged", "restore it from a backup", "move it away"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: %q does not say %q", call, err, s)
		}
	}
}

// A refused file is not held: once a good file is put back in its place,
// Open succeeds (bbolt's handle is lost when it panics while opening: its
// file must still be closed, or its lock would stay).
func TestRefusedFileIsReleased(t *testing.T) {
	path := storeFile(t)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	garblePage(freelistPage)(t, path)
	if _, err := embedded.Open(path); !errors.Is(err, embedded.ErrDamaged) {
		t.Fatalf("Open = %v, want ErrDamaged", err)
	}
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, path, embedded.WithLockTimeout(100*time.Millisecond))
	recs, err := s.ReadBuckets(t.Context(), damageNS, []store.BucketKey{{Entity: "key-7", Resource: "api"}})
	if err != nil || recs[0] == nil {
		t.Fatalf("ReadBuckets after restoring = %v, %v", recs, err)
	}
}

// Check passes a sound file (written by the store, a new one, and one with
// garbage in a free page), fails
// on a file held by another Store with ErrLocked after the lock timeout,
// and never creates a file.
func TestCheck(t *testing.T) {
	sound := storeFile(t)
	if err := embedded.Check(sound); err != nil {
		t.Errorf("Check(sound file) = %v", err)
	}
	fresh := tempFile(t)
	if err := open(t, fresh).Close(); err != nil {
		t.Fatal(err)
	}
	if err := embedded.Check(fresh); err != nil {
		t.Errorf("Check(new store) = %v", err)
	}
	missing := tempFile(t)
	if err := embedded.Check(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Check(missing) = %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Check created %s: %v", missing, err)
	}
	// A free page holds nothing: garbage in it is no damage.
	garblePage(pageOfType("free"))(t, sound)
	if err := embedded.Check(sound); err != nil {
		t.Errorf("Check(garbage in a free page) = %v", err)
	}
	open(t, sound)
	if err := embedded.Check(sound, embedded.WithLockTimeout(50*time.Millisecond)); !errors.Is(err, embedded.ErrLocked) {
		t.Errorf("Check(held file) = %v, want ErrLocked", err)
	}
}

// A file of another format is not damaged: Open and Check refuse it with
// an error that says so, not a *DamagedError (whose advice, restore or
// move away, would be wrong: a newer Tollgate reads it).
func TestOtherFormatIsNotDamage(t *testing.T) {
	path := storeFile(t)
	withBolt(t, path, func(tx *bolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("format"), []byte("2")) }, true)
	for call, err := range map[string]error{"Open": openErr(embedded.Open(path)), "Check": embedded.Check(path)} {
		if err == nil || errors.Is(err, embedded.ErrDamaged) || !strings.Contains(err.Error(), `file format "2"`) {
			t.Errorf("%s = %v, want a format error", call, err)
		}
	}
}

// openErr closes what Open opened and returns its error.
func openErr(s *embedded.Store, err error) error {
	if s != nil {
		_ = s.Close()
	}
	return err
}
