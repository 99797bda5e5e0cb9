package ui_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/tollgate-rl/tollgate/aggregator"
	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// The dashboard in a real browser: Debian's chromium, headless, driven
// over the DevTools protocol (chromedp), against a real server on
// loopback. `make test` installs chromium (scripts/install-chromium.sh);
// without it this test skips, unless CI is set.

// installHint is what to run when chromium is missing.
const installHint = "scripts/install-chromium.sh (as root: apt-get install -y chromium)"

// browserPath returns the browser to drive: TOLLGATE_CHROMIUM, else
// chromium (or chromium-browser, google-chrome) on PATH.
func browserPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TOLLGATE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium found (nor TOLLGATE_CHROMIUM); install it with " + installHint
	if ci := strings.ToLower(os.Getenv("CI")); ci != "" && ci != "false" && ci != "0" {
		t.Fatal(msg + " (CI is set, so this fails)")
	}
	t.Skip(msg)
	return ""
}

// screenshotPath is TOLLGATE_UI_SCREENSHOT, else .cache/artifacts/ui.png
// at the root of the module.
func screenshotPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TOLLGATE_UI_SCREENSHOT"); p != "" {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".cache", "artifacts", "ui.png")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// fixture is a server with entities, limits, usage, a lease and a
// reservation, and its keys.
type fixture struct {
	url, admin, reader, leaseID string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	admin, adminHash := server.GenerateKey()
	reader, readerHash := server.GenerateKey()
	keys, err := server.LoadKeys(strings.NewReader(adminHash + " * admin ops\n" + readerHash + " * read auditor\n"))
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.New()
	rec := aggregator.NewRecorder(mem, mem)
	srv, err := server.New(rec, server.WithKeys(keys), server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	f := fixture{url: ts.URL, admin: admin, reader: reader}

	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(answer)
	}
	call := func(method, path, body string) string {
		t.Helper()
		code, answer := do(method, path, body)
		if code/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, code, answer)
		}
		return answer
	}
	call("POST", "/v1/entities", `{"id":"org-1","name":"Acme"}`)
	call("POST", "/v1/entities", `{"id":"key-1","name":"checkout","parent_id":"org-1","cascade":true,"metadata":{"team":"checkout"}}`)
	call("PUT", "/v1/limits/resources/openai%2Fgpt-4o", `{"limits":["rph:3/hour","tpm:10000/min","tok:1000000/month@UTC"],"shadow":["tpm"]}`)
	call("PUT", "/v1/limits/entities/org-1", `{"limits":["rph:100/hour","tpm:200000/hour"],"alert_at":[0.8,1]}`)
	call("PUT", "/v1/limits/resources/emr", `{"limits":["clusters:2/reserved"]}`)
	acquire := `{"entity":"key-1","resource":"openai/gpt-4o","consume":{"rph":1,"tpm":1200}`
	call("POST", "/v1/acquire", acquire+`,"commit":true}`)
	lease := call("POST", "/v1/acquire", acquire+`}`)
	call("POST", "/v1/acquire", acquire+`,"commit":true}`)
	if code, answer := do("POST", "/v1/acquire", acquire+`}`); code != http.StatusTooManyRequests { // rph:3/hour: refused
		t.Fatalf("a fourth acquire: %d %s, want 429", code, answer)
	}
	_, after, _ := strings.Cut(lease, `"lease_id":"`)
	f.leaseID, _, _ = strings.Cut(after, `"`)
	call("POST", "/v1/reservations", `{"entity":"key-1","resource":"emr","id":"j-2AXXXXXXGAPLF","consume":{"clusters":1},"ttl_ms":3600000}`)
	call("POST", "/v1/namespaces", `{"name":"team-a"}`)
	if err := rec.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestDashboardInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("a real browser: not in -short")
	}
	browser := browserPath(t)
	start := time.Now()
	f := newFixture(t)
	shot := screenshotPath(t)

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(browser),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1200),
	)
	defer cancelAlloc()
	var mu sync.Mutex
	var problems []string // exceptions and policy violations in the page
	tab, cancelTab := chromedp.NewContext(alloc, chromedp.WithListener(func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			desc := d.Text
			if d.Exception != nil {
				desc += " " + d.Exception.Description
			}
			problems = append(problems, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber+1, desc))
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError && ev.Entry.Source != cdplog.EntrySourceNetwork {
				problems = append(problems, fmt.Sprintf("console %s: %s", ev.Entry.Source, ev.Entry.Text))
			}
		}
	}))
	defer cancelTab()
	if _, err := chromedp.Call(tab, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("starting %s: %v", browser, err)
	}

	// step runs actions within a time bound; on failure it saves a
	// screenshot of the page as it was, for the log.
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(tab, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, actions...); err != nil {
			saveScreenshot(t, tab, shot)
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("%s: %v (page problems: %v; screenshot %s)", what, err, problems, shot)
		}
	}
	text := func(sel string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(tab, 10*time.Second)
		defer cancel()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	// until waits for a JavaScript condition on the page.
	until := func(expr string) chromedp.Action[chromedp.Void] {
		return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond))(ctx, tg)
			return chromedp.Void{}, err
		}
	}
	// js runs a script on the page.
	js := func(expr string) chromedp.Action[chromedp.Void] {
		return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Evaluate[any](expr)(ctx, tg)
			return chromedp.Void{}, err
		}
	}
	rowsWith := func(table, s string) string {
		return fmt.Sprintf(`[...document.querySelectorAll(%q)].some(r => r.textContent.includes(%q))`, table+" tbody tr", s)
	}

	// A key that is not an admin key is refused, and says why.
	step("open the sign-in form",
		chromedp.Navigate(f.url+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#login-form")),
		chromedp.SendKeys(chromedp.CSS("#key"), f.reader),
		chromedp.Click(chromedp.CSS(`#login-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#login-error")),
	)
	if msg := text("#login-error"); !strings.Contains(msg, "needs role admin") {
		t.Errorf("the read key's refusal says %q, want it to say an admin key is needed", msg)
	}
	if visible := text("#dash"); visible != "" {
		t.Errorf("the dashboard shows %q to a read key", visible)
	}

	// The admin key opens it: the tree, with the child under its parent and
	// the limits beside them.
	step("sign in as admin",
		chromedp.SendKeys(chromedp.CSS("#key"), f.admin),
		chromedp.Click(chromedp.CSS(`#login-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#dash")),
		chromedp.WaitVisible(chromedp.CSS(`#tree li[data-entity="org-1"] > ul > li[data-entity="key-1"]`)),
		until(`document.querySelectorAll("#ns option").length === 2`),
	)
	if tree := text(`#tree li[data-entity="org-1"]`); !strings.Contains(tree, "rph:100/hour") || !strings.Contains(tree, "Acme") {
		t.Errorf("org-1 in the tree reads %q, want its name and limits", tree)
	}
	step("the limits table", until(rowsWith("#limits", "rph:3/hour, tpm:10000/min (shadow)")))
	step("alert thresholds in the limits table", until(rowsWith("#limits", "rph:100/hour, tpm:200000/hour; alerts at 80%, 100%")))
	step("the entities refused most", until(`[...document.querySelectorAll("#denied tbody tr")].some(r => `+
		`[...r.cells].map(c => c.textContent).join(" ") === "key-1 openai/gpt-4o rph 1")`))

	// The child's buckets: its own and, by cascade, its parent's, with the
	// fill and the retry-after of an exhausted limit (3 an hour: it stays
	// exhausted while the test runs).
	bucket := `#buckets tr[data-bucket="key-1/openai/gpt-4o"][data-limit="rph"]`
	step("the child's buckets",
		chromedp.Click(chromedp.CSS(`#tree button[data-entity="key-1"]`)),
		until(`document.getElementById("entity-title").textContent === "key-1"`),
		until(`document.getElementById("entity-info").textContent.includes("org-1")`),
		chromedp.SetValue(chromedp.CSS("#resource"), "openai/gpt-4o"),
		chromedp.Click(chromedp.CSS(`#resource-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(bucket+" .retry.waiting")),
		chromedp.WaitVisible(chromedp.CSS(`#buckets tr[data-bucket="org-1/openai/gpt-4o"][data-limit="rph"] svg.fill`)),
	)
	if row := text(bucket); !strings.Contains(row, "0 / 3") || strings.Contains(row, "now") {
		t.Errorf("key-1's rph bucket reads %q, want 0 / 3 and a retry-after", row)
	}
	if row := text(`#buckets tr[data-bucket="key-1/openai/gpt-4o"][data-limit="tpm"]`); !strings.Contains(row, "/ 10,000") {
		t.Errorf("key-1's tpm bucket reads %q, want its capacity of 10,000", row)
	}

	// A calendar quota's bucket says when it resets: next month's start
	// (UTC in the tooltip; the server runs on the wall clock, so a month
	// may have ended since the fixture: either start will do); other
	// limits say nothing of it.
	quota := `#buckets tr[data-bucket="key-1/openai/gpt-4o"][data-limit="tok"]`
	if row := text(quota); !strings.Contains(row, "1,000,000 / 1,000,000") || !strings.Contains(row, "resets ") {
		t.Errorf("key-1's tok quota reads %q, want it full and when it resets", row)
	}
	ctx, cancel := context.WithTimeout(tab, 10*time.Second)
	title, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(quota+" .resets"), "title"))
	cancel()
	if err != nil {
		t.Fatalf("the quota's reset time: %v", err)
	}
	if title.Value != nextMonth(start) && title.Value != nextMonth(time.Now()) {
		t.Errorf("the quota resets at %q, want %q", title.Value, nextMonth(time.Now()))
	}
	if row := text(bucket); strings.Contains(row, "resets") {
		t.Errorf("key-1's rph bucket reads %q: a rate limit does not reset", row)
	}

	// Usage as bars, reservations, open leases, the audit log and a lease.
	step("usage, reservations, leases, audit",
		until(`document.querySelectorAll("#usage-chart svg.usage rect.bar").length >= 24`),
		until(`[...document.querySelectorAll("#usage-chart rect.bar")].some(b => Number(b.dataset.value) > 0)`),
		until(rowsWith("#reservations", "j-2AXXXXXXGAPLF")),
		until(rowsWith("#leases", f.leaseID)),
		until(rowsWith("#audit", "entity.create")),
	)
	step("look up the lease",
		chromedp.SendKeys(chromedp.CSS("#lease-id"), f.leaseID),
		chromedp.Click(chromedp.CSS(`#lease-form button[type="submit"]`)),
		until(fmt.Sprintf(`document.getElementById("lease").textContent.includes(%q)`, f.leaseID)),
	)
	// consumed is what the caller asked (rph 1), not its cascade's sum.
	if row := text("#leases"); strings.Count(row, "openai/gpt-4o") != 1 || !strings.Contains(row, "rph: 1,") {
		t.Errorf("the open leases read %q, want the one lease with the rph of 1 it asked for", row)
	}
	if l := text("#lease"); !strings.Contains(l, "open") || !strings.Contains(l, "rph: ") {
		t.Errorf("the lease reads %q, want open and its consumption", l)
	}
	saveScreenshot(t, tab, shot)
	t.Logf("screenshot: %s", shot)

	// Another namespace: its own (empty) data, through the namespace header.
	step("switch namespace",
		chromedp.SetValue(chromedp.CSS("#ns"), "team-a"),
		js(`document.getElementById("ns").dispatchEvent(new Event("change"))`),
		chromedp.WaitVisible(chromedp.CSS("#tree-empty")),
	)

	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("the page reported %s", p)
	}
}

// nextMonth is the start of the month after t's, UTC, as JavaScript's
// Date.toISOString writes it.
func nextMonth(t time.Time) string {
	t = t.UTC()
	return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC).Format("2006-01-02T15:04:05.000Z")
}

func saveScreenshot(t *testing.T, tab context.Context, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Logf("screenshot: %v", err)
	}
}
