package server

import (
	"bufio"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/store/memory"
)

// HTTPServer accepts a request head (request line, headers and the blank
// line after them) of up to 20480 bytes, as docs/http-api.md says, and
// answers 431 beyond.
func TestHeaderLimit(t *testing.T) {
	srv := mustServer(New(memory.New(), WithLogger(slog.New(slog.DiscardHandler))))
	hs := srv.HTTPServer("127.0.0.1:0")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	status := func(size int) int {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		head := "GET /healthz HTTP/1.1\r\nHost: tollgate\r\nX-Pad: "
		req := head + strings.Repeat("a", size-len(head)-len("\r\n\r\n")) + "\r\n\r\n"
		if _, err := fmt.Fprint(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("a %d-byte head: %v", size, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(maxRequestHead); got != http.StatusOK {
		t.Errorf("a %d-byte head: %d, want 200", maxRequestHead, got)
	}
	if got := status(maxRequestHead + 1); got != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a %d-byte head: %d, want 431", maxRequestHead+1, got)
	}
}
