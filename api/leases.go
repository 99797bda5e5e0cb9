package api

import "github.com/tollgate-rl/tollgate/model"

// LeaseInfo is an open durable lease in GET /v1/leases.
type LeaseInfo struct {
	LeaseID  string `json:"lease_id"`
	Entity   string `json:"entity"`
	Resource string `json:"resource"`
	// Holder names the process that acquired it.
	Holder      string `json:"holder,omitempty"`
	CreatedAtMS int64  `json:"created_at_ms,omitempty"`
	// ExpiresAtMS is when a reconciler ends it unless extended; absent:
	// never.
	ExpiresAtMS int64 `json:"expires_at_ms,omitempty"`
	// Consumed is what it holds, pending adjustments included.
	Consumed map[string]int64 `json:"consumed"`
}

// LeasesResponse answers GET /v1/leases. Next, when set, is the "after"
// parameter of the following page.
type LeasesResponse struct {
	Leases []LeaseInfo `json:"leases"`
	Next   string      `json:"next,omitempty"`
}

// FromLeaseInfos converts lease descriptions; never nil.
func FromLeaseInfos(ls []model.LeaseInfo) []LeaseInfo {
	out := make([]LeaseInfo, len(ls))
	for i, l := range ls {
		consumed := l.Consumed
		if consumed == nil {
			consumed = model.Consume{}
		}
		out[i] = LeaseInfo{LeaseID: l.ID, Entity: l.Entity, Resource: l.Resource, Holder: l.Holder,
			CreatedAtMS: model.UnixMilli(l.Created), ExpiresAtMS: model.UnixMilli(l.Expires), Consumed: consumed}
	}
	return out
}

// ToLeaseInfos converts lease descriptions back.
func ToLeaseInfos(ls []LeaseInfo) []model.LeaseInfo {
	out := make([]model.LeaseInfo, len(ls))
	for i, l := range ls {
		out[i] = model.LeaseInfo{ID: l.LeaseID, Entity: l.Entity, Resource: l.Resource, Holder: l.Holder,
			Created: model.FromUnixMilli(l.CreatedAtMS), Expires: model.FromUnixMilli(l.ExpiresAtMS), Consumed: l.Consumed}
	}
	return out
}
