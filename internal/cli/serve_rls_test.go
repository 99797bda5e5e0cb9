package cli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

var rlsListeningRE = regexp.MustCompile(`msg="Envoy rate-limit service listening" addr=(\S+)`)

// serveRLS runs `tollgate serve` in-process with the Envoy rate-limit
// service on a loopback port, and returns that port's address.
func serveRLS(t *testing.T, args ...string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "envoy.yaml")
	if err := os.WriteFile(cfg, []byte("domains:\n  - domain: edge\n    descriptors:\n      - {key: api_key, resource: http, limits: [rps:5/sec]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var code int
	done := make(chan struct{})
	args = append([]string{"serve", "--store", "memory:", "--addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--rls-config", cfg}, args...)
	go func() {
		defer close(done)
		code = Main(ctx, args, strings.NewReader(""), io.Discard, pw)
		pw.Close()
	}()
	t.Cleanup(func() { cancel(); <-done })
	var log strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if m := rlsListeningRE.FindStringSubmatch(sc.Text()); m != nil {
			go func() { _, _ = io.Copy(io.Discard, pr) }()
			return m[1]
		}
		log.WriteString(sc.Text() + "\n")
	}
	<-done
	t.Fatalf("serve %v exited with %d before serving gRPC: %s", args, code, log.String())
	return ""
}

// The --grpc-* flags set the limits of the gRPC port, over
// rls.DefaultLimits: the server announces its stream and header limits
// in its SETTINGS, and closes a connection without calls once the idle
// timeout passes.
func TestServeGRPCLimits(t *testing.T) {
	for _, tt := range []struct {
		name       string
		args       []string
		maxStreams uint32
		idle       time.Duration // 0: not waited for
	}{
		{"defaults", nil, 250, 0},
		{"flags", []string{"--grpc-max-streams", "3", "--grpc-idle-timeout", "300ms"}, 3, 300 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := serveRLS(t, tt.args...)
			start := time.Now()
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
				t.Fatal(err)
			}
			fr := http2.NewFramer(conn, conn)
			if err := fr.WriteSettings(); err != nil {
				t.Fatal(err)
			}
			deadline := start.Add(tt.idle + 3*time.Second)
			if err := conn.SetReadDeadline(deadline); err != nil {
				t.Fatal(err)
			}
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			sf, ok := f.(*http2.SettingsFrame)
			if !ok {
				t.Fatalf("first frame %v, want SETTINGS", f)
			}
			for _, want := range []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: tt.maxStreams}, {ID: http2.SettingMaxHeaderListSize, Val: 16 << 10}} {
				if got, ok := sf.Value(want.ID); !ok || got != want.Val {
					t.Errorf("%v %d (sent: %v), want %d", want.ID, got, ok, want.Val)
				}
			}
			if tt.idle == 0 {
				return
			}
			for {
				f, err := fr.ReadFrame()
				if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("a connection without calls is still open after %v (--grpc-idle-timeout %v)", time.Since(start), tt.idle)
				}
				if err != nil {
					break // closed
				}
				if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
					_ = fr.WritePing(true, p.Data) // the server may have closed already
				}
			}
			if open := time.Since(start); open < tt.idle {
				t.Errorf("closed after %v, before --grpc-idle-timeout %v", open, tt.idle)
			}
		})
	}
}

func TestServeGRPCFlagErrors(t *testing.T) {
	grpc := []string{"--grpc-addr", "127.0.0.1:0", "--rls-config", "envoy.yaml"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--grpc-max-streams", "3"}, "--grpc-max-streams goes with --grpc-addr"},
		{append(grpc, "--grpc-max-streams", "-1"), "--grpc-max-streams -1: want a positive value"},
		{append(grpc, "--grpc-max-streams", "4294967296"), "--grpc-max-streams 4294967296: want"},
		{append(grpc, "--grpc-max-conns", "-1"), "--grpc-max-conns -1: want"},
		{append(grpc, "--grpc-max-message-size", "-1"), "--grpc-max-message-size -1: want"},
		{append(grpc, "--grpc-max-message-size", "0"), "--grpc-max-message-size 0: want"},
		{append(grpc, "--grpc-idle-timeout", "-1s"), "--grpc-idle-timeout -1s: want"},
		{append(grpc, "--grpc-max-connection-age", "-1s"), "--grpc-max-connection-age -1s: want"},
	} {
		code, _, stderr := run(t, "", append([]string{"serve", "--store", "memory:"}, tt.args...)...)
		if code != ExitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("serve %v: exit %d (%s), want %d and %q", tt.args, code, strings.TrimSpace(stderr), ExitUsage, tt.want)
		}
	}
}
