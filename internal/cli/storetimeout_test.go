package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/store/dynamodb"
)

// TestStoreTimeoutFlag: --store-timeout is the call timeout of the
// DynamoDB store every command opens (the default
// dynamodb.DefaultCallTimeout), a negative one is bad usage, and serve
// refuses one that its HTTP write timeout could cut short.
func TestStoreTimeoutFlag(t *testing.T) {
	const store = "dynamodb://t?endpoint=http://127.0.0.1:1" // never reached
	for _, timeout := range []time.Duration{0, 250 * time.Millisecond, dynamodb.DefaultCallTimeout} {
		g := &globals{store: store, storeTimeout: timeout}
		st, closeStore, err := g.openStore(context.Background(), false)
		if err != nil {
			t.Fatalf("--store-timeout %v: %v", timeout, err)
		}
		if got := st.(*dynamodb.Store).CallTimeout(); got != timeout {
			t.Errorf("--store-timeout %v: the store's call timeout is %v", timeout, got)
		}
		_ = closeStore()
	}
	if root := newRoot(&globals{}); root.PersistentFlags().Lookup("store-timeout").DefValue != dynamodb.DefaultCallTimeout.String() {
		t.Errorf("--store-timeout defaults to %s, want %v", root.PersistentFlags().Lookup("store-timeout").DefValue, dynamodb.DefaultCallTimeout)
	}

	for _, args := range [][]string{
		{"entity", "list", "--store", store, "--store-timeout", "-1s"},
		{"serve", "--store", store, "--store-timeout", "11s"},
	} {
		code, _, errOut := run(t, "", args...)
		if code != 2 || !strings.Contains(errOut, "--store-timeout") {
			t.Errorf("tollgate %s: exit %d, stderr %q; want 2 naming --store-timeout", strings.Join(args, " "), code, errOut)
		}
	}
}
