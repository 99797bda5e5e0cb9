package dynamodb

import (
	"context"
	"errors"
	"os"
	"testing"

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
	if err := st.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	defer st.DeleteTable(ctx)
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
