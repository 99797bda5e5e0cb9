package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/embedded"
)

// fileBuckets is how many buckets storeWithData writes: enough for the
// file to be several times its two meta pages.
const fileBuckets = 2000

// storeWithData writes an embedded store file of fileBuckets buckets in
// namespace "ns" and returns its path.
func storeWithData(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t.db")
	st, err := embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range fileBuckets {
		req := &store.ConsumeRequest{Now: 1, Buckets: []store.BucketRequest{{
			Key:    store.BucketKey{Entity: "key-" + strconv.Itoa(i), Resource: "api"},
			Limits: []store.LimitRequest{{Name: "rpm", Params: bucket.Params{Capacity: 1000}, Check: true, Amount: 1}},
		}}}
		if ok, err := st.Consume(t.Context(), "ns", req); !ok || err != nil {
			t.Fatalf("Consume = %v, %v", ok, err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// damagedFiles are ways to damage a store file, each with what the
// message about it says.
var damagedFiles = []struct {
	name   string
	damage func(t *testing.T, path string)
	want   string
}{
	{"empty", func(t *testing.T, path string) { resize(t, path, func(int64) int64 { return 0 }) }, "empty (0 bytes)"},
	{"truncated to half", func(t *testing.T, path string) { resize(t, path, func(n int64) int64 { return n / 2 }) }, "truncated"},
	{"garbage meta pages", func(t *testing.T, path string) {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, 8192), 0); err != nil {
			t.Fatal(err)
		}
	}, "not a store file"},
}

func resize(t *testing.T, path string, size func(int64) int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size(fi.Size())); err != nil {
		t.Fatal(err)
	}
}

// tollgate serve refuses a damaged embedded file: it exits 1 with a
// message naming the file, the problem and what to do, without serving and
// without writing to the file.
func TestServeRefusesDamagedStore(t *testing.T) {
	for _, tc := range damagedFiles {
		t.Run(tc.name, func(t *testing.T) {
			path := storeWithData(t)
			tc.damage(t, path)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			code, stderr, listened := serveOutcome(t, "--store", "embedded:"+path)
			if listened || code != ExitFailure {
				t.Fatalf("serve on a damaged file: exit %d, listened %v, want exit 1 without serving\n%s", code, listened, stderr)
			}
			for _, want := range []string{path, "is damaged", tc.want, "restore it from a backup", "move it away", "tollgate store check"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("the message does not say %q:\n%s", want, stderr)
				}
			}
			if after, err := os.ReadFile(path); err != nil || !bytes.Equal(before, after) {
				t.Errorf("serve changed the damaged file: %d bytes before, %d after (%v)", len(before), len(after), err)
			}
		})
	}
}

// serveOutcome runs tollgate serve with args until it exits, stopping it
// if it listens, and returns its exit code and standard error, and
// whether it listened.
func serveOutcome(t *testing.T, args ...string) (code int, stderr string, listened bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), strings.NewReader(""), io.Discard, pw)
		pw.Close()
	}()
	var out strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "msg=listening") {
			listened = true
			cancel()
		}
	}
	return <-done, out.String(), listened
}

// tollgate store check: exit 0 and "ok" on a sound file, exit 1 and each
// problem on a damaged one, exit 1 on a file in use or missing (never
// created), exit 2 on a store that is not an embedded file.
func TestStoreCheckCommand(t *testing.T) {
	sound := storeWithData(t)
	code, out, errOut := run(t, "", "store", "check", "--store", "embedded:"+sound)
	if code != ExitOK || !strings.Contains(out, sound+": ok") {
		t.Errorf("check of a sound file: exit %d, %q %q", code, out, errOut)
	}
	for _, tc := range damagedFiles {
		t.Run(tc.name, func(t *testing.T) {
			path := storeWithData(t)
			tc.damage(t, path)
			code, out, errOut := run(t, "", "store", "check", "--store", "embedded:"+path)
			if code != ExitFailure || !strings.Contains(out, path+": damaged") || !strings.Contains(out, tc.want) || !strings.Contains(errOut, "restore it from a backup") {
				t.Errorf("check: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
			}
			code, out, _ = run(t, "", "store", "check", "-o", "json", "--store", "embedded:"+path)
			var res checkResult
			if err := json.Unmarshal([]byte(out), &res); err != nil || code != ExitFailure || res.OK || res.Path != path || len(res.Problems) == 0 {
				t.Errorf("check -o json: exit %d, %+v, %v\n%s", code, res, err, out)
			}
		})
	}

	missing := filepath.Join(t.TempDir(), "missing.db")
	if code, _, errOut := run(t, "", "store", "check", "--store", "embedded:"+missing); code != ExitFailure || !strings.Contains(errOut, "no store file") {
		t.Errorf("check of a missing file: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("check created %s: %v", missing, err)
	}
	for _, args := range [][]string{{"--store", "memory:"}, {"--server", "http://127.0.0.1:1"}} {
		if code, _, errOut := run(t, "", append([]string{"store", "check"}, args...)...); code != ExitUsage {
			t.Errorf("check %v: exit %d, want 2: %s", args, code, errOut)
		}
	}

	held, err := embedded.Open(sound)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if code, _, errOut := run(t, "", "store", "check", "--store", "embedded:"+sound); code != ExitFailure || !strings.Contains(errOut, "in use by another process") {
		t.Errorf("check of a file in use: exit %d, %q", code, errOut)
	}
}

// tollgate backup writes a copy that passes the check and holds the data;
// it refuses a damaged store, a store in use, a missing one (without
// creating it), and fails on a server it cannot reach, leaving FILE
// unwritten.
func TestBackupCommand(t *testing.T) {
	path := storeWithData(t)
	backup := filepath.Join(t.TempDir(), "backup.db")
	code, out, errOut := run(t, "", "backup", backup, "-o", "json", "--store", "embedded:"+path)
	var res backupResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != ExitOK {
		t.Fatalf("backup: exit %d, %v\nstdout: %s\nstderr: %s", code, err, out, errOut)
	}
	if fi, err := os.Stat(backup); err != nil || fi.Size() != res.Bytes || res.Backup != backup || res.Store != path {
		t.Errorf("backup %+v; the file: %v, %v", res, fi, err)
	}
	if err := embedded.Check(backup); err != nil {
		t.Errorf("Check(backup) = %v", err)
	}
	st, err := embedded.Open(backup)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := st.ReadBuckets(t.Context(), "ns", []store.BucketKey{{Entity: "key-0", Resource: "api"}, {Entity: "key-1999", Resource: "api"}})
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil || recs[0] == nil || recs[1] == nil {
		t.Errorf("the backup's buckets: %v, %v", recs, err)
	}

	damaged := storeWithData(t)
	resize(t, damaged, func(n int64) int64 { return n / 2 })
	missing := filepath.Join(t.TempDir(), "missing.db")
	held, err := embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"damaged", []string{"--store", "embedded:" + damaged}, ExitFailure, "is damaged"},
		{"in use", []string{"--store", "embedded:" + path}, ExitFailure, "in use by another process"},
		{"missing", []string{"--store", "embedded:" + missing}, ExitFailure, "no store file"},
		{"unreachable server's", []string{"--server", "http://127.0.0.1:1"}, ExitFailure, "unreachable"},
	} {
		file := filepath.Join(t.TempDir(), "backup.db")
		code, _, errOut := run(t, "", append([]string{"backup", file}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("backup of a %s store: exit %d, %q; want %d and %q", tc.name, code, errOut, tc.code, tc.want)
		}
		if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("backup of a %s store wrote %s: %v", tc.name, file, err)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("backup created the missing store %s: %v", missing, err)
	}
}

// tollgate backup FILE --server URL backs up the embedded store of a
// running tollgate serve (issue 21 item 5: a consistent copy while
// serving): a copy that passes the check, holding what the server wrote,
// taken while acquires go on; a server over another store answers 501
// backup_unsupported and FILE stays unwritten.
func TestBackupThroughServer(t *testing.T) {
	path := storeWithData(t)
	s := startServe(t, "--store", "embedded:"+path)
	cl, err := client.New(s.url)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	limits := client.WithLimits(tollgate.PerHour("rph", 1000))
	for range 3 {
		if _, err := cl.AcquireAndCommit(ctx, "served", "api", tollgate.Consume{"rph": 1}, limits); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	acquired := make(chan int)
	go func() { // acquires while the copy is taken
		n := 0
		for {
			select {
			case <-stop:
				acquired <- n
				return
			default:
			}
			if _, err := cl.AcquireAndCommit(ctx, "busy", "api", tollgate.Consume{"rph": 1}, client.WithLimits(tollgate.PerHour("rph", 1_000_000))); err == nil {
				n++
			}
		}
	}()
	backup := filepath.Join(t.TempDir(), "backup.db")
	code, out, errOut := run(t, "", "backup", backup, "-o", "json", "--server", s.url)
	close(stop)
	t.Logf("%d acquires answered meanwhile", <-acquired)
	var res backupResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != ExitOK {
		t.Fatalf("backup --server: exit %d, %v\nstdout: %s\nstderr: %s", code, err, out, errOut)
	}
	if fi, err := os.Stat(backup); err != nil || fi.Size() != res.Bytes || res.Backup != backup || res.Store != s.url {
		t.Errorf("backup %+v; the file: %v, %v", res, fi, err)
	}
	if err := embedded.Check(backup); err != nil {
		t.Errorf("Check(backup) = %v", err)
	}
	st, err := embedded.Open(backup)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := st.ReadBuckets(ctx, "ns", []store.BucketKey{{Entity: "key-0", Resource: "api"}})
	if err == nil && recs[0] == nil {
		err = errors.New("key-0's bucket is missing")
	}
	ns, nerr := st.GetNamespace(ctx, "default")
	if nerr == nil {
		var served []*store.Record
		served, nerr = st.ReadBuckets(ctx, ns.ID, []store.BucketKey{{Entity: "served", Resource: "api"}})
		// 3 debited of 1,000 (in millitokens; refilling 278 a second since).
		if nerr == nil && (served[0] == nil || served[0].Limits[0].State.Tokens >= 998_000) {
			nerr = fmt.Errorf("served's bucket %+v, want the 3 tokens the server debited", served[0])
		}
	}
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err = errors.Join(err, nerr); err != nil {
		t.Errorf("the backup's data: %v", err)
	}

	mem := startServe(t, "--store", "memory:")
	file := filepath.Join(t.TempDir(), "backup.db")
	if code, _, errOut := run(t, "", "backup", file, "--server", mem.url); code != ExitFailure || !strings.Contains(errOut, "takes no backup") {
		t.Errorf("backup of a server over memory: exit %d, %q; want %d and the store takes no backup", code, errOut, ExitFailure)
	}
	if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused backup wrote %s: %v", file, err)
	}
}
