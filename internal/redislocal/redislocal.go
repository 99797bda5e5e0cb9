// Package redislocal runs real redis-server processes for tests: [Start]
// gives a fresh server and [StartCluster] a fresh Redis Cluster of several
// masters, each on free loopback ports with nothing persisted, and [Main]
// and [MainCluster] one of each for a whole test binary. There is no fake:
// the Redis backend's tests run against the server it runs on in
// production.
//
// Tests use the redis-server and redis-cli (Redis 7+, or Valkey's
// valkey-server and valkey-cli) that `scripts/redis.sh install` finds or
// installs (which `make test` runs), else those on PATH. Set
// TOLLGATE_REDIS_URL (and TOLLGATE_REDIS_CLUSTER_URL) to use servers that
// are already running instead.
package redislocal

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-rl/tollgate/internal/child"
)

// Environment variables the harness reads.
const (
	EnvURL        = "TOLLGATE_REDIS_URL"         // a running server to use instead, e.g. redis://127.0.0.1:6379
	EnvClusterURL = "TOLLGATE_REDIS_CLUSTER_URL" // a running cluster to use instead: redis+cluster://host:port,host:port,...
	EnvDir        = "TOLLGATE_REDIS_DIR"         // the directory holding redis-server and redis-cli
)

// How to get a server, for messages.
const Help = "redis-server (Redis 7+, or Valkey) is not installed: run `make test` (or `scripts/redis.sh install` " +
	"once, then `go test`), or set " + EnvURL + " to a running server (and " + EnvClusterURL +
	" to a running cluster, redis+cluster://host:port,host:port,...)"

// ErrNotInstalled reports that no redis-server (of Redis 7 or later) and
// redis-cli could be found.
var ErrNotInstalled = errors.New(Help)

// Server is a running redis-server.
type Server struct {
	URL  string // redis://127.0.0.1:PORT
	Addr string // 127.0.0.1:PORT
	node *node  // nil for the server named by EnvURL
}

// Cluster is a running Redis Cluster.
type Cluster struct {
	URL   string   // redis+cluster://127.0.0.1:P1,127.0.0.1:P2,...
	Addrs []string // the masters' addresses, host:port
	nodes []*node  // nil for the cluster named by EnvClusterURL
}

// node is a redis-server process of ours.
type node struct {
	addr    string // 127.0.0.1:PORT
	tlsAddr string // its TLS port's, if it has one
	dir     string // its working directory (the cluster's nodes file), removed by stop
	proc    *child.Process
}

// startAttempts is how many ports a node is tried on: a free port may be
// taken by another process between the moment it is picked and the moment
// redis-server binds it (test binaries of several packages start servers
// at once).
const startAttempts = 5

// Timeouts: redis-server answers within milliseconds of its start; a
// cluster takes a few seconds to agree (redis-cli polls once a second while
// the nodes meet).
const (
	readyTimeout   = 15 * time.Second
	clusterTimeout = 60 * time.Second
)

// Start starts a fresh redis-server on a free loopback port, nothing
// persisted, and waits until it answers, or returns the server named by
// EnvURL. The server is ours: Start checks that the process that answers is
// the one it started, and tries another port if redis-server could not
// bind the one picked. On Linux the server dies with the process that
// started it, even if that process is killed or panics.
func Start(ctx context.Context) (*Server, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return &Server{URL: u, Addr: hostOf(u)}, nil
	}
	bins, err := lookup(ctx)
	if err != nil {
		return nil, err
	}
	n, err := startNode(ctx, bins.server, nodeOpts{})
	if err != nil {
		return nil, err
	}
	return &Server{URL: "redis://" + n.addr, Addr: n.addr, node: n}, nil
}

// TLSFiles are the PEM files of a server's TLS port: its certificate, its
// key, and the CA that signed it.
type TLSFiles struct{ Cert, Key, CA string }

// StartTLS starts a fresh redis-server as [Start] does that also listens
// with TLS, on a second free loopback port, with the certificate and key
// of files (clients are not asked for certificates). Its URL and Addr are
// the TLS port's (rediss://); the plain port serves only the readiness
// probe. redis-server must be built with TLS (Debian's is).
func StartTLS(ctx context.Context, files TLSFiles) (*Server, error) {
	bins, err := lookup(ctx)
	if err != nil {
		return nil, err
	}
	n, err := startNode(ctx, bins.server, nodeOpts{tls: &files})
	if err != nil {
		return nil, err
	}
	return &Server{URL: "rediss://" + n.tlsAddr, Addr: n.tlsAddr, node: n}, nil
}

// nodeOpts say what kind of node startNode starts.
type nodeOpts struct {
	cluster bool
	tls     *TLSFiles // with a TLS port too
}

// Stop ends the server (not one named by EnvURL), waits until it has
// exited and removes its directory.
func (s *Server) Stop() error {
	if s.node == nil {
		return nil
	}
	return s.node.stop()
}

// StartCluster starts a fresh Redis Cluster of masters masters and no
// replicas (at least three: redis-cli creates no smaller one), each node a
// redis-server as [Start] starts them, in its own directory; it has
// redis-cli assign the slots and waits until every node reports the
// cluster's state ok. Or it returns the cluster named by EnvClusterURL.
func StartCluster(ctx context.Context, masters int) (*Cluster, error) {
	if u := os.Getenv(EnvClusterURL); u != "" {
		addrs, err := clusterAddrs(u)
		if err != nil {
			return nil, err
		}
		return &Cluster{URL: u, Addrs: addrs}, nil
	}
	return startCluster(ctx, masters, nil)
}

// StartClusterTLS starts a fresh Redis Cluster as StartCluster does whose
// nodes clients reach over TLS (their TLS ports, with the certificate and
// key of files, which must name 127.0.0.1 and be valid for both server
// and client authentication) and talk to each other over TLS
// (tls-cluster). Its URL is rediss+cluster://, without the CA.
func StartClusterTLS(ctx context.Context, masters int, files TLSFiles) (*Cluster, error) {
	return startCluster(ctx, masters, &files)
}

func startCluster(ctx context.Context, masters int, tls *TLSFiles) (*Cluster, error) {
	if masters < 3 {
		return nil, fmt.Errorf("redislocal: a cluster needs at least 3 masters, not %d", masters)
	}
	bins, err := lookup(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()

	c := &Cluster{nodes: make([]*node, masters)}
	errs := make([]error, masters)
	var wg sync.WaitGroup
	for i := range masters {
		wg.Go(func() { c.nodes[i], errs[i] = startNode(ctx, bins.server, nodeOpts{cluster: true, tls: tls}) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = c.Stop()
		return nil, err
	}
	for _, n := range c.nodes {
		if tls != nil {
			c.Addrs = append(c.Addrs, n.tlsAddr)
		} else {
			c.Addrs = append(c.Addrs, n.addr)
		}
	}
	c.URL = "redis+cluster://" + strings.Join(c.Addrs, ",")
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if tls != nil {
		c.URL = "rediss+cluster://" + strings.Join(c.Addrs, ",")
		args = append(args, "--tls", "--cacert", tls.CA)
	}
	out, err := exec.CommandContext(ctx, bins.cli, args...).CombinedOutput()
	if err != nil {
		logs := c.logs()
		_ = c.Stop()
		return nil, fmt.Errorf("redislocal: %s %s: %w; output:\n%s\nlogs:\n%s", filepath.Base(bins.cli), strings.Join(args, " "), err, out, logs)
	}
	if err := c.waitOK(ctx); err != nil {
		logs := c.logs()
		_ = c.Stop()
		return nil, fmt.Errorf("redislocal: %w; logs:\n%s", err, logs)
	}
	return c, nil
}

// Stop ends the cluster's nodes (not those of one named by
// EnvClusterURL), waits until they have exited and removes their
// directories.
func (c *Cluster) Stop() error {
	var errs []error
	for _, n := range c.nodes {
		if n != nil {
			errs = append(errs, n.stop())
		}
	}
	return errors.Join(errs...)
}

// waitOK polls every node's CLUSTER INFO until each reports
// cluster_state:ok: redis-cli returns once the nodes share one
// configuration, which a node may not yet have taken as its state (a
// client routed to it then would be refused with CLUSTERDOWN).
func (c *Cluster) waitOK(ctx context.Context) error {
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		pending := ""
		for _, n := range c.nodes {
			replies, err := inline(ctx, n.addr, "CLUSTER INFO")
			if err != nil {
				pending = fmt.Sprintf("%s: %v", n.addr, err)
				break
			}
			if st := field(replies[0], "cluster_state"); st != "ok" {
				pending = fmt.Sprintf("%s reports cluster_state:%s", n.addr, st)
				break
			}
		}
		if pending == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cluster is not ok within %v (%s)", clusterTimeout, pending)
		case <-poll.C:
		}
	}
}

// logs returns every node's output, headed by its address.
func (c *Cluster) logs() string {
	var b strings.Builder
	for _, n := range c.nodes {
		fmt.Fprintf(&b, "--- %s\n%s", n.addr, n.proc.Output())
	}
	return b.String()
}

// errBind reports that redis-server exited before it answered: most
// likely a port picked was taken (redis-server exits when it cannot bind).
var errBind = errors.New("redis-server exited before it answered (port taken?)")

// startNode runs redis-server on new free ports until one answers, at most
// startAttempts times.
func startNode(ctx context.Context, server string, o nodeOpts) (*node, error) {
	var errs []error
	for range startAttempts {
		n, err := tryNode(ctx, server, o)
		if err == nil {
			return n, nil
		}
		errs = append(errs, err)
		if !errors.Is(err, errBind) {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// tryNode runs redis-server on a new free loopback port, in a new temporary
// directory, and waits until it answers. A cluster node also gets its own
// cluster bus port: by default that is the port plus 10000, which for a
// port the kernel picks may be taken, or above 65535.
func tryNode(ctx context.Context, server string, o nodeOpts) (*node, error) {
	cluster := o.cluster
	nports := 1
	if cluster {
		nports++
	}
	if o.tls != nil {
		nports++
	}
	ports, err := freePorts(nports)
	if err != nil {
		return nil, fmt.Errorf("redislocal: %w", err)
	}
	dir, err := os.MkdirTemp("", "redislocal-")
	if err != nil {
		return nil, fmt.Errorf("redislocal: %w", err)
	}
	port := strconv.Itoa(ports[0])
	args := []string{
		"--bind", "127.0.0.1", "--port", port,
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--daemonize", "no", "--protected-mode", "yes",
	}
	if cluster {
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes-"+port+".conf",
			"--cluster-port", strconv.Itoa(ports[1]),
			"--cluster-node-timeout", "5000")
	}
	n := &node{addr: "127.0.0.1:" + port, dir: dir}
	if o.tls != nil {
		tlsPort := strconv.Itoa(ports[nports-1])
		n.tlsAddr = "127.0.0.1:" + tlsPort
		args = append(args, "--tls-port", tlsPort, "--tls-cert-file", o.tls.Cert,
			"--tls-key-file", o.tls.Key, "--tls-ca-cert-file", o.tls.CA, "--tls-auth-clients", "no")
		if cluster {
			// the nodes meet over TLS, and tell clients their TLS ports
			args = append(args, "--tls-cluster", "yes")
		}
	}
	cmd := exec.Command(server, args...)
	cmd.Dir = dir
	// its output is its log: the messages' material when it fails
	if n.proc, err = child.Start(cmd); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("redislocal: start %s: %w", server, err)
	}
	if err := n.waitReady(ctx); err != nil {
		_ = n.stop()
		return nil, fmt.Errorf("redislocal: %s on %s: %w; log:\n%s", filepath.Base(server), n.addr, err, n.proc.Output())
	}
	return n, nil
}

// waitReady polls until the node answers PING and the server answering is
// our process (INFO's process_id: another test binary's server may have
// taken the port first, and ours then exits). It returns errBind if our
// process exits first.
func (n *node) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	var last error
	for {
		pid, err := serverPID(ctx, n.addr)
		switch {
		case err != nil:
			last = err
		case pid == n.proc.Pid():
			return nil
		default:
			last = fmt.Errorf("the server answering is process %d, not ours (%d)", pid, n.proc.Pid())
		}
		select {
		case <-n.proc.Exited():
			return errBind
		case <-ctx.Done():
			return fmt.Errorf("no answer to PING from our server within %v (%v)", readyTimeout, last)
		case <-poll.C:
		}
	}
}

// stop kills the node, waits until it has exited and removes its
// directory. It may be called again, and on a node that has exited of
// itself.
func (n *node) stop() error {
	n.proc.Kill()
	if err := os.RemoveAll(n.dir); err != nil {
		return fmt.Errorf("redislocal: %w", err)
	}
	return nil
}

// serverPID returns the process id of the server answering at addr, once
// it has answered PING with PONG.
func serverPID(ctx context.Context, addr string) (int, error) {
	replies, err := inline(ctx, addr, "PING", "INFO server")
	if err != nil {
		return 0, err
	}
	if replies[0] != "PONG" {
		return 0, fmt.Errorf("PING answered %q", replies[0])
	}
	pid, err := strconv.Atoi(field(replies[1], "process_id"))
	if err != nil {
		return 0, fmt.Errorf("INFO server has no process_id: %w", err)
	}
	return pid, nil
}

// inline sends commands to addr, one after another on one connection, as
// inline commands (space-separated words, no RESP framing), and returns
// their replies. It is a probe for readiness, not a client: it reads
// status, error, integer and bulk-string replies (no arrays), which is all
// that PING, INFO and CLUSTER INFO answer.
func inline(ctx context.Context, addr string, commands ...string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	r := bufio.NewReader(conn)
	replies := make([]string, 0, len(commands))
	for _, c := range commands {
		if _, err := io.WriteString(conn, c+"\r\n"); err != nil {
			return nil, err
		}
		reply, err := readReply(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c, err)
		}
		replies = append(replies, reply)
	}
	return replies, nil
}

// maxBulk bounds a bulk reply the probe reads: INFO's are a few kilobytes.
const maxBulk = 1 << 20

// readReply reads one RESP2 reply that is not an array.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("server error: %s", line[1:])
	case '$':
		size, err := strconv.Atoi(line[1:])
		if err != nil || size < 0 || size > maxBulk {
			return "", fmt.Errorf("unexpected bulk reply header %q", line)
		}
		b := make([]byte, size+2) // and its CRLF
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		return string(b[:size]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

// field returns the value of name in an INFO-style reply (name:value
// lines), or "".
func field(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), name+":"); ok {
			return v
		}
	}
	return ""
}

// binaries are the server and CLI executables the harness runs.
type binaries struct{ server, cli string }

// lookup finds redis-server and redis-cli in EnvDir, else on PATH, with
// valkey-server and valkey-cli in their stead where Redis's are absent, and
// checks that the server is Redis 7 or later.
func lookup(ctx context.Context) (binaries, error) {
	names := [...]binaries{{"redis-server", "redis-cli"}, {"valkey-server", "valkey-cli"}}
	if d := os.Getenv(EnvDir); d != "" {
		for _, n := range names {
			// LookPath with a directory in the name checks that file alone.
			s, errS := exec.LookPath(filepath.Join(d, n.server))
			c, errC := exec.LookPath(filepath.Join(d, n.cli))
			if errS == nil && errC == nil {
				return checkVersion(ctx, binaries{s, c})
			}
		}
		return binaries{}, fmt.Errorf("redislocal: %s=%s holds neither redis-server and redis-cli nor valkey-server and valkey-cli", EnvDir, d)
	}
	for _, n := range names {
		s, errS := exec.LookPath(n.server)
		c, errC := exec.LookPath(n.cli)
		if errS == nil && errC == nil {
			return checkVersion(ctx, binaries{s, c})
		}
	}
	return binaries{}, ErrNotInstalled
}

// LookupServer returns the path of the redis-server the harness would run,
// found as it finds it (in EnvDir, else on PATH; valkey-server where
// redis-server is absent; Redis 7 or later), without asking for redis-cli
// beside it: for `tollgate local up --redis`, which runs a server alone.
// Without one the error wraps ErrNotInstalled.
func LookupServer(ctx context.Context) (string, error) {
	for _, name := range [...]string{"redis-server", "valkey-server"} {
		if d := os.Getenv(EnvDir); d != "" {
			name = filepath.Join(d, name) // LookPath then checks that file alone
		}
		if s, err := exec.LookPath(name); err == nil {
			b, err := checkVersion(ctx, binaries{server: s})
			return b.server, err
		}
	}
	return "", ErrNotInstalled
}

// checkVersion returns b if its server is of version 7 or later, or says
// no version (a build that does not is taken as it is). Older ones count
// as not installed: the tests skip with instructions rather than fail on a
// command the server does not know.
func checkVersion(ctx context.Context, b binaries) (binaries, error) {
	out, err := exec.CommandContext(ctx, b.server, "--version").Output()
	if err != nil {
		return binaries{}, fmt.Errorf("redislocal: %s --version: %w", b.server, err)
	}
	// "Redis server v=7.0.15 sha=..."; Valkey's reads the same.
	_, v, ok := bytes.Cut(out, []byte(" v="))
	if !ok {
		return b, nil
	}
	major, _, _ := bytes.Cut(v, []byte("."))
	if m, err := strconv.Atoi(string(major)); err == nil && m < 7 {
		ver, _, _ := bytes.Cut(v, []byte(" "))
		return binaries{}, fmt.Errorf("%w (%s is version %s, older than 7)", ErrNotInstalled, b.server, ver)
	}
	return b, nil
}

// hostOf returns the host:port of a redis:// URL, or "" if it has none.
func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Host
}

// clusterAddrs returns the host:port list of a redis+cluster:// URL
// (net/url does not take a comma-separated host list apart).
func clusterAddrs(u string) ([]string, error) {
	rest, ok := strings.CutPrefix(u, "redis+cluster://")
	if !ok {
		return nil, fmt.Errorf("redislocal: %s=%q: want redis+cluster://host:port,host:port", EnvClusterURL, u)
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:] // user:password@
	}
	var addrs []string
	for a := range strings.SplitSeq(rest, ",") {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("redislocal: %s=%q: %w", EnvClusterURL, u, err)
		}
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// freePorts returns n distinct loopback ports free at the moment (all held
// open at once, so the kernel does not hand out one twice). redis-server
// binds them a moment later, and another process may take one in between:
// startNode then tries others.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Main runs a test binary's tests against a fresh redis-server, setting
// url before they run. Without redis-server the tests still run, and url
// stays empty: they should t.Skip with Help; on CI (CI set, and not to
// false or 0, as scripts/redis.sh reads it) that is a failure instead, so
// a missing install never passes silently.
func Main(m interface{ Run() int }, url *string) int {
	return MainCluster(m, url, nil)
}

// MainCluster is [Main] with a fresh three-master Redis Cluster as well,
// its URL set in clusterURL. Either pointer may be nil: that one is not
// started.
func MainCluster(m interface{ Run() int }, url, clusterURL *string) int {
	ctx := context.Background()
	starts := []struct {
		dst   *string
		start func() (url string, stop func() error, err error)
	}{
		{url, func() (string, func() error, error) {
			srv, err := Start(ctx)
			if err != nil {
				return "", nil, err
			}
			return srv.URL, srv.Stop, nil
		}},
		{clusterURL, func() (string, func() error, error) {
			c, err := StartCluster(ctx, 3)
			if err != nil {
				return "", nil, err
			}
			return c.URL, c.Stop, nil
		}},
	}
	var missing error
	for _, st := range starts {
		if st.dst == nil {
			continue
		}
		u, stop, err := st.start()
		switch {
		case errors.Is(err, ErrNotInstalled):
			missing = err
		case err != nil:
			fmt.Fprintln(os.Stderr, err)
			return 1
		default:
			defer stop()
			*st.dst = u
		}
	}
	if missing != nil {
		if inCI() {
			fmt.Fprintln(os.Stderr, "redislocal:", missing, "(CI is set, so this fails)")
			return 1
		}
		fmt.Fprintln(os.Stderr, "redislocal:", missing)
	}
	return m.Run()
}

// inCI reports whether CI is set as CI systems set it (CI=true), with the
// same reading as scripts/redis.sh.
func inCI() bool {
	switch os.Getenv("CI") {
	case "", "false", "False", "FALSE", "0":
		return false
	}
	return true
}
