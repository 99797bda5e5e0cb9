package cli

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// readExport decompresses an export (every member) and returns its
// events' ids, failing on a line that is not an event.
func readExport(t *testing.T, data []byte) []string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("gzip: %v", err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gunzip: %v", err)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSuffix(string(plain), "\n"), "\n") {
		if line == "" {
			continue
		}
		var ev api.AuditEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.ID == "" || ev.Action == "" || ev.TimeMS == 0 {
			t.Fatalf("line %q: %+v, %v", line, ev, err)
		}
		ids = append(ids, ev.ID)
	}
	return ids
}

// wantIDs checks that ids are n distinct ids in increasing order.
func wantIDs(t *testing.T, what string, ids []string, n int) {
	t.Helper()
	if len(ids) != n {
		t.Errorf("%s: %d events, want %d", what, len(ids), n)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Errorf("%s: id %d (%s) not after id %d (%s): a duplicate or out of order", what, i, ids[i], i-1, ids[i-1])
		}
	}
}

// An export to a file, in pages; interrupted (the file cut in the middle
// of a page, as a crash leaves it), then resumed: every event once, in
// order. More events later, resumed again: only those are added.
func TestAuditExportResumes(t *testing.T) {
	c := newCLI(t)
	for i := range 25 {
		c.want(ExitOK, "entity", "create", "org-"+strconv.Itoa(i))
	}
	out := filepath.Join(t.TempDir(), "audit.jsonl.gz")
	c.want(ExitOK, "audit", "export", "--out", out, "--page", "10")
	whole, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	all := readExport(t, whole)
	wantIDs(t, "export", all, 25)

	// A second export to the same file without --resume is refused.
	if code, _, errOut := run(t, "", "audit", "export", "--out", out, "--store", c.store); code != ExitUsage || !strings.Contains(errOut, "--resume") {
		t.Errorf("export over an existing file: exit %d, %s; want a usage error naming --resume", code, errOut)
	}

	// Cut the file in the middle of its second page (second gzip member).
	good, last, err := scanExport(bytes.NewReader(whole))
	if err != nil || good != int64(len(whole)) || last != all[24] {
		t.Fatalf("scanExport(whole) = %d, %s, %v; want %d, %s", good, last, err, len(whole), all[24])
	}
	first := firstMemberEnd(t, whole)
	for _, cut := range []int{first + 5, first + (len(whole)-first)/3, len(whole) - 1} {
		if err := os.WriteFile(out, whole[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		good, _, _ := scanExport(bytes.NewReader(whole[:cut]))
		if good < int64(first) || good >= int64(cut) {
			t.Fatalf("scanExport of the file cut at %d keeps %d bytes, want the complete pages (at least %d)", cut, good, first)
		}
		code, _, errOut := run(t, "", "audit", "export", "--out", out, "--page", "10", "--resume", "--store", c.store)
		if code != ExitOK || !strings.Contains(errOut, "resuming") || !strings.Contains(errOut, "dropped "+strconv.FormatInt(int64(cut)-good, 10)+" bytes") {
			t.Fatalf("resume after a cut at %d: exit %d, %s; want it to resume after the last complete page, dropping %d bytes", cut, code, errOut, int64(cut)-good)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		got := readExport(t, data)
		wantIDs(t, "resumed export (cut at "+strconv.Itoa(cut)+")", got, 25)
		if !slices.Equal(got, all) {
			t.Errorf("resumed export = %v\nwant %v", got, all)
		}
	}

	// A file that is not an export is left alone.
	notExport := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notExport, []byte("my notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "", "audit", "export", "--out", notExport, "--resume", "--store", c.store); code != ExitUsage || !strings.Contains(errOut, "not a gzip file") {
		t.Errorf("resume of a text file: exit %d, %s; want a usage error", code, errOut)
	}
	if data, _ := os.ReadFile(notExport); string(data) != "my notes\n" {
		t.Errorf("the text file became %q", data)
	}

	// Later events: a resume adds them alone.
	for i := range 3 {
		c.want(ExitOK, "entity", "create", "late-"+strconv.Itoa(i))
	}
	_, _, errOut := run(t, "", "audit", "export", "--out", out, "--resume", "--store", c.store)
	if !strings.Contains(errOut, "exported 3 events") {
		t.Errorf("second resume said %q, want 3 events exported", errOut)
	}
	data, _ := os.ReadFile(out)
	wantIDs(t, "export resumed with later events", readExport(t, data), 28)
}

// firstMemberEnd returns where the first gzip member of data ends.
func firstMemberEnd(t *testing.T, data []byte) int {
	t.Helper()
	cr := &countingReader{r: newBufReader(bytes.NewReader(data))}
	zr, err := gzip.NewReader(cr)
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false)
	if _, err := io.Copy(io.Discard, zr); err != nil {
		t.Fatal(err)
	}
	if int(cr.n) >= len(data) {
		t.Fatalf("one member only (%d bytes)", len(data))
	}
	return int(cr.n)
}

// To stdout: the bounds are kept, stderr names the last id, and --after
// continues after it.
func TestAuditExportStdout(t *testing.T) {
	c := newCLI(t)
	for i := range 5 {
		c.want(ExitOK, "entity", "create", "org-"+strconv.Itoa(i))
	}
	code, out, errOut := run(t, "", "audit", "export", "--since", "1h", "--store", c.store)
	if code != ExitOK {
		t.Fatalf("export: exit %d, %s", code, errOut)
	}
	ids := readExport(t, []byte(out))
	wantIDs(t, "export to stdout", ids, 5)
	if !strings.Contains(errOut, "last id "+ids[4]) {
		t.Errorf("stderr %q does not name the last id %s", errOut, ids[4])
	}
	_, out, _ = run(t, "", "audit", "export", "--after", ids[2], "--store", c.store)
	if got := readExport(t, []byte(out)); !slices.Equal(got, ids[3:]) {
		t.Errorf("export --after %s = %v, want %v", ids[2], got, ids[3:])
	}
	// Bounds in the past or the future hold nothing.
	_, out, _ = run(t, "", "audit", "export", "--until", "2020-01-01", "--store", c.store)
	if got := readExport(t, []byte(out)); len(got) != 0 {
		t.Errorf("export --until 2020-01-01 = %v, want none", got)
	}
	for _, args := range [][]string{
		{"--since", "yesterday"},
		{"--since", "2026-01-02", "--until", "2026-01-01"},
		{"--page", "0"},
		{"--resume"},
	} {
		if code, _, _ := run(t, "", append([]string{"audit", "export", "--store", c.store}, args...)...); code != ExitUsage {
			t.Errorf("audit export %v: exit %d, want %d", args, code, ExitUsage)
		}
	}
}

// failingLister lists from events, failing its call number fail.
type failingLister struct {
	events []model.AuditEvent
	calls  int
	fail   int
}

func (f *failingLister) AuditLog(_ context.Context, q model.AuditQuery) ([]model.AuditEvent, error) {
	if f.calls++; f.calls == f.fail {
		return nil, errors.New("connection reset")
	}
	i, _ := slices.BinarySearchFunc(f.events, q.After, func(ev model.AuditEvent, id string) int { return strings.Compare(ev.ID, id+"\x00") })
	return f.events[i:min(i+q.Limit, len(f.events))], nil
}

// A call failing mid-export leaves complete pages and their last id;
// continuing after it writes the rest once.
func TestAuditExportPagesFailure(t *testing.T) {
	var evs []model.AuditEvent
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range 23 {
		evs = append(evs, model.AuditEvent{ID: "01" + strings.Repeat("0", 20) + strconv.Itoa(1000+i), Time: base.Add(time.Duration(i) * time.Second), Action: model.ActionEntityCreate})
	}
	var buf bytes.Buffer
	l := &failingLister{events: evs, fail: 3}
	n, last, err := exportPages(t.Context(), l, model.AuditQuery{Limit: 5}, &buf, nil)
	if err == nil || n != 10 || last != evs[9].ID {
		t.Fatalf("exportPages = %d, %s, %v; want 10 events to %s and the error", n, last, err, evs[9].ID)
	}
	if _, got, _ := scanExport(bytes.NewReader(buf.Bytes())); got != last {
		t.Errorf("scanExport's last id %s, want %s", got, last)
	}
	n, _, err = exportPages(t.Context(), l, model.AuditQuery{Limit: 5, After: last}, &buf, nil)
	if err != nil || n != 13 {
		t.Fatalf("continued: %d, %v; want 13", n, err)
	}
	wantIDs(t, "export continued after a failure", readExport(t, buf.Bytes()), 23)
}

func newBufReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

// Through a server (GET /v1/audit/log), with an admin key; the retention
// is set with namespace set-retention.
func TestAuditExportThroughServer(t *testing.T) {
	admin, hash := server.GenerateKey()
	keys, err := server.LoadKeys(strings.NewReader(hash + " * admin ops\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(memory.New(), server.WithKeys(keys), server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close(context.Background())
	via := func(code int, args ...string) (string, string) {
		t.Helper()
		got, out, errOut := run(t, "", append(args, "--server", ts.URL, "--api-key", admin)...)
		if got != code {
			t.Fatalf("tollgate %s: exit %d, want %d\n%s%s", strings.Join(args, " "), got, code, out, errOut)
		}
		return out, errOut
	}
	for i := range 4 {
		via(ExitOK, "entity", "create", "org-"+strconv.Itoa(i))
	}
	via(ExitOK, "limits", "set", "--resource", "api", "rpm:10/min")
	out := filepath.Join(t.TempDir(), "audit.jsonl.gz")
	via(ExitOK, "audit", "export", "--out", out, "--page", "2")
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "export through a server", readExport(t, data), 5)

	if stdout, _ := via(ExitOK, "namespace", "set-retention", "default", "90d"); !strings.Contains(stdout, "90d") {
		t.Errorf("set-retention printed %q, want the retention", stdout)
	}
	stdout, _ := via(ExitOK, "namespace", "show", "default", "-o", "json")
	var ns api.NamespacesResponse
	decode(t, stdout, &ns)
	if len(ns.Namespaces) != 1 || ns.Namespaces[0].AuditRetentionS != 90*24*3600 {
		t.Errorf("namespace show = %s, want audit_retention_s 7776000", stdout)
	}
	via(ExitFailure, "namespace", "set-retention", "default", "10m")
	via(ExitUsage, "namespace", "set-retention", "default", "soon")
}
