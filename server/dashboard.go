package server

import (
	"net/http"

	"github.com/tollgate-rl/tollgate/server/ui"
)

// The dashboard (package ui) at /ui/: its files are public, its data comes
// from the API behind the key. Its routes are not part of API v1, so
// api/openapi.json leaves them out (see servedRoutes in openapi_test.go).

// sessionPath answers the dashboard's sign-in: whether the key is an admin
// key, and where it reaches.
const sessionPath = ui.Prefix + "session"

// rootPattern is the server's root, which sends a browser to the dashboard.
const rootPattern = "GET /{$}"

// dashboardRoutes registers the dashboard's files, its sign-in check, and
// the root's redirect to it (302: where the root leads may change).
func (s *Server) dashboardRoutes() {
	s.register("GET "+ui.Prefix, forEveryone)
	s.mux.Handle("GET "+ui.Prefix, ui.Handler())
	s.register(rootPattern, forEveryone)
	s.mux.Handle(rootPattern, http.RedirectHandler(ui.Prefix, http.StatusFound))
	s.handle("GET "+sessionPath, forAdmin, s.session)
}

// sessionResponse answers GET /ui/session.
type sessionResponse struct {
	// Principal names the key's holder ("" without keys).
	Principal string `json:"principal"`
	// Namespace is the one the key works in when a request names none.
	Namespace string `json:"namespace"`
	// AllNamespaces is set for a key of namespace "*" (and when the
	// server has no keys): it may list and pick any namespace.
	AllNamespaces bool `json:"all_namespaces"`
	// KeysRequired is false when the server runs without keys.
	KeysRequired bool `json:"keys_required"`
}

// session answers an admin key (any key when the server has none) with
// what the dashboard needs to know of it; any other key is refused as the
// API refuses it (401 or 403), which the page shows.
func (s *Server) session(w http.ResponseWriter, _ *http.Request, c *call) error {
	resp := sessionResponse{Principal: c.principal, Namespace: c.ns, AllNamespaces: true, KeysRequired: c.key != nil}
	if c.key != nil {
		resp.AllNamespaces = c.key.Namespace == AnyNamespace
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}
