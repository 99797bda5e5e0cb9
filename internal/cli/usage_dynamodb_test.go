package cli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/internal/ddblocal"
	"github.com/tollgate-rl/tollgate/store/dynamodb/stream"
)

// dynamoStoreURL starts a DynamoDB Local for the test and returns the URL
// of a table there, created by tollgate deploy, with no AWS configuration
// in the environment: the CLI signs with dynamodb.Connect's local
// credentials, as on a developer's machine.
func dynamoStoreURL(t *testing.T) string {
	t.Helper()
	srv, err := ddblocal.Start(context.Background())
	switch {
	case errors.Is(err, ddblocal.ErrNotInstalled) && os.Getenv("CI") == "":
		t.Skip(ddblocal.Help)
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	url := "dynamodb://tollgate-usage-" + time.Now().Format("150405.000000") + "?endpoint=" + srv.Endpoint
	if code, out, errOut := run(t, "", "deploy", "--store", url); code != ExitOK {
		t.Fatalf("deploy: exit %d\n%s\n%s", code, out, errOut)
	}
	return url
}

// On a DynamoDB table no aggregator has marked, usage list and summary
// print their empty answer, say why it is empty, and exit 1; once an
// aggregator has marked the table, an empty answer is only that.
func TestUsageWithoutAggregator(t *testing.T) {
	url := dynamoStoreURL(t)
	// A freshly started DynamoDB Local on a loaded machine may take more
	// than the default second: this test is about the hint.
	slow := "--store-timeout=10s"
	const hint = "no aggregator has written usage snapshots to this table: run tollgate aggregator or deploy the Lambda (docs/aggregator.md)"
	code, out, errOut := run(t, "", "usage", "list", "-e", "key-1", "--store", url, slow)
	if code != ExitFailure || !strings.Contains(errOut, hint) || !strings.Contains(out, "START") {
		t.Errorf("usage list: exit %d, want %d, the table and the hint\nstdout: %s\nstderr: %s", code, ExitFailure, out, errOut)
	}
	code, out, errOut = run(t, "", "usage", "summary", "-r", "api", "--store", url, slow, "-o", "json")
	var sum api.UsageSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil || code != ExitFailure || !strings.Contains(errOut, hint) {
		t.Errorf("usage summary -o json: exit %d, want %d, one JSON summary (%v) and the hint\nstdout: %s\nstderr: %s", code, ExitFailure, err, out, errOut)
	}

	// What tollgate aggregator and the Lambda function write when they
	// start.
	spec, err := parseStoreURL(url)
	if err != nil {
		t.Fatal(err)
	}
	st, err := openDynamoDB(context.Background(), spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.WriteAggregatorMark(context.Background(), st, "test"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"usage", "list", "-e", "key-1"}, {"usage", "summary", "-e", "key-1"}} {
		if code, out, errOut := run(t, "", append(args, "--store", url, slow)...); code != ExitOK || strings.Contains(errOut, "aggregator") {
			t.Errorf("%s on a marked table: exit %d, want 0 and no hint\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
		}
	}
}
