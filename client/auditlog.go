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

// AuditLog returns a page of the namespace's whole audit log in time
// order, as tollgate.Admin.AuditLog: GET /v1/audit/log (an admin key's
// call). q is checked here first, as the library checks it.
func (c *Client) AuditLog(ctx context.Context, q model.AuditQuery) ([]model.AuditEvent, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	v := url.Values{}
	if !q.Since.IsZero() {
		v.Set("since", strconv.FormatInt(q.Since.UnixMilli(), 10))
	}
	if !q.Until.IsZero() {
		v.Set("until", strconv.FormatInt(q.Until.UnixMilli(), 10))
	}
	if q.After != "" {
		v.Set("after", q.After)
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return c.auditEvents(ctx, "/audit/log", v)
}

// SetAuditRetention sets how long the named namespace keeps its audit
// events, as tollgate.Admin.SetAuditRetention:
// PUT /v1/namespaces/{name}/audit-retention.
func (c *Client) SetAuditRetention(ctx context.Context, name string, d time.Duration) error {
	if err := model.ValidateAuditRetention(d); err != nil {
		return err
	}
	body := api.AuditRetention{AuditRetentionS: int64(d / time.Second)}
	return c.do(ctx, request{method: http.MethodPut, path: namespacePath(name) + "/audit-retention", body: body}, nil)
}
