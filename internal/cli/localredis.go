package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/internal/ddblocal"
	"github.com/tollgate-rl/tollgate/internal/redislocal"
	storeredis "github.com/tollgate-rl/tollgate/store/redis"
)

// redisState is what "local up --redis" leaves for "down --redis" and
// "status --redis", in <dir>/redis-state.json (DynamoDB Local's is
// <dir>/state.json).
type redisState struct {
	PID  int    `json:"pid"`
	Port int    `json:"port"`
	Data string `json:"data"` // redis-server's --dir: its append-only file
	URL  string `json:"url"`  // the store URL, redis://127.0.0.1:PORT
}

// Where "local --redis" keeps its files, in --dir.
const (
	redisStateFile = "redis-state.json"
	redisLogFile   = "redis.log"
	redisDataDir   = "redis"
)

// redisDefaultPort is --port's default with --redis.
const redisDefaultPort = 6379

// redisTimeout bounds the wait for redis-server to answer after its start
// (it replays its append-only file first) and to exit after SIGTERM (it
// writes that file out first).
const redisTimeout = 30 * time.Second

// errRedisExited is redis-server ending before it answered, e.g. because
// its port was taken.
var errRedisExited = errors.New("redis-server exited at start")

// errRedisNotInstalled replaces redislocal's message, which is about the
// tests.
var errRedisNotInstalled = errors.New("no redis-server of Redis 7 or later, nor Valkey's valkey-server, in $" +
	redislocal.EnvDir + " if set, else on PATH: run scripts/redis.sh install, or install Redis 7+ or Valkey " +
	"(Debian 12+, Ubuntu 24.04+: sudo apt-get install redis-server; macOS: brew install redis), then run tollgate local up --redis again")

// defaultRedisDir is --dir's default with --redis: the directory above
// DynamoDB Local's, so that its files are <cache>/tollgate/redis-state.json,
// redis.log and redis/.
func defaultRedisDir() string { return filepath.Dir(defaultLocalDir()) }

// redisUpCommand is the command that starts the server in dir, for
// messages.
func redisUpCommand(dir string) string {
	if dir == defaultRedisDir() {
		return "tollgate local up --redis"
	}
	return "tollgate local up --redis --dir " + dir
}

// redisUp starts redis-server on port of 127.0.0.1 (0: a free one) with its
// data in dir, or returns the one already running there.
func redisUp(ctx context.Context, dir string, port int) (redisState, error) {
	if st, err := readRedisState(dir); err == nil && redisRuns(ctx, st) {
		return st, nil // already up
	}
	if port != 0 && answers(port) {
		return redisState{}, fmt.Errorf("port %d is taken by another program (a Redis service already running? "+
			"then use it: --store redis://127.0.0.1:%d; or stop it, or choose another port with --port, 0 for any free one)", port, port)
	}
	server, err := redislocal.LookupServer(ctx)
	if errors.Is(err, redislocal.ErrNotInstalled) {
		return redisState{}, errRedisNotInstalled
	}
	if err != nil {
		return redisState{}, err
	}
	// A port picked here may be taken before redis-server binds it: pick
	// another.
	for attempt := 1; ; attempt++ {
		p := port
		if port == 0 {
			if p, err = ddblocal.FreePort(); err != nil {
				return redisState{}, err
			}
		}
		st, err := startRedis(ctx, server, dir, p)
		if err == nil {
			data, _ := json.Marshal(st)
			return st, os.WriteFile(filepath.Join(dir, redisStateFile), data, 0o644)
		}
		if port != 0 || !errors.Is(err, errRedisExited) || attempt == 3 {
			return redisState{}, err
		}
	}
}

// startRedis starts server on port in the background, in a session of its
// own so that it outlives this command, with its append-only file in
// dir/redis and its log in dir/redis.log, and waits until it answers.
func startRedis(ctx context.Context, server, dir string, port int) (redisState, error) {
	st := redisState{Port: port, Data: filepath.Join(dir, redisDataDir), URL: "redis://127.0.0.1:" + strconv.Itoa(port)}
	if err := os.MkdirAll(st.Data, 0o755); err != nil {
		return redisState{}, err
	}
	logf, err := os.Create(filepath.Join(dir, redisLogFile))
	if err != nil {
		return redisState{}, err
	}
	defer logf.Close()
	srv := exec.Command(server,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--protected-mode", "yes",
		"--daemonize", "no", "--appendonly", "yes", "--dir", st.Data)
	srv.Dir = st.Data
	srv.Stdout, srv.Stderr = logf, logf
	srv.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this command and its terminal
	if err := srv.Start(); err != nil {
		return redisState{}, fmt.Errorf("start %s: %w", server, err)
	}
	st.PID = srv.Process.Pid
	exited := make(chan struct{})
	go func() { _ = srv.Wait(); close(exited) }()
	deadline := time.NewTimer(redisTimeout)
	defer deadline.Stop()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		// The server answering must be ours: another may hold the port.
		if redisRuns(ctx, st) {
			return st, nil
		}
		select {
		case <-exited:
			return redisState{}, fmt.Errorf("%w on port %d (%s); see %s", errRedisExited, port, lastLine(logf.Name()), logf.Name())
		case <-deadline.C:
			_ = srv.Process.Kill()
			return redisState{}, fmt.Errorf("redis-server did not answer on port %d within %v; see %s", port, redisTimeout, logf.Name())
		case <-ctx.Done():
			_ = srv.Process.Kill()
			return redisState{}, ctx.Err()
		case <-poll.C:
		}
	}
}

// redisDown stops the server that "up --redis" started in dir with
// SIGTERM (it writes its append-only file out, then exits), waits until it
// has, and removes the state file. It signals nothing but that server: if
// another process answers on its port, or none does, the state is stale.
func redisDown(ctx context.Context, g *globals, dir string) error {
	st, err := readRedisState(dir)
	if err != nil {
		return err
	}
	msg := "Redis stopped (its data stays in " + st.Data + ")"
	if redisRuns(ctx, st) {
		if err := syscall.Kill(st.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("stop redis-server (pid %d): %w", st.PID, err)
		}
		if !waitRedisExit(ctx, st) {
			return fmt.Errorf("redis-server (pid %d) did not exit within %v of SIGTERM; see %s (kill -9 %d ends it, its last writes possibly lost)",
				st.PID, redisTimeout, filepath.Join(dir, redisLogFile), st.PID)
		}
	} else {
		msg = fmt.Sprintf("Redis was not running (no redis-server of pid %d answers on port %d)", st.PID, st.Port)
	}
	if err := os.Remove(filepath.Join(dir, redisStateFile)); err != nil {
		return err
	}
	fmt.Fprintln(g.stdout, msg)
	return nil
}

// waitRedisExit polls until the process has exited, or no longer accepts
// connections on its port (the last thing redis-server does before it
// exits, its data written), at most redisTimeout.
func waitRedisExit(ctx context.Context, st redisState) bool {
	deadline := time.NewTimer(redisTimeout)
	defer deadline.Stop()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		if !processAlive(st.PID) || !answers(st.Port) {
			return true
		}
		select {
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		case <-poll.C:
		}
	}
}

// redisStatus reports whether the server "up --redis" started in dir runs:
// its process alive and answering on its port.
func redisStatus(ctx context.Context, g *globals, dir string) error {
	st, err := readRedisState(dir)
	if err != nil {
		return err
	}
	running := redisRuns(ctx, st)
	if err := g.printRedis(st, running); err != nil {
		return err
	}
	if !running {
		return reportedError{fmt.Errorf("redis-server (pid %d) does not answer on port %d; see %s, and start it again with: %s",
			st.PID, st.Port, filepath.Join(dir, redisLogFile), redisUpCommand(dir))}
	}
	return nil
}

func readRedisState(dir string) (redisState, error) {
	var st redisState
	data, err := os.ReadFile(filepath.Join(dir, redisStateFile))
	if errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("redis-server is not running (start it with: %s)", redisUpCommand(dir))
	}
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(data, &st)
}

// redisRuns reports whether the server answering at st.URL is process
// st.PID.
func redisRuns(ctx context.Context, st redisState) bool {
	pid, err := redisPID(ctx, st.URL)
	return err == nil && pid == st.PID
}

// redisPID returns the process id (INFO server's process_id) of the server
// at url, once it has answered PING: a server still loading its data
// answers PING with an error.
func redisPID(ctx context.Context, url string) (int, error) {
	co, err := storeredis.ClientOption(url)
	if err != nil {
		return 0, err
	}
	co.Dialer.Timeout = time.Second
	co.ConnWriteTimeout = 2 * time.Second
	co.DisableRetry = true
	c, err := rueidis.NewClient(co)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		return 0, err
	}
	info, err := c.Do(ctx, c.B().Info().Section("server").Build()).ToString()
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

// processAlive reports whether process pid exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// lastLine returns the last line of the file that is not blank, for
// messages: redis-server's log ends with why it stopped.
func lastLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	last := "its log is empty"
	for s := bufio.NewScanner(f); s.Scan(); {
		if l := strings.TrimSpace(s.Text()); l != "" {
			last = l
		}
	}
	return last
}

func (g *globals) printRedis(st redisState, running bool) error {
	return g.printOut(st, func(w *tabwriter.Writer) {
		row(w, "URL", "PID", "RUNNING", "DATA")
		row(w, st.URL, st.PID, running, st.Data)
		// Lines without a tab: cells of no column, which they would widen.
		fmt.Fprintln(w)
		fmt.Fprintln(w, "store URL:  "+st.URL)
		fmt.Fprintln(w, "serve with: tollgate serve --store "+st.URL)
	})
}
