package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// Stored API keys: the control plane of a server's trust boundary
// (docs/security.md).

// CreateKey creates an API key in the client's namespace (an admin key's
// call) and returns its secret, which the server does not keep: hand it
// over once. It fails with model.ErrKeyExists if the namespace has a key
// of that name. ExpiresIn is sent in whole seconds, rounded up.
func (c *Client) CreateKey(ctx context.Context, spec model.KeySpec, opts ...model.WriteOption) (secret string, k model.Key, err error) {
	body := api.CreateKeyRequest{Name: spec.Name, Role: string(spec.Role), Entity: spec.Entity, AllowLimits: spec.AllowLimits,
		ExpiresInS: int64((spec.ExpiresIn + time.Second - 1) / time.Second)}
	var out api.CreatedKey
	req, err := changing(request{method: http.MethodPost, path: api.Version + "/keys", body: body}, opts)
	if err != nil {
		return "", model.Key{}, err
	}
	if err := c.do(ctx, req, &out); err != nil {
		return "", model.Key{}, err
	}
	return out.Secret, api.ToKey(out.KeyInfo), nil
}

// Keys returns up to limit (at most model.MaxKeyPage; 0 means the
// server's default of 100) stored keys of the client's namespace whose
// names sort after after, sorted by name, without secrets or hashes.
func (c *Client) Keys(ctx context.Context, after string, limit int) ([]model.Key, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out api.KeysResponse
	if err := c.do(ctx, request{method: http.MethodGet, path: api.Version + "/keys", query: q}, &out); err != nil {
		return nil, err
	}
	ks := make([]model.Key, len(out.Keys))
	for i, k := range out.Keys {
		ks[i] = api.ToKey(k)
	}
	return ks, nil
}

// RevokeKey deletes the stored key named name: every server over the
// store refuses it within its refresh interval. It fails with
// model.ErrKeyNotFound if there is no such key.
func (c *Client) RevokeKey(ctx context.Context, name string, opts ...model.WriteOption) error {
	req, err := changing(request{method: http.MethodDelete, path: api.Version + "/keys/" + url.PathEscape(name)}, opts)
	if err != nil {
		return err
	}
	return c.do(ctx, req, nil)
}
