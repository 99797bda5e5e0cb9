package cli

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// entityCLI runs entity commands against one target: a store file or a
// server.
type entityCLI func(code int, args ...string) string

// entityTargets returns the two targets' runners, failing t.
func entityTargets(t *testing.T) map[string]entityCLI {
	srv, err := server.New(memory.New(), server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	runner := func(target ...string) entityCLI {
		return func(code int, args ...string) string {
			t.Helper()
			got, out, errOut := run(t, "", append(args, target...)...)
			if got != code {
				t.Fatalf("tollgate %s: exit %d, want %d\n%s%s", strings.Join(args, " "), got, code, out, errOut)
			}
			return out
		}
	}
	return map[string]entityCLI{
		"store":  runner("--store", newCLI(t).store),
		"server": runner("--server", ts.URL),
	}
}

func TestEntityListAndUpdate(t *testing.T) {
	for _, name := range []string{"store", "server"} {
		t.Run(name, func(t *testing.T) {
			tg := entityTargets(t)[name]
			for _, args := range [][]string{
				{"org-a", "--name", "A"}, {"org-b"}, {"key-1", "--parent", "org-a", "--cascade", "--meta", "team=x"},
			} {
				tg(ExitOK, append([]string{"entity", "create"}, args...)...)
			}
			var page api.EntitiesResponse
			decode(t, tg(ExitOK, "entity", "list", "-o", "json"), &page)
			if ids := apiEntityIDs(page.Entities); !slices.Equal(ids, []string{"key-1", "org-a", "org-b"}) || page.Next != "" {
				t.Errorf("entity list = %v next %q", ids, page.Next)
			}
			decode(t, tg(ExitOK, "entity", "list", "--limit", "1", "--after", "key-1", "-o", "json"), &page)
			if ids := apiEntityIDs(page.Entities); !slices.Equal(ids, []string{"org-a"}) || page.Next != "org-a" {
				t.Errorf("entity list --limit 1 --after key-1 = %v next %q", ids, page.Next)
			}
			if out := tg(ExitOK, "entity", "list"); !strings.Contains(out, "org-b") || !strings.Contains(out, "PARENT") {
				t.Errorf("entity list (table) = %q", out)
			}

			steps := []struct {
				args []string
				code int
				want api.Entity // checked when code is ExitOK
			}{
				{[]string{"key-1", "--parent", "org-b"}, ExitOK, api.Entity{ID: "key-1", ParentID: "org-b", Cascade: true, Metadata: map[string]string{"team": "x"}}},
				{[]string{"key-1", "--no-cascade", "--name", "Key"}, ExitOK, api.Entity{ID: "key-1", Name: "Key", ParentID: "org-b", Metadata: map[string]string{"team": "x"}}},
				{[]string{"key-1", "--cascade", "--meta", "team=y"}, ExitOK, api.Entity{ID: "key-1", Name: "Key", ParentID: "org-b", Cascade: true, Metadata: map[string]string{"team": "y"}}},
				{[]string{"key-1", "--parent", ""}, ExitOK, api.Entity{ID: "key-1", Name: "Key", Metadata: map[string]string{"team": "y"}}},
				{[]string{"org-a", "--parent", "key-1"}, ExitOK, api.Entity{ID: "org-a", Name: "A", ParentID: "key-1"}},
				{[]string{"key-1", "--parent", "org-a"}, ExitFailure, api.Entity{}}, // a cycle
				{[]string{"key-1", "--parent", "ghost"}, ExitFailure, api.Entity{}}, // no such parent
				{[]string{"ghost", "--name", "x"}, ExitFailure, api.Entity{}},
				{[]string{"key-1"}, ExitUsage, api.Entity{}}, // nothing to change
				{[]string{"key-1", "--cascade", "--no-cascade"}, ExitUsage, api.Entity{}},
			}
			for _, st := range steps {
				out := tg(st.code, append([]string{"entity", "update", "-o", "json"}, st.args...)...)
				if st.code != ExitOK {
					continue
				}
				var got api.EntitiesResponse
				decode(t, out, &got)
				if len(got.Entities) != 1 {
					t.Fatalf("entity update %v printed %s", st.args, out)
				}
				g := got.Entities[0]
				g.CreatedAtMS = 0
				if g.ID != st.want.ID || g.Name != st.want.Name || g.ParentID != st.want.ParentID || g.Cascade != st.want.Cascade || !mapsEqual(g.Metadata, st.want.Metadata) {
					t.Errorf("entity update %v = %+v, want %+v", st.args, g, st.want)
				}
			}
		})
	}
}

func apiEntityIDs(es []api.Entity) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
