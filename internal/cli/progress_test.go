package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/client"
)

// On a terminal, a known total draws a bar with the count, an unknown one
// a spinner with the count; both end with the plain final line, which is
// all that other writers get.
func TestProgress(t *testing.T) {
	var tty, plain bytes.Buffer
	for _, w := range []struct {
		buf *bytes.Buffer
		tty bool
	}{{&tty, true}, {&plain, false}} {
		p := newProgressOn(w.buf, "applying", 3, w.tty)
		for range 3 {
			p.add()
		}
		p.done()
	}
	if !strings.Contains(tty.String(), "33% |") || !strings.Contains(tty.String(), "(2/3)") || !strings.HasSuffix(tty.String(), "applying: 3 of 3 done\n") {
		t.Errorf("bar on a terminal: %q", tty.String())
	}
	if plain.String() != "applying: 3 of 3 done\n" {
		t.Errorf("elsewhere: %q, want only the final line", plain.String())
	}

	tty.Reset()
	p := newProgressOn(&tty, "purging t", -1, true)
	p.set(1234)
	p.done()
	if !strings.Contains(tty.String(), "1234") || !strings.HasSuffix(tty.String(), "purging t: 1234 done\n") {
		t.Errorf("spinner on a terminal: %q", tty.String())
	}
}

// --timeout bounds each call to --server; a namespace purge, one long
// call, waits longer unless told otherwise.
func TestTimeoutFlag(t *testing.T) {
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/namespaces/t/purge":
			_, _ = w.Write([]byte(`{"deleted":7}`))
			return
		case "/v1/namespaces":
			_, _ = w.Write([]byte(`{"namespaces":[]}`))
			return
		}
		select { // answers only when the client gives up
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); ts.Close() })

	timeoutOf := func(args ...string) time.Duration {
		t.Helper()
		g := &globals{stdin: strings.NewReader(""), stdout: new(bytes.Buffer), stderr: new(bytes.Buffer)}
		root := newRoot(g)
		root.SetArgs(append(args, "--server", ts.URL))
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return g.timeout
	}
	if got := timeoutOf("namespace", "list"); got != client.DefaultTimeout {
		t.Errorf("namespace list: timeout %v, want %v", got, client.DefaultTimeout)
	}
	if got := timeoutOf("namespace", "purge", "t"); got != longCallTimeout {
		t.Errorf("purge: timeout %v, want %v", got, longCallTimeout)
	}
	if got := timeoutOf("namespace", "purge", "t", "--timeout", "1h"); got != time.Hour {
		t.Errorf("purge --timeout 1h: timeout %v", got)
	}

	code, _, errOut := run(t, "", "entity", "show", "x", "--server", ts.URL, "--timeout", "100ms")
	if code != ExitFailure || !strings.Contains(errOut, "deadline exceeded") {
		t.Errorf("a call past --timeout: exit %d, %s", code, errOut)
	}
	if code, _, _ := run(t, "", "entity", "show", "x", "--server", ts.URL, "--timeout", "-1s"); code != ExitUsage {
		t.Errorf("negative --timeout: exit %d, want %d", code, ExitUsage)
	}
}
