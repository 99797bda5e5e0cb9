package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/store/embedded"
)

// GET /v1/backup streams a consistent copy of an embedded store's file,
// to an admin key of every namespace only; a server without WithBackup
// answers 501 backup_unsupported; a backup failing before its first byte
// is an error answer, and after it the connection is cut.
func TestBackupRoute(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	st, err := embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	keys, err := LoadKeys(strings.NewReader(HashKey("root") + " * admin ops\n" + HashKey("nsadmin") + " default admin team\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOver(t, st, WithKeys(keys), WithBackup(st.Backup))
	get := func(key string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, e.ts.URL+api.BackupPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	e.hdr.Set("Authorization", "Bearer root")
	e.want(http.StatusOK, "PUT", "/v1/limits/resources/api", api.Limits{Limits: []string{"rpm:10/min"}}, nil)

	resp, body := get("root")
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(copyPath, body, 0o600); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/octet-stream" || len(body) == 0 {
		t.Fatalf("backup: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
	if err := embedded.Check(copyPath); err != nil {
		t.Errorf("the copy: %v", err)
	}
	if resp, body := get("nsadmin"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a namespace's admin: %d %s, want 403", resp.StatusCode, body)
	}

	mem := newEnv(t)
	var er api.Error
	mem.want(http.StatusNotImplemented, "GET", api.BackupPath, nil, &er)
	if er.Code != api.CodeUnimplemented || er.Reason != "backup_unsupported" {
		t.Errorf("a server over memory: %+v, want 501 backup_unsupported", er)
	}

	failing := newEnvOver(t, st, WithBackup(func(context.Context, io.Writer) (int64, error) {
		return 0, errors.New("disk on fire")
	}))
	failing.want(http.StatusInternalServerError, "GET", api.BackupPath, nil, &er)
	cut := newEnvOver(t, st, WithBackup(func(_ context.Context, w io.Writer) (int64, error) {
		n, _ := w.Write([]byte("half a file"))
		return int64(n), errors.New("disk on fire")
	}))
	if resp, err := http.Get(cut.ts.URL + api.BackupPath); err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Errorf("a backup failing half-way: the answer ended cleanly, want it cut")
		}
	}
}
