package server

import (
	"context"
	"net/http"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// The namespace routes, served by the server's admin: they are not about
// any one namespace.

func (s *Server) registerNamespace(w http.ResponseWriter, r *http.Request, _ *call) error {
	var body api.Namespace
	if err := decode(w, r, &body); err != nil {
		return err
	}
	n, err := s.admin.RegisterNamespace(r.Context(), body.Name)
	if err == nil {
		s.forget(n.Name) // it may have cached that the name is not registered
	}
	return answer(w, http.StatusCreated, n, err, api.FromNamespace)
}

func (s *Server) listNamespaces(w http.ResponseWriter, r *http.Request, _ *call) error {
	ns, err := s.admin.ListNamespaces(r.Context())
	return answer(w, http.StatusOK, ns, err, namespacesResponse)
}

func namespacesResponse(ns []tollgate.Namespace) api.NamespacesResponse {
	out := api.NamespacesResponse{Namespaces: make([]api.Namespace, len(ns))}
	for i, n := range ns {
		out.Namespaces[i] = api.FromNamespace(n)
	}
	return out
}

func (s *Server) getNamespace(w http.ResponseWriter, r *http.Request, _ *call) error {
	n, err := s.admin.GetNamespace(r.Context(), r.PathValue("name"))
	return answer(w, http.StatusOK, n, err, api.FromNamespace)
}

// namespaceOp runs a registry change on the namespace named in the path
// and drops its cached limiter, so this server's next calls in it see the
// change at once.
func (s *Server) namespaceOp(w http.ResponseWriter, r *http.Request, op func(context.Context, string) error) error {
	name := r.PathValue("name")
	err := op(r.Context(), name)
	if err == nil {
		s.forget(name)
	}
	return noContent(w, err)
}

// deleteNamespace soft-deletes a namespace. Its open leases are records
// in the store and stay as they are: while it is deleted they answer
// lease_not_found and no reconciler looks at them; a recover brings them
// back, a purge deletes them with the rest of its data.
func (s *Server) deleteNamespace(w http.ResponseWriter, r *http.Request, _ *call) error {
	if r.PathValue("name") == model.DefaultNamespace {
		return model.Invalid("name", model.DefaultNamespace, "the default namespace cannot be deleted")
	}
	return s.namespaceOp(w, r, s.admin.DeleteNamespace)
}

func (s *Server) recoverNamespace(w http.ResponseWriter, r *http.Request, _ *call) error {
	return s.namespaceOp(w, r, s.admin.RecoverNamespace)
}

// purgeNamespace may run for minutes: it extends the connection's read
// and write deadlines (HTTPServer's timeouts would otherwise cut it off,
// cancelling its context) to PurgeTimeout, which also bounds it.
func (s *Server) purgeNamespace(w http.ResponseWriter, r *http.Request, _ *call) error {
	rc := http.NewResponseController(w)
	deadline := time.Now().Add(PurgeTimeout)
	// Errors mean the writer has no deadlines to move (e.g. in tests).
	_ = rc.SetReadDeadline(deadline)
	_ = rc.SetWriteDeadline(deadline)
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	name := r.PathValue("name")
	deleted := 0
	if err := s.admin.PurgeNamespace(ctx, name, func(n int) { deleted = n }); err != nil {
		return err
	}
	s.forget(name)
	writeJSON(w, http.StatusOK, api.PurgeResponse{Deleted: deleted})
	return nil
}
