package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func serve(t *testing.T, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

// checkSecurityHeaders checks the headers every answer carries.
func checkSecurityHeaders(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	for name, want := range map[string]string{
		"Content-Security-Policy": ContentSecurityPolicy,
		"X-Content-Type-Options":  "nosniff",
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "no-referrer",
	} {
		if got := resp.Header.Get(name); got != want {
			t.Errorf("%s: %s %q, want %q", what, name, got, want)
		}
	}
}

func TestCSP(t *testing.T) {
	for _, want := range []string{"default-src 'self'", "frame-ancestors 'none'", "script-src 'self'", "style-src 'self'"} {
		if !strings.Contains(ContentSecurityPolicy, want) {
			t.Errorf("policy %q lacks %q", ContentSecurityPolicy, want)
		}
	}
	if strings.Contains(ContentSecurityPolicy, "unsafe-") {
		t.Errorf("policy %q allows something unsafe", ContentSecurityPolicy)
	}
}

func TestServesFiles(t *testing.T) {
	cases := []struct{ path, ctype, contains string }{
		{"/ui/", "text/html; charset=utf-8", `<script type="module" src="app.js"></script>`},
		{"/ui/index.html", "text/html; charset=utf-8", "<title>Tollgate dashboard</title>"},
		{"/ui/app.js", "text/javascript; charset=utf-8", "signIn()"},
		{"/ui/chart.js", "text/javascript; charset=utf-8", "export function usageChart"},
		{"/ui/style.css", "text/css; charset=utf-8", ":root"},
	}
	for _, c := range cases {
		resp := serve(t, http.MethodGet, c.path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", c.path, resp.StatusCode)
			continue
		}
		if got := resp.Header.Get("Content-Type"); got != c.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", c.path, got, c.ctype)
		}
		if !strings.Contains(string(body), c.contains) {
			t.Errorf("GET %s: body lacks %q", c.path, c.contains)
		}
		if resp.Header.Get("ETag") == "" || resp.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s: ETag %q, Cache-Control %q", c.path, resp.Header.Get("ETag"), resp.Header.Get("Cache-Control"))
		}
		checkSecurityHeaders(t, "GET "+c.path, resp)
	}
	head := serve(t, http.MethodHead, "/ui/")
	if body, _ := io.ReadAll(head.Body); head.StatusCode != http.StatusOK || len(body) != 0 ||
		head.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("HEAD /ui/: %d, %d bytes, Content-Type %q", head.StatusCode, len(body), head.Header.Get("Content-Type"))
	}
}

// No page may carry a script or style the policy would block: every
// script is a file of the page's own, and no element has a style
// attribute or an inline event handler.
func TestNoInlineCode(t *testing.T) {
	body, _ := io.ReadAll(serve(t, http.MethodGet, "/ui/").Body)
	html := string(body)
	for _, bad := range []string{"<style", " style=", " onclick=", " onload=", " onsubmit=", "javascript:", "<script>"} {
		if strings.Contains(html, bad) {
			t.Errorf("index.html holds %q, which the policy blocks", bad)
		}
	}
	if n := strings.Count(html, "<script"); n != strings.Count(html, `<script type="module" src="`) {
		t.Errorf("index.html: %d scripts, not all of them files", n)
	}
	for _, f := range []string{"app.js", "api.js", "dom.js", "views.js", "chart.js"} {
		js, _ := io.ReadAll(serve(t, http.MethodGet, "/ui/"+f).Body)
		for _, bad := range []string{"innerHTML", "eval(", "new Function", `setAttribute("style"`, "http://", "https://"} {
			if strings.Contains(strings.ReplaceAll(string(js), "http://www.w3.org/2000/svg", ""), bad) {
				t.Errorf("%s holds %q", f, bad)
			}
		}
		// A write would be a method other than GET.
		for _, method := range []string{`"POST"`, `"PUT"`, `"PATCH"`, `"DELETE"`} {
			if strings.Contains(string(js), method) {
				t.Errorf("%s sends %s: the dashboard is read-only", f, method)
			}
		}
	}
}

func TestNotFound(t *testing.T) {
	for _, p := range []string{"/ui/nothing.html", "/ui/static/index.html", "/ui/../ui.go", "/ui/ui.go", "/ui/index.html/", "/elsewhere"} {
		resp := serve(t, http.MethodGet, p)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
		checkSecurityHeaders(t, "GET "+p, resp)
	}
}

// A directory is never listed: the handler serves files by name only.
func TestNoDirectoryListing(t *testing.T) {
	for _, p := range []string{"/ui/static/", "/ui/static", "/ui/."} {
		resp := serve(t, http.MethodGet, p)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "app.js") {
			t.Errorf("GET %s: %d, body %q; want 404 and no listing", p, resp.StatusCode, body)
		}
	}
}

func TestMethodNotAllowed(t *testing.T) {
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
		resp := serve(t, m, "/ui/")
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /ui/: %d, Allow %q; want 405, Allow GET, HEAD", m, resp.StatusCode, resp.Header.Get("Allow"))
		}
		checkSecurityHeaders(t, m+" /ui/", resp)
	}
}

func TestConditionalGet(t *testing.T) {
	etag := serve(t, http.MethodGet, "/ui/app.js").Header.Get("ETag")
	req := httptest.NewRequest(http.MethodGet, "/ui/app.js", nil)
	req.Header.Set("If-None-Match", etag)
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("GET with If-None-Match %s: %d, want 304", etag, rec.Code)
	}
}
