package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/tollgate-rl/tollgate/store/memory"
)

// benchWriter is a cheap http.ResponseWriter that keeps the last body in
// a reused buffer: the benchmarks below measure the server's handling of a
// request, not a recorder's.
type benchWriter struct {
	h      http.Header
	status int
	body   []byte
}

func (w *benchWriter) Header() http.Header { return w.h }

func (w *benchWriter) WriteHeader(code int) { w.status = code }

func (w *benchWriter) Write(b []byte) (int, error) {
	w.body = append(w.body, b...)
	return len(b), nil
}

// reset readies w for the next request.
func (w *benchWriter) reset() {
	clear(w.h)
	w.status, w.body = 0, w.body[:0]
}

// BenchmarkAcquireCommitHandler measures what the server does for one
// POST /v1/acquire with commit (the request of `tollgate bench`), from
// routing to the response body, without the network: decode, authorise,
// acquire and commit, encode, metrics and the request log.
func BenchmarkAcquireCommitHandler(b *testing.B) {
	for _, c := range []struct {
		name string
		body string
	}{
		{name: "1limit", body: `{"entity":"bench-0","resource":"bench","consume":{"rps":1},"limits":["rps:1000000000/sec"],"commit":true}`},
		{name: "3limits", body: `{"entity":"bench-0","resource":"bench","consume":{"rps":1,"tps":100,"inflight":1},` +
			`"limits":["rps:1000000000/sec","tps:1000000000/sec","inflight:1000000000/concurrent"],"commit":true}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv := mustServer(New(memory.New(), WithLogger(slog.New(slog.DiscardHandler))))
			b.Cleanup(func() { _ = srv.Close(context.Background()) })
			body := []byte(c.body)
			rd := bytes.NewReader(body)
			req, err := http.NewRequest("POST", "/v1/acquire", nil)
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.ContentLength = int64(len(body))
			w := &benchWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				rd.Reset(body)
				req.Body = io.NopCloser(rd)
				w.reset()
				srv.ServeHTTP(w, req)
				if w.status != http.StatusOK {
					b.Fatalf("status %d: %s", w.status, w.body)
				}
			}
			b.ReportMetric(float64(len(w.body)), "resp-bytes")
		})
	}
}

// BenchmarkAcquireCommitParallel is BenchmarkAcquireCommitHandler's first
// case from every P, each on its own entity, as `tollgate bench` runs it.
func BenchmarkAcquireCommitParallel(b *testing.B) {
	srv := mustServer(New(memory.New(), WithLogger(slog.New(slog.DiscardHandler))))
	b.Cleanup(func() { _ = srv.Close(context.Background()) })
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		entity := "bench-" + strconv.FormatInt(next.Add(1), 10)
		body := []byte(`{"entity":"` + entity + `","resource":"bench","consume":{"rps":1},"limits":["rps:1000000000/sec"],"commit":true}`)
		rd := bytes.NewReader(body)
		req, err := http.NewRequest("POST", "/v1/acquire", nil)
		if err != nil {
			b.Error(err)
			return
		}
		req.ContentLength = int64(len(body))
		w := &benchWriter{h: http.Header{}}
		for pb.Next() {
			rd.Reset(body)
			req.Body = io.NopCloser(rd)
			w.reset()
			srv.ServeHTTP(w, req)
			if w.status != http.StatusOK {
				b.Errorf("status %d: %s", w.status, w.body)
				return
			}
		}
	})
}
