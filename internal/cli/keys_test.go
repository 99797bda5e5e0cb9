package cli

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// Stored keys on a store: created with the secret shown once (-o json:
// the key's object), listed without it, revoked; a reset refills.
func TestKeysOnAStore(t *testing.T) {
	c := newCLI(t)
	var created api.CreatedKey
	decode(t, c.want(ExitOK, "keys", "create", "--name", "gw", "--role", "acquire", "--entity", "org-1", "--expires-in", "30d", "-o", "json"), &created)
	if !strings.HasPrefix(created.Secret, "tg_") || created.Name != "gw" || created.Entity != "org-1" ||
		created.ExpiresAtMS-created.CreatedAtMS != 30*24*3600*1000 {
		t.Fatalf("created %+v", created)
	}
	out := c.want(ExitOK, "keys", "list")
	if !strings.Contains(out, "gw") || !strings.Contains(out, "org-1") || strings.Contains(out, created.Secret) {
		t.Errorf("keys list:\n%s", out)
	}
	c.want(ExitFailure, "keys", "create", "--name", "gw", "--role", "read") // taken
	c.want(ExitUsage, "keys", "create", "--name", "x", "--role", "root")
	c.want(ExitOK, "keys", "revoke", "gw")
	c.want(ExitFailure, "keys", "revoke", "gw")
	if out := c.want(ExitOK, "keys", "list"); strings.Contains(out, "gw") {
		t.Errorf("revoked key still listed:\n%s", out)
	}
	audit := c.want(ExitOK, "audit", "list")
	if !strings.Contains(audit, "key.create") || !strings.Contains(audit, "key.revoke") {
		t.Errorf("audit:\n%s", audit)
	}

	c.want(ExitOK, "limits", "set", "--resource", "api", "rpm:5/hour")
	c.want(ExitOK, "acquire", "-e", "k", "-r", "api", "-c", "rpm=5")
	c.want(ExitRateLimited, "acquire", "-e", "k", "-r", "api", "-c", "rpm=1")
	if out := c.want(ExitOK, "reset", "-e", "k", "-r", "api", "--reason", "test"); !strings.Contains(out, "5") {
		t.Errorf("reset printed:\n%s", out)
	}
	c.want(ExitOK, "acquire", "-e", "k", "-r", "api", "-c", "rpm=5")
}

// Through a server, key management needs an admin key of the namespace,
// and a created key works at once.
func TestKeysThroughServer(t *testing.T) {
	admin, hash := server.GenerateKey()
	keys, err := server.LoadKeys(strings.NewReader(hash + " default admin ops\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(memory.New(), server.WithKeys(keys), server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close(context.Background())
	via := func(code int, key string, args ...string) string {
		t.Helper()
		got, out, errOut := run(t, "", append(args, "--server", ts.URL, "--api-key", key)...)
		if got != code {
			t.Fatalf("tollgate %s: exit %d, want %d\n%s%s", strings.Join(args, " "), got, code, out, errOut)
		}
		return out
	}
	var created api.CreatedKey
	decode(t, via(ExitOK, admin, "keys", "create", "--name", "reader", "--role", "read", "-o", "json"), &created)
	via(ExitOK, created.Secret, "entity", "list")
	via(ExitFailure, created.Secret, "keys", "list") // an admin's call
	if out := via(ExitOK, admin, "keys", "list"); !strings.Contains(out, "reader") {
		t.Errorf("keys list:\n%s", out)
	}
	via(ExitOK, admin, "keys", "revoke", "reader")
	via(ExitFailure, created.Secret, "entity", "list")
}

// A store holding a key is enough to serve beyond loopback without
// --keys: the server authenticates with the stored keys (before the key,
// serve refuses such an address).
func TestServeBeyondLoopbackWithAStoredKey(t *testing.T) {
	c := newCLI(t)
	if code, _, errOut := run(t, "", "serve", "--store", c.store, "--addr", "0.0.0.0:0"); code != ExitUsage || !strings.Contains(errOut, "not a loopback address") {
		t.Fatalf("serve beyond loopback with no key: exit %d, want %d: %s", code, ExitUsage, errOut)
	}
	var created api.CreatedKey
	decode(t, c.want(ExitOK, "keys", "create", "--name", "ops", "--role", "admin", "-o", "json"), &created)
	s := startServe(t, "--store", c.store, "--addr", "0.0.0.0:0")
	for _, tt := range []struct {
		key  string
		want int
	}{{"", http.StatusUnauthorized}, {created.Secret, http.StatusOK}} {
		req, err := http.NewRequest("GET", s.url+"/v1/entities", nil)
		if err != nil {
			t.Fatal(err)
		}
		if tt.key != "" {
			req.Header.Set("Authorization", "Bearer "+tt.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET /v1/entities with key %q: %d, want %d", tt.key, resp.StatusCode, tt.want)
		}
	}
}
