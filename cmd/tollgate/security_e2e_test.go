package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/server"
)

// 5,000 requests, each naming a random namespace, grow the resident memory
// of tollgate serve by less than 40 MB, with an operator key (namespace
// *) or without keys: the server keeps state only for namespaces that
// exist (docs/security.md). Before, 10,000 kept 206 MB live.
func TestRandomNamespacesDoNotGrowTheServer(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 10,000 requests to a real server")
	}
	root, hash := server.GenerateKey()
	keys := filepath.Join(t.TempDir(), "keys.txt")
	if err := os.WriteFile(keys, []byte(hash+" * admin root\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, key string
		args      []string
	}{
		{"no keys", "", nil},
		{"operator key", root, []string{"--keys", keys}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"--store", "embedded:" + filepath.Join(t.TempDir(), "t.db")}, c.args...)
			p := serve(t, nil, args...)
			send := func(n int) {
				var wg sync.WaitGroup
				for w := range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := w; i < n; i += 8 {
							req, _ := http.NewRequest("GET", p.url+"/v1/available?entity=k&resource=api&consume=bad", nil)
							req.Header.Set(api.NamespaceHeader, fmt.Sprintf("probe-%d-%d", i, os.Getpid()))
							if c.key != "" {
								req.Header.Set("Authorization", "Bearer "+c.key)
							}
							resp, err := http.DefaultClient.Do(req)
							if err != nil {
								t.Error(err)
								return
							}
							resp.Body.Close()
						}
					}()
				}
				wg.Wait()
			}
			send(500) // connections, pools and the runtime settle
			before := rss(t, p.cmd.Process.Pid)
			send(5000)
			after := rss(t, p.cmd.Process.Pid)
			t.Logf("RSS %d MB -> %d MB after 5,000 random namespaces", before>>20, after>>20)
			if after-before >= 40<<20 {
				t.Errorf("RSS grew by %d MB, want under 40", (after-before)>>20)
			}
		})
	}
}

// rss is the resident set size of process pid, in bytes (Linux).
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/pid/status")
	return 0
}
