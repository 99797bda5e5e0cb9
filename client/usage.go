package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/tollgate-rl/tollgate/model"

	"github.com/tollgate-rl/tollgate/api"
)

// usageValues encodes a usage query as the server reads it.
func usageValues(q model.UsageQuery) url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("entity", q.Entity)
	set("resource", q.Resource)
	set("window", string(q.Window))
	set("after", q.After)
	if !q.From.IsZero() {
		v.Set("from", strconv.FormatInt(q.From.UnixMilli(), 10))
	}
	if !q.To.IsZero() {
		v.Set("to", strconv.FormatInt(q.To.UnixMilli(), 10))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// Usage lists usage snapshots like tollgate.Admin.Usage. A zero From or To
// takes the server's default (the last 24 hours, or 30 days for daily
// windows).
func (c *Client) Usage(ctx context.Context, q model.UsageQuery) ([]model.Usage, string, error) {
	var out api.UsageResponse
	if err := c.do(ctx, request{method: http.MethodGet, path: api.Version + "/usage", query: usageValues(q)}, &out); err != nil {
		return nil, "", err
	}
	us := make([]model.Usage, len(out.Usage))
	for i, u := range out.Usage {
		us[i] = model.Usage{Entity: u.Entity, Resource: u.Resource, Window: model.Window(u.Window),
			Start: time.UnixMilli(u.StartMS).UTC(), Consumed: u.Consumed, Events: u.Events}
	}
	return us, out.Next, nil
}

// UsageSummary totals usage like tollgate.Admin.UsageSummary.
func (c *Client) UsageSummary(ctx context.Context, q model.UsageQuery) (model.UsageSummary, error) {
	var out api.UsageSummary
	if err := c.do(ctx, request{method: http.MethodGet, path: api.Version + "/usage/summary", query: usageValues(q)}, &out); err != nil {
		return model.UsageSummary{}, err
	}
	sum := model.UsageSummary{Windows: out.Windows, Events: out.Events, Limits: map[string]model.LimitUsage{}}
	for name, l := range out.Limits {
		sum.Limits[name] = model.LimitUsage{Total: l.Total, Average: l.Average, Peak: l.Peak, PeakStart: time.UnixMilli(l.PeakStartMS).UTC()}
	}
	return sum, nil
}

// Capacity reports a resource's capacity and use like tollgate.Admin.Capacity.
func (c *Client) Capacity(ctx context.Context, resource string) (model.ResourceCapacity, error) {
	var out api.Capacity
	q := url.Values{"resource": {resource}}
	if err := c.do(ctx, request{method: http.MethodGet, path: api.Version + "/capacity", query: q}, &out); err != nil {
		return model.ResourceCapacity{}, err
	}
	return api.ToCapacity(out), nil
}

// TopDenied returns at most n (1 to api.MaxTopDenied) of the entities the
// server refused most in the client's namespace, most refused first, of
// resource and limit when they are not empty (GET /v1/metrics/top-denied).
// Each server answers for the decisions it took: behind a load balancer,
// this is one replica's view.
func (c *Client) TopDenied(ctx context.Context, resource, limit string, n int) ([]api.DeniedEntity, error) {
	q := url.Values{"n": {strconv.Itoa(n)}}
	if resource != "" {
		q.Set("resource", resource)
	}
	if limit != "" {
		q.Set("limit", limit)
	}
	var out api.TopDeniedResponse
	if err := c.do(ctx, request{method: http.MethodGet, path: api.TopDeniedPath, query: q}, &out); err != nil {
		return nil, err
	}
	return out.Entities, nil
}
