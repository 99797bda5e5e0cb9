package server

import (
	"bytes"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-rl/tollgate/api"
)

// lockedBuffer is a bytes.Buffer for a logger shared by handlers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// At Debug level every request logs one line with its method, path,
// status, duration and namespace; at Info level none does.
func TestRequestLog(t *testing.T) {
	var debug, info lockedBuffer
	for _, tt := range []struct {
		buf   *lockedBuffer
		level slog.Level
	}{{&debug, slog.LevelDebug}, {&info, slog.LevelInfo}} {
		e := newEnv(t, WithLogger(slog.New(slog.NewTextHandler(tt.buf, &slog.HandlerOptions{Level: tt.level}))))
		e.want(http.StatusOK, "POST", "/v1/acquire", acquireBody("rpm:5/min"), nil)
		e.hdr.Set(api.NamespaceHeader, "team-b")
		e.want(http.StatusNotFound, "GET", "/v1/entities/x", nil, nil)
	}
	lines := strings.Split(strings.TrimSpace(debug.String()), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`level=DEBUG msg=request method=POST path=/v1/acquire status=200 duration=\S+ namespace=default$`),
		regexp.MustCompile(`level=DEBUG msg=request method=GET path=/v1/entities/x status=404 duration=\S+ namespace=team-b$`),
	}
	if len(lines) != len(want) {
		t.Fatalf("debug log:\n%s\nwant %d lines", debug.String(), len(want))
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("line %d: %s\nwant %s", i, lines[i], re)
		}
	}
	if strings.Contains(info.String(), "msg=request") {
		t.Errorf("info level logged requests:\n%s", info.String())
	}
}
