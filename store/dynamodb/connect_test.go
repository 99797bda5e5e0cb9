package dynamodb

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"

	"github.com/tollgate-rl/tollgate"
)

// Connect goes through the standard AWS configuration chain, as users do:
// credentials from the environment (and, on machines that set one, a custom
// CA bundle, which needs an HTTP client the chain can configure).
func TestConnectThroughConfigurationChain(t *testing.T) {
	if endpoint == "" {
		t.Skip("no DynamoDB Local")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "tollgate")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	if _, err := os.Stat(systemCABundle); err == nil {
		t.Setenv("AWS_CA_BUNDLE", systemCABundle) // Connect used to fail with one set
	}
	ctx := context.Background()
	st, err := Connect(ctx, ConnectConfig{Table: "tollgate-connect-" + randomHex(4), Region: "us-east-1", Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Admin().CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	defer st.Admin().DeleteTable(ctx)
	lim, err := tollgate.New(st)
	if err != nil {
		t.Fatal(err)
	}
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 2))
	for range 2 {
		lease, err := lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1}, limits)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1}, limits); !errors.Is(err, tollgate.ErrRateLimited) {
		t.Errorf("third acquire: %v, want rate limited", err)
	}
}

const systemCABundle = "/etc/ssl/certs/ca-certificates.crt"

// withoutAWSConfig clears every AWS_* variable for the test, and points
// the shared files away from the user's ~/.aws (the SDK computes their
// default paths once per process, so HOME would not do) to credentialsFile
// (returned; not there yet) and a config file that does not exist. The
// configuration chain then finds no credentials and no region, and falls
// through to the EC2 instance metadata service (AWS_EC2_METADATA_DISABLED
// is cleared too).
func withoutAWSConfig(t *testing.T) (credentialsFile string) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_") {
			t.Setenv(k, "") // restored after the test
			os.Unsetenv(k)
		}
	}
	dir := t.TempDir()
	credentialsFile = filepath.Join(dir, "credentials")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", credentialsFile)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	return credentialsFile
}

// Connect to DynamoDB Local with no AWS configuration at all, as a Go
// program on a developer's machine does: the local credentials and region,
// at once, not the instance metadata service's seconds of retries.
func TestConnectLoopbackWithoutCredentials(t *testing.T) {
	if endpoint == "" {
		t.Skip("no DynamoDB Local")
	}
	withoutAWSConfig(t)
	ctx := context.Background()
	start := time.Now()
	st, err := Connect(ctx, ConnectConfig{Table: "tollgate-connect-" + randomHex(4), Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Admin().CheckTable(ctx); !errors.Is(err, ErrTableNotFound) {
		t.Fatalf("CheckTable of a table not made yet: %v, want ErrTableNotFound (an answer of DynamoDB Local)", err)
	}
	if d := time.Since(start); d >= 2*time.Second {
		t.Errorf("Connect and a first call took %v, want < 2s", d)
	}
	if err := st.Admin().CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	defer st.Admin().DeleteTable(ctx)
	lim, err := tollgate.New(st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1}, tollgate.WithLimits(tollgate.PerMinute("rpm", 2))); err != nil {
		t.Fatal(err)
	}
}

// What Connect's client signs with, for each configuration: the local
// credentials only for a loopback endpoint and a chain that found nothing;
// credentials the user set, for a proxy on the loopback address, are kept.
// Nothing here calls the network.
func TestConnectCredentials(t *testing.T) {
	const local, imds = "local", "(instance metadata)"
	cases := []struct {
		name     string
		env      map[string]string
		profile  string // the shared credentials file
		endpoint string
		wantKey  string
		region   string
	}{
		{name: "127.0.0.1", endpoint: "http://127.0.0.1:8000", wantKey: local, region: "us-east-1"},
		{name: "127.0.0.2", endpoint: "http://127.0.0.2:8000", wantKey: local, region: "us-east-1"},
		{name: "::1", endpoint: "http://[::1]:8000", wantKey: local, region: "us-east-1"},
		{name: "localhost", endpoint: "http://LocalHost:8000", wantKey: local, region: "us-east-1"},
		{name: "a region set", env: map[string]string{"AWS_REGION": "eu-west-1"}, endpoint: "http://localhost:8000", wantKey: local, region: "eu-west-1"},
		{name: "keys in the environment", env: map[string]string{"AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "s"}, endpoint: "http://127.0.0.1:8000", wantKey: "AKIDENV", region: "us-east-1"},
		{name: "a default profile", profile: "[default]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = s\n", endpoint: "http://127.0.0.1:8000", wantKey: "AKIDPROFILE", region: "us-east-1"},
		{name: "another host", endpoint: "http://dynamodb.internal:8000", wantKey: imds},
		{name: "AWS", endpoint: "", wantKey: imds},
		{name: "a name that is not localhost", endpoint: "http://localhost.example.com:8000", wantKey: imds},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			credentialsFile := withoutAWSConfig(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			if c.profile != "" {
				if err := os.WriteFile(credentialsFile, []byte(c.profile), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			st, err := Connect(context.Background(), ConnectConfig{Table: "t", Endpoint: c.endpoint})
			if err != nil {
				t.Fatal(err)
			}
			o := st.Client().Options()
			if c.wantKey == imds {
				if !aws.IsCredentialsProvider(o.Credentials, (*ec2rolecreds.Provider)(nil)) {
					t.Errorf("credentials %T, want the chain's (instance metadata) left alone", o.Credentials)
				}
				return
			}
			creds, err := o.Credentials.Retrieve(context.Background())
			if err != nil || creds.AccessKeyID != c.wantKey {
				t.Errorf("access key %q (%v), want %q", creds.AccessKeyID, err, c.wantKey)
			}
			if o.Region != c.region {
				t.Errorf("region %q, want %q", o.Region, c.region)
			}
		})
	}
}
