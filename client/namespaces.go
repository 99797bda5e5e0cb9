package client

import (
	"context"
	"net/http"

	"github.com/tollgate-rl/tollgate/model"

	"github.com/tollgate-rl/tollgate/api"
)

// The namespace registry is not about the client's own namespace: with API
// keys, these calls need an admin key for every namespace ("*").

// RegisterNamespace creates a namespace with a new opaque id. It fails with
// model.ErrNamespaceExists if the name is taken, even by a deleted
// namespace.
func (c *Client) RegisterNamespace(ctx context.Context, name string) (model.Namespace, error) {
	var out api.Namespace
	req := request{method: http.MethodPost, path: api.Version + "/namespaces", body: api.Namespace{Name: name}}
	if err := c.do(ctx, req, &out); err != nil {
		return model.Namespace{}, err
	}
	return api.ToNamespace(out), nil
}

// ListNamespaces returns every namespace, deleted ones included, sorted by
// name.
func (c *Client) ListNamespaces(ctx context.Context) ([]model.Namespace, error) {
	var out api.NamespacesResponse
	if err := c.do(ctx, request{method: http.MethodGet, path: api.Version + "/namespaces"}, &out); err != nil {
		return nil, err
	}
	ns := make([]model.Namespace, len(out.Namespaces))
	for i, n := range out.Namespaces {
		ns[i] = api.ToNamespace(n)
	}
	return ns, nil
}

// GetNamespace returns the named namespace, or an error matching
// model.ErrNamespaceNotFound.
func (c *Client) GetNamespace(ctx context.Context, name string) (model.Namespace, error) {
	var out api.Namespace
	if err := c.do(ctx, request{method: http.MethodGet, path: namespacePath(name)}, &out); err != nil {
		return model.Namespace{}, err
	}
	return api.ToNamespace(out), nil
}

// DeleteNamespace soft-deletes a namespace: calls in it then fail with
// model.ErrNamespaceDeleted, and its data stays until PurgeNamespace.
// RecoverNamespace undoes it.
func (c *Client) DeleteNamespace(ctx context.Context, name string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: namespacePath(name)}, nil)
}

// RecoverNamespace undoes DeleteNamespace.
func (c *Client) RecoverNamespace(ctx context.Context, name string) error {
	return c.do(ctx, request{method: http.MethodPost, path: namespacePath(name) + "/recover"}, nil)
}

// PurgeNamespace deletes every item of a soft-deleted namespace, then the
// namespace itself, as tollgate.Admin.PurgeNamespace does. The server
// purges in one call: progress, if not nil, is told how many items went
// once it answers.
func (c *Client) PurgeNamespace(ctx context.Context, name string, progress func(deleted int)) error {
	var out api.PurgeResponse
	if err := c.do(ctx, request{method: http.MethodPost, path: namespacePath(name) + "/purge"}, &out); err != nil {
		return err
	}
	if progress != nil {
		progress(out.Deleted)
	}
	return nil
}

func namespacePath(name string) string { return api.Version + "/namespaces/" + seg(name) }

// Healthy reports whether the server answers (GET /healthz): nil, or an
// error matching model.ErrUnavailable.
func (c *Client) Healthy(ctx context.Context) error {
	return c.do(ctx, request{method: http.MethodGet, path: "/healthz"}, nil)
}

// Ready reports whether the server and its store answer (GET /readyz):
// nil, or an error matching model.ErrUnavailable.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, request{method: http.MethodGet, path: "/readyz"}, nil)
}
