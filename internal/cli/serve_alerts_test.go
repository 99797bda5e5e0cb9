package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/api"
)

// serve --alert-webhook posts an alert when an acquire takes an entity's
// use of a limit across its configuration's threshold (set with limits
// set --alert-at through the server); a webhook that is not an http(s)
// URL is a usage error.
func TestServeAlertWebhook(t *testing.T) {
	got := make(chan api.Alert, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a api.Alert
		if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		got <- a
	}))
	t.Cleanup(hook.Close)
	s := startServe(t, "--store", "memory:", "--alert-webhook", hook.URL)
	if code, _, errOut := run(t, "", "limits", "set", "--server", s.url, "--resource", "api", "rpm:10/min", "--alert-at", "0.8"); code != ExitOK {
		t.Fatalf("limits set: exit %d: %s", code, errOut)
	}
	resp, err := http.Post(s.url+"/v1/acquire", "application/json",
		strings.NewReader(`{"entity":"org-1","resource":"api","consume":{"rpm":9},"commit":true}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	select {
	case a := <-got:
		if a.Entity != "org-1" || a.Resource != "api" || a.Limit != "rpm" || a.Threshold != 0.8 || a.Use != 0.9 {
			t.Errorf("alert %+v, want org-1 api.rpm crossing 0.8 at 0.9", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no alert within 10s")
	}
	if code, _, errOut := run(t, "", "serve", "--store", "memory:", "--addr", "127.0.0.1:0", "--alert-webhook", "ftp://x"); code != ExitUsage ||
		!strings.Contains(errOut, "alert_webhook") {
		t.Errorf("--alert-webhook ftp://x: exit %d, stderr %q; want a usage error", code, errOut)
	}
}
