package cli

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// An explicit flag always beats the environment; --store and --server
// exclude each other, given as flags or, without flags, as environment
// variables.
func TestFlagsBeatEnvironment(t *testing.T) {
	srv, err := server.New(memory.New(), server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); _ = srv.Close(context.Background()) })
	file := "embedded:" + filepath.Join(t.TempDir(), "t.db")
	onServer := func(id string) bool {
		code, _, _ := run(t, "", "entity", "show", id, "--server", ts.URL)
		return code == ExitOK
	}
	inFile := func(id string) bool {
		code, _, _ := run(t, "", "entity", "show", id, "--store", file)
		return code == ExitOK
	}
	want := func(code int, args ...string) {
		t.Helper()
		if got, out, errOut := run(t, "", args...); got != code {
			t.Fatalf("tollgate %v: exit %d, want %d\n%s%s", args, got, code, out, errOut)
		}
	}

	t.Setenv(EnvServer, ts.URL)
	t.Setenv(EnvStore, "")
	want(ExitOK, "entity", "create", "by-store-flag", "--store", file)
	if !inFile("by-store-flag") || onServer("by-store-flag") {
		t.Errorf("--store with %s set: the entity went to the server", EnvServer)
	}
	want(ExitOK, "entity", "create", "by-server-env")
	if !onServer("by-server-env") {
		t.Errorf("%s alone: the entity is not on the server", EnvServer)
	}

	t.Setenv(EnvServer, "")
	t.Setenv(EnvStore, file)
	want(ExitOK, "entity", "create", "by-server-flag", "--server", ts.URL)
	if !onServer("by-server-flag") || inFile("by-server-flag") {
		t.Errorf("--server with %s set: the entity went to the store", EnvStore)
	}
	// The namespace flag beats its variable too.
	t.Setenv(EnvNamespace, "no-such-namespace")
	want(ExitOK, "entity", "show", "by-store-flag", "-n", "default")
	want(ExitFailure, "entity", "show", "by-store-flag")
	t.Setenv(EnvNamespace, "")

	want(ExitUsage, "entity", "show", "x", "--store", file, "--server", ts.URL)
	t.Setenv(EnvServer, ts.URL) // and EnvStore: ambiguous without a flag
	want(ExitUsage, "entity", "show", "by-store-flag")
	want(ExitOK, "entity", "show", "by-store-flag", "--store", file)
	want(ExitOK, "entity", "show", "by-server-env", "--server", ts.URL)
	want(ExitUsage, "serve", "--server", ts.URL)
}
