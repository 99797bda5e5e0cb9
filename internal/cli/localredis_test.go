package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/internal/redislocal"
)

// needRedisServer skips the test without a redis-server, with
// redislocal.Help; on CI (CI set, and not to false or 0, as redislocal.Main
// reads it) it fails instead.
func needRedisServer(t *testing.T) {
	t.Helper()
	_, err := redislocal.LookupServer(context.Background())
	if err == nil {
		return
	}
	switch os.Getenv("CI") {
	case "", "false", "False", "FALSE", "0":
		if errors.Is(err, redislocal.ErrNotInstalled) {
			t.Skip(redislocal.Help)
		}
	}
	t.Fatal(err)
}

// tollgate local up --redis starts a redis-server that outlives the
// command, the store URL it prints works with --store, status reports it,
// down stops it, and its data stays in --dir for the next up.
func TestLocalRedis(t *testing.T) {
	needRedisServer(t)
	dir := t.TempDir()
	up := func() redisState {
		t.Helper()
		code, out, errOut := run(t, "", "local", "up", "--redis", "--port", "0", "--dir", dir, "-o", "json")
		var st redisState
		if err := json.Unmarshal([]byte(out), &st); code != ExitOK || err != nil {
			t.Fatalf("local up --redis: exit %d, want 0 and the state (%v)\nstdout: %s\nstderr: %s", code, err, out, errOut)
		}
		// If the test stops half-way, the server must not outlive it.
		t.Cleanup(func() {
			if redisRuns(context.Background(), st) {
				_ = syscall.Kill(st.PID, syscall.SIGKILL)
			}
		})
		if want := "redis://127.0.0.1:" + strconv.Itoa(st.Port); st.URL != want || st.PID == 0 {
			t.Fatalf("local up --redis: %+v, want the URL %s and a pid", st, want)
		}
		return st
	}
	acquire := func(st redisState, want int) {
		t.Helper()
		code, out, errOut := run(t, "", "acquire", "-e", "key-1", "-r", "api", "-c", "rpm=1", "-l", "rpm:2/hour", "--store", st.URL)
		if code != want {
			t.Fatalf("acquire --store %s: exit %d, want %d\nstdout: %s\nstderr: %s", st.URL, code, want, out, errOut)
		}
	}
	down := func(st redisState) {
		t.Helper()
		code, out, errOut := run(t, "", "local", "down", "--redis", "--dir", dir)
		if code != ExitOK || !strings.Contains(out, "stopped") {
			t.Fatalf("local down --redis: exit %d, want 0 and stopped\nstdout: %s\nstderr: %s", code, out, errOut)
		}
		// down returns once the server no longer takes connections, and
		// the process ends right after.
		if answers(st.Port) {
			t.Errorf("port %d still answers after local down --redis", st.Port)
		}
		deadline := time.After(10 * time.Second)
		poll := time.NewTicker(10 * time.Millisecond)
		defer poll.Stop()
		for processAlive(st.PID) {
			select {
			case <-deadline:
				t.Fatalf("redis-server (pid %d) still runs 10s after local down --redis", st.PID)
			case <-poll.C:
			}
		}
	}

	st := up()
	acquire(st, ExitOK)
	acquire(st, ExitOK)
	if again := up(); again != st {
		t.Errorf("a second local up --redis: %+v, want the running server %+v", again, st)
	}
	code, out, errOut := run(t, "", "local", "status", "--redis", "--dir", dir)
	if code != ExitOK || !strings.Contains(out, st.URL) || !strings.Contains(out, "true") {
		t.Errorf("local status --redis: exit %d, want 0, the URL and true\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	down(st)
	code, out, errOut = run(t, "", "local", "status", "--redis", "--dir", dir)
	if code != ExitFailure || !strings.Contains(errOut, "not running") {
		t.Errorf("local status --redis after down: exit %d, want %d and not running\nstdout: %s\nstderr: %s", code, ExitFailure, out, errOut)
	}

	// The two units acquired are in the append-only file: the next server
	// in the same --dir denies a third.
	st = up()
	acquire(st, ExitRateLimited)
	down(st)
}

// Without redis-server, up --redis says how to get one.
func TestLocalRedisNotInstalled(t *testing.T) {
	t.Setenv(redislocal.EnvDir, t.TempDir()) // the only place looked in
	code, out, errOut := run(t, "", "local", "up", "--redis", "--port", "0", "--dir", t.TempDir())
	if code != ExitFailure || !strings.Contains(errOut, "scripts/redis.sh install") || !strings.Contains(errOut, "apt-get install redis-server") {
		t.Errorf("local up --redis without redis-server: exit %d, want %d and how to install it\nstdout: %s\nstderr: %s", code, ExitFailure, out, errOut)
	}
}

// A port another program holds is reported, before anything is started.
func TestLocalRedisPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	code, out, errOut := run(t, "", "local", "up", "--redis", "--port", port, "--dir", t.TempDir())
	if code != ExitFailure || !strings.Contains(errOut, "port "+port+" is taken") {
		t.Errorf("local up --redis on a taken port: exit %d, want %d and the port taken\nstdout: %s\nstderr: %s", code, ExitFailure, out, errOut)
	}
}
