package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

// Leases lists the open durable leases of the namespace (every lease the
// server hands out is durable), of entity if it is not empty and then of
// resource if that is not empty, sorted by id: up to limit (1 to 1000)
// whose ids follow after ("": the start), and the after of the next page
// ("" when there is none), as tollgate.Admin.Leases. Reservations are
// listed by Reservations.
func (c *Client) Leases(ctx context.Context, entity, resource, after string, limit int) ([]model.LeaseInfo, string, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	for k, v := range map[string]string{"entity": entity, "resource": resource, "after": after} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var resp api.LeasesResponse
	if err := c.do(ctx, request{method: http.MethodGet, path: api.Version + "/leases", query: q}, &resp); err != nil {
		return nil, "", err
	}
	return api.ToLeaseInfos(resp.Leases), resp.Next, nil
}
