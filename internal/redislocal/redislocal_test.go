package redislocal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/internal/child"
)

// The harness's own tests start their servers: servers named in the
// environment (for other packages' tests) are not theirs to use.
func TestMain(m *testing.M) {
	os.Unsetenv(EnvURL)
	os.Unsetenv(EnvClusterURL)
	os.Exit(m.Run())
}

// A server answers PING on loopback, is our process, persists nothing, and
// once stopped its port is free and its directory gone.
func TestStart(t *testing.T) {
	t.Parallel()
	skipWithoutServer(t)
	ctx := context.Background()
	s, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	if want := "redis://" + s.Addr; s.URL != want || !strings.HasPrefix(s.Addr, "127.0.0.1:") {
		t.Errorf("URL %q, Addr %q: want redis://127.0.0.1:PORT and its address", s.URL, s.Addr)
	}
	pid, err := serverPID(ctx, s.Addr)
	if err != nil || pid != s.node.proc.Pid() {
		t.Errorf("serverPID = %d, %v; want ours, %d", pid, err, s.node.proc.Pid())
	}
	replies, err := inline(ctx, s.Addr, "INFO persistence")
	if err != nil {
		t.Fatal(err)
	}
	if v := field(replies[0], "aof_enabled"); v != "0" {
		t.Errorf("aof_enabled:%s, want 0", v)
	}

	if err := s.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
	l, err := net.Listen("tcp", s.Addr)
	if err != nil {
		t.Errorf("the port is not free after Stop: %v", err)
	} else {
		l.Close()
	}
	if _, err := os.Stat(s.node.dir); !os.IsNotExist(err) {
		t.Errorf("its directory %s is still there after Stop (%v)", s.node.dir, err)
	}
}

// Three masters make a cluster that every node reports ok, with all slots
// assigned, on distinct loopback ports; Stop frees them.
func TestStartCluster(t *testing.T) {
	t.Parallel()
	skipWithoutServer(t)
	ctx := context.Background()
	began := time.Now()
	c, err := StartCluster(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	t.Logf("a three-master cluster in %v", time.Since(began).Round(time.Millisecond))
	if len(c.Addrs) != 3 || len(slices.Compact(slices.Sorted(slices.Values(c.Addrs)))) != 3 {
		t.Fatalf("Addrs %v: want three distinct addresses", c.Addrs)
	}
	if want := "redis+cluster://" + strings.Join(c.Addrs, ","); c.URL != want {
		t.Errorf("URL %q, want %q", c.URL, want)
	}
	for _, a := range c.Addrs {
		replies, err := inline(ctx, a, "PING", "CLUSTER INFO")
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		if replies[0] != "PONG" {
			t.Errorf("%s: PING answered %q", a, replies[0])
		}
		for name, want := range map[string]string{"cluster_state": "ok", "cluster_slots_assigned": "16384", "cluster_known_nodes": "3"} {
			if got := field(replies[1], name); got != want {
				t.Errorf("%s: %s:%s, want %s", a, name, got, want)
			}
		}
	}
	if err := c.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	for _, a := range c.Addrs {
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("%s is not free after Stop: %v", a, err)
			continue
		}
		l.Close()
	}
}

// With the environment naming running servers, nothing is started, nor
// looked up: Start and StartCluster return those, and Stop does nothing.
func TestRunningFromEnvironment(t *testing.T) {
	t.Setenv(EnvDir, t.TempDir()) // holds no server: looking there would fail
	t.Setenv(EnvURL, "redis://127.0.0.1:1/0")
	t.Setenv(EnvClusterURL, "redis+cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002")
	s, err := Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.URL != "redis://127.0.0.1:1/0" || s.Addr != "127.0.0.1:1" || s.node != nil {
		t.Errorf("Start = %+v; want the URL of %s, address 127.0.0.1:1, no process", s, EnvURL)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	c, err := StartCluster(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"}; c.URL != os.Getenv(EnvClusterURL) || !slices.Equal(c.Addrs, want) || c.nodes != nil {
		t.Errorf("StartCluster = %+v; want the URL of %s, addresses %v, no process", c, EnvClusterURL, want)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}

	t.Setenv(EnvClusterURL, "redis://127.0.0.1:7000")
	if _, err := StartCluster(context.Background(), 3); err == nil {
		t.Errorf("StartCluster with %s=redis://... succeeded; want an error asking for redis+cluster://", EnvClusterURL)
	}
}

// A directory named by TOLLGATE_REDIS_DIR that holds no server is an error
// naming it, not a fallback to PATH; with no server anywhere, the error is
// ErrNotInstalled (the tests skip, or fail on CI).
func TestLookup(t *testing.T) {
	empty := t.TempDir()
	t.Setenv(EnvDir, empty)
	if _, err := Start(context.Background()); err == nil || !strings.Contains(err.Error(), empty) || errors.Is(err, ErrNotInstalled) {
		t.Errorf("Start with %s=%s = %v; want an error naming the directory", EnvDir, empty, err)
	}
	t.Setenv(EnvDir, "")
	t.Setenv("PATH", empty)
	if _, err := StartCluster(context.Background(), 3); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("StartCluster with nothing on PATH = %v; want ErrNotInstalled", err)
	}
}

// A server of another process answering on our port is not taken for
// ours: waitReady keeps waiting until our process exits (as redis-server
// does when it cannot bind), and reports errBind so that another port is
// tried.
func TestWaitReadyRefusesForeignServer(t *testing.T) {
	t.Parallel()
	skipWithoutServer(t)
	foreign, err := Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = foreign.Stop() })
	proc, err := child.Start(exec.Command("sleep", "60"))
	if err != nil {
		t.Skipf("no sleep command: %v", err)
	}
	n := &node{addr: foreign.Addr, proc: proc}
	done := make(chan error, 1)
	go func() { done <- n.waitReady(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("waitReady returned %v while our process ran and another answered", err)
	case <-time.After(300 * time.Millisecond):
	}
	proc.Kill()
	if err := <-done; !errors.Is(err, errBind) {
		t.Errorf("waitReady with a foreign server on the port = %v, want errBind", err)
	}
}

// A test binary that dies without stopping its server (a panic, a timeout,
// SIGKILL) takes the server with it (Linux).
func TestServerDiesWithParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	if os.Getenv("REDISLOCAL_TEST_ORPHAN") != "" {
		s, err := Start(context.Background())
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(s.node.proc.Pid(), s.node.dir)
		os.Exit(0) // without Stop
	}
	t.Parallel()
	skipWithoutServer(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithParent$")
	cmd.Env = append(os.Environ(), "REDISLOCAL_TEST_ORPHAN=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v; output %q", err, out)
	}
	var pid int
	for sc := bufio.NewScanner(strings.NewReader(string(out))); sc.Scan(); {
		p, dir, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if n, err := strconv.Atoi(p); ok && err == nil && strings.Contains(dir, "redislocal-") {
			pid = n
			// Nobody stopped the server to remove its directory.
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
		}
	}
	if pid == 0 {
		t.Fatalf("helper printed no pid and directory: %q", out)
	}
	// The kernel delivers SIGKILL when the helper exits; the process is
	// gone once it has been reaped (init does that): wait for it.
	const grace = 10 * time.Second
	deadline := time.Now().Add(grace)
	for alive(pid) {
		if time.Now().After(deadline) {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
			t.Fatalf("redis-server %d outlived its parent by %v", pid, grace)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The probe reads the replies PING, INFO and CLUSTER INFO give, and
// refuses what it does not read.
func TestReadReply(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"+PONG\r\n", "PONG", true},
		{":42\r\n", "42", true},
		{"$13\r\ncluster_state\r\n", "cluster_state", true},
		{"$0\r\n\r\n", "", true},
		{"-ERR unknown command\r\n", "", false},
		{"*1\r\n$1\r\na\r\n", "", false},
		{"$-1\r\n", "", false},
		{"$5\r\nab", "", false},
		{"\r\n", "", false},
	} {
		got, err := readReply(bufio.NewReader(strings.NewReader(c.in)))
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("readReply(%q) = %q, %v; want %q, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
	info := "# Cluster\r\ncluster_state:ok\r\ncluster_slots_assigned:16384\r\n"
	if got := field(info, "cluster_state"); got != "ok" {
		t.Errorf("field(cluster_state) = %q, want ok", got)
	}
	if got := field(info, "cluster_slots"); got != "" {
		t.Errorf("field(cluster_slots) = %q, want none (a prefix is not a name)", got)
	}
}

func skipWithoutServer(t *testing.T) {
	t.Helper()
	if _, err := lookup(context.Background()); err != nil {
		if errors.Is(err, ErrNotInstalled) && !inCI() {
			t.Skip(err)
		}
		t.Fatal(err)
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
