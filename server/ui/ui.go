// Package ui is Tollgate's web dashboard: static HTML, JavaScript and CSS,
// embedded in the binary, that `tollgate serve` answers at /ui/. The page
// reads the HTTP API (/v1/...) with an admin key the user types in; it
// writes nothing.
//
// The files themselves are public, as /v1/openapi.json is: they hold no
// data and no secret, and a browser cannot send a bearer key with a page
// load. Every piece of data the page shows comes from the API, behind the
// key.
package ui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// Prefix is the path the dashboard is served under.
const Prefix = "/ui/"

// ContentSecurityPolicy is the policy of every answer of Handler: the
// page's own files only (no inline script or style, no other origin), and
// no framing.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// contentTypes maps the extensions of the embedded files to their media
// types, so that nothing depends on the host's MIME tables.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// Handler serves the dashboard's files under Prefix: GET and HEAD only
// (anything else is 405 with Allow), Prefix itself is index.html, and any
// other path, a directory among them, is 404. Every answer carries the
// security headers (Content-Security-Policy, nosniff, no framing, no
// referrer). Should the embedded files be unreadable (a broken build), every
// request is answered 500 with the reason.
func Handler() http.Handler {
	h := &handler{files: map[string]file{}}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ctype, ok := contentTypes[path.Ext(p)]
		if !ok {
			return nil // not served
		}
		data, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		h.files[strings.TrimPrefix(p, "static/")] = file{data: string(data), ctype: ctype,
			etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		h.broken = err
	}
	return h
}

// file is one embedded file as served.
type file struct {
	data, ctype, etag string
}

// handler serves the files by name: only files are in the map, so a
// directory is never listed.
type handler struct {
	files  map[string]file
	broken error // why the embedded files could not be read, or nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", ContentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if h.broken != nil {
		http.Error(w, "dashboard files unreadable: "+h.broken.Error(), http.StatusInternalServerError)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if name == "" {
		name = "index.html"
	}
	f, found := h.files[name]
	if !ok || !found {
		http.NotFound(w, r)
		return
	}
	hdr.Set("Content-Type", f.ctype)
	hdr.Set("ETag", f.etag)
	// The files change with the binary: revalidate (the ETag makes that
	// cheap) rather than keep a stale page after an upgrade.
	hdr.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, time.Time{}, strings.NewReader(f.data))
}
