package cli

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// tollgate audit export: the namespace's whole audit log (Admin.AuditLog)
// as gzip-compressed JSON Lines, one event per line as the HTTP API
// writes it (api.AuditEvent).
//
// The output is a sequence of gzip members, one per page of events, each
// written whole (and, to a file, synced) before the next page is asked
// for. Concatenated members are one gzip stream to gunzip, zcat and every
// gzip library, and a crash can only leave the last member cut short.
// --resume reads an existing file member by member, keeps the complete
// ones (a cut-short tail is truncated away), and continues after the last
// event id it holds: the export ends with every event once, however often
// it was interrupted. To stdout (which cannot be read back), the id of the
// last event written is printed to stderr, for --after.

// exportPage is how many events one page (one gzip member) holds.
const exportPage = 1000

type auditExport struct {
	since, until, after, out string
	resume                   bool
	page                     int
}

func newAuditExportCmd(g *globals) *cobra.Command {
	var f auditExport
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Export the namespace's whole audit log as gzip-compressed JSON Lines",
		Long: `Export every audit event of the namespace (every entity's, and the system's)
from --since (inclusive) to --until (exclusive), oldest first, as
gzip-compressed JSON Lines: one event per line, as GET /v1/audit/log writes
it. Times are RFC 3339, a date (2026-11-01, UTC midnight), Unix
milliseconds, or a duration before now (24h, 7d). Without --until the export
goes on to the last event written.

With --out the file is written page by page, each page a complete gzip
member, synced before the next is read: after a crash or a failed call,
run the same command with --resume and it continues after the last event
the file holds (a page cut short is dropped and read again), so every event
is in the file once. To stdout, the last event's id is printed on stderr:
pass it as --after to continue. On DynamoDB the listing reads an eventually
consistent index: end the export (--until) a few seconds in the past.`,
		Example: `  tollgate audit export --since 2026-11-01 --until 2026-12-01 --out audit-2026-11.jsonl.gz
  tollgate audit export --since 2026-11-01 --until 2026-12-01 --out audit-2026-11.jsonl.gz --resume
  tollgate audit export --since 1d | aws s3 cp - s3://audit-bucket/tollgate/$(date +%F).jsonl.gz`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withPlanes(cmd, func(ctx context.Context, pl *planes) error { return f.run(ctx, g, pl) })
		},
		Annotations: map[string]string{annotationLong: "true"},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.since, "since", "", "export events at or after this time (default: the first)")
	fl.StringVar(&f.until, "until", "", "export events before this time (default: to the last)")
	fl.StringVar(&f.out, "out", "", "write to this file (default: stdout)")
	fl.BoolVar(&f.resume, "resume", false, "continue the export in --out after the last event it holds")
	fl.StringVar(&f.after, "after", "", "export only events after this id (the last id of an interrupted export to stdout)")
	fl.IntVar(&f.page, "page", exportPage, "events per call and per gzip member (1 to 1000)")
	return cmd
}

// run exports. A relative bound (7d) is resolved once, at the start.
func (f *auditExport) run(ctx context.Context, g *globals, pl *planes) error {
	now := time.Now()
	q := model.AuditQuery{After: f.after, Limit: f.page}
	var err error
	if q.Since, err = parseWhen(f.since, now); err != nil {
		return usageError{fmt.Errorf("--since: %w", err)}
	}
	if q.Until, err = parseWhen(f.until, now); err != nil {
		return usageError{fmt.Errorf("--until: %w", err)}
	}
	if err := q.Validate(); err != nil || q.Limit < 1 {
		return usageError{fmt.Errorf("audit export: %w", errors.Join(err, pageErr(q.Limit)))}
	}
	var w io.Writer = g.stdout
	var sync func() error
	fresh := true // nothing written yet: an empty export is an empty member
	switch {
	case f.out == "" && f.resume:
		return usageError{errors.New("--resume needs --out (to stdout, continue with --after)")}
	case f.out != "" && f.after != "" && f.resume:
		return usageError{errors.New("--resume takes the cursor from --out: leave --after out")}
	case f.out != "":
		file, last, dropped, err := openExport(f.out, f.resume)
		if err != nil {
			return err
		}
		defer file.Close()
		if dropped > 0 {
			fmt.Fprintf(g.stderr, "resuming %s: dropped %d bytes of a page cut short\n", f.out, dropped)
		}
		if last != "" {
			q.After = last
			fmt.Fprintf(g.stderr, "resuming %s after %s\n", f.out, last)
		}
		if pos, err := file.Seek(0, io.SeekCurrent); err != nil || pos > 0 {
			fresh = false
		}
		w, sync = file, file.Sync
	}
	n, last, err := exportPages(ctx, pl.adm, q, w, sync)
	if err == nil && n == 0 && fresh {
		// gunzip refuses an empty file: write a member of no lines.
		if err = writeMember(w, nil); err == nil && sync != nil {
			err = sync()
		}
	}
	where := f.out
	if where == "" {
		where = "stdout"
	}
	if err != nil {
		if last != "" {
			if f.out != "" {
				return fmt.Errorf("audit export: %w (%d events written to %s; run again with --resume to continue)", err, n, where)
			}
			return fmt.Errorf("audit export: %w (%d events written; continue with --after %s)", err, n, last)
		}
		return fmt.Errorf("audit export: %w", err)
	}
	if last == "" {
		last = q.After
	}
	fmt.Fprintf(g.stderr, "exported %d events to %s; last id %s\n", n, where, dash(last))
	return nil
}

func pageErr(limit int) error {
	if limit < 1 || limit > model.MaxAuditPage {
		return model.Invalid("page", strconv.Itoa(limit), "must be 1 to "+strconv.Itoa(model.MaxAuditPage))
	}
	return nil
}

// auditLister is what an export needs of the admin plane.
type auditLister interface {
	AuditLog(ctx context.Context, q model.AuditQuery) ([]model.AuditEvent, error)
}

// exportPages writes the events of q, page after page, each page one
// gzip member, calling sync (if not nil) after each; it returns how many
// it wrote and the id of the last, also when it fails.
func exportPages(ctx context.Context, adm auditLister, q model.AuditQuery, w io.Writer, sync func() error) (n int, last string, err error) {
	for {
		evs, err := adm.AuditLog(ctx, q)
		if err != nil {
			return n, last, err
		}
		if len(evs) == 0 {
			return n, last, nil
		}
		if err := writeMember(w, evs); err != nil {
			return n, last, err
		}
		if sync != nil {
			if err := sync(); err != nil {
				return n, last, err
			}
		}
		n += len(evs)
		last = evs[len(evs)-1].ID
		if len(evs) < q.Limit {
			return n, last, nil
		}
		q.After = last
	}
}

// writeMember writes evs as one complete gzip member of JSON lines.
func writeMember(w io.Writer, evs []model.AuditEvent) error {
	bw := bufio.NewWriter(w)
	zw := gzip.NewWriter(bw)
	enc := json.NewEncoder(zw)
	for _, ev := range evs {
		if err := enc.Encode(api.FromAuditEvent(ev)); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// openExport opens the export file path: a new file, or with resume an
// existing one, cut back to its last complete gzip member, with the id of
// the last event it holds ("" if none), and how many bytes of a page cut
// short it dropped. Without resume an existing file is refused rather
// than overwritten; with resume, so is a file that does not start as gzip
// does (not an export: nothing of it is cut).
func openExport(path string, resume bool) (file *os.File, last string, dropped int64, err error) {
	if !resume {
		file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			return nil, "", 0, usageError{fmt.Errorf("%s exists: --resume to continue its export, or remove it", path)}
		}
		return file, "", 0, err
	}
	file, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, "", 0, err
	}
	fail := func(err error) (*os.File, string, int64, error) {
		file.Close()
		return nil, "", 0, err
	}
	info, err := file.Stat()
	if err != nil {
		return fail(err)
	}
	var magic [2]byte
	if n, _ := io.ReadFull(file, magic[:]); n > 0 && (magic[0] != 0x1f || n == 2 && magic[1] != 0x8b) {
		return fail(usageError{fmt.Errorf("%s is not a gzip file: not an export to resume (nothing was changed)", path)})
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return fail(err)
	}
	good, last, err := scanExport(file)
	if err == nil {
		err = file.Truncate(good)
	}
	if err == nil {
		_, err = file.Seek(good, io.SeekStart)
	}
	if err != nil {
		return fail(fmt.Errorf("resume %s: %w", path, err))
	}
	return file, last, info.Size() - good, nil
}

// scanExport reads an export member by member and returns the offset
// where its complete members end and the id of the last event in them. A
// member cut short or damaged, and anything after it, is not counted: the
// export goes on from the end of the last good one.
func scanExport(r io.Reader) (good int64, last string, err error) {
	cr := &countingReader{r: bufio.NewReader(r)}
	var zr *gzip.Reader
	for {
		start := cr.n
		if zr == nil {
			zr, err = gzip.NewReader(cr)
		} else {
			err = zr.Reset(cr)
		}
		if err == io.EOF && cr.n == start {
			return good, last, nil // the end, after a complete member
		}
		if err != nil {
			return good, last, nil // a header cut short or damaged
		}
		zr.Multistream(false)
		id, ok := lastID(zr)
		if !ok {
			return good, last, nil
		}
		good = cr.n
		if id != "" {
			last = id
		}
	}
}

// lastID reads one member's JSON lines to its end and returns the id of
// its last event; ok is false if the member or a line is broken.
func lastID(r io.Reader) (id string, ok bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var ev api.AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.ID == "" {
			return "", false
		}
		id = ev.ID
	}
	return id, sc.Err() == nil
}

// countingReader counts the bytes read through it. It is an
// io.ByteReader, so that gzip and flate read from it exactly what they
// use, and its count is where a member ends.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// parseWhen reads a time: RFC 3339, a date (UTC midnight), Unix
// milliseconds, or a duration before now ("24h", "7d"). Empty is zero.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	if d, err := parseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q: want RFC 3339, a date (2026-11-01), Unix milliseconds or a duration before now (7d)", s)
}
