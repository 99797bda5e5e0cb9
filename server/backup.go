package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/tollgate-rl/tollgate/api"
)

// BackupTimeout bounds GET /v1/backup, which extends its connection's
// deadlines to it: a large file takes longer than HTTPServer's timeouts.
const BackupTimeout = 10 * time.Minute

// Backuper writes a consistent copy of the whole store to w and returns
// its size: an embedded store's Backup (store/embedded).
type Backuper func(ctx context.Context, w io.Writer) (int64, error)

// WithBackup serves GET /v1/backup from b: a consistent copy of the store
// file taken while the server serves (tollgate serve passes an embedded
// store's Backup; `tollgate backup FILE --server URL` reads it). Without
// it the route answers 501 backup_unsupported.
func WithBackup(b Backuper) Option { return func(s *Server) { s.backup = b } }

// serveBackup streams the copy. A failure once the copy has begun aborts
// the connection (the client sees the body cut short, and a cut copy fails
// the file check the CLI runs before keeping it).
func (s *Server) serveBackup(w http.ResponseWriter, r *http.Request, _ *call) error {
	if s.backup == nil {
		return api.ErrBackupUnsupported
	}
	rc := http.NewResponseController(w)
	deadline := time.Now().Add(BackupTimeout)
	// Errors mean the writer has no deadlines to move (e.g. in tests).
	_ = rc.SetWriteDeadline(deadline)
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="tollgate.db"`)
	sent := &countingWriter{w: w}
	n, err := s.backup(ctx, sent)
	if err != nil {
		if sent.n == 0 {
			w.Header().Del("Content-Disposition")
			w.Header().Del("Content-Type")
			return err
		}
		s.log.Error("backup cut short", slog.Int64("bytes", sent.n), slog.Any("err", err))
		panic(http.ErrAbortHandler)
	}
	s.log.Info("backup served", slog.Int64("bytes", n))
	return nil
}

// countingWriter counts what went through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
