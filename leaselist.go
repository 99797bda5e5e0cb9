package tollgate

import (
	"context"
	"strconv"
	"time"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// LeaseInfo describes an open durable lease. See model.LeaseInfo.
type LeaseInfo = model.LeaseInfo

// Leases lists the open durable leases of the namespace that are not
// reservations (Reservations lists those), sorted by id: of entity if it
// is not empty, and then of resource if that is not empty; up to limit (1
// to store.MaxLeasePage) whose ids follow after ("": the start), and the
// after of the next page ("" when there is none). It reads the records,
// for operators and dashboards: a lease held in one process alone (a
// rate-only lease without WithDurableLease) has none and is not listed.
func (a *Admin) Leases(ctx context.Context, entity, resource, after string, limit int) ([]LeaseInfo, string, error) {
	if err := checkLeaseQuery(entity, resource, after, limit); err != nil {
		return nil, "", err
	}
	ns, err := a.namespaceID(ctx)
	if err != nil {
		return nil, "", err
	}
	q := store.LeaseQuery{Entity: entity, Resource: resource, After: after}
	return listRecords(ctx, a.store, ns, q, limit, "list leases", func(rec *store.LeaseRecord) (LeaseInfo, string, bool, bool) {
		if isReservation(rec.ID) {
			return LeaseInfo{}, "", false, false
		}
		return leaseInfo(rec), rec.ID, true, false
	})
}

// listRecords lists, of the lease records q selects in id order, up to
// limit that pick takes, and the after of the next page ("" when there is
// none). pick returns a record's value and its cursor, and take false to
// skip it; done stops the listing at a record no later one can follow.
func listRecords[T any](ctx context.Context, st store.Leases, ns string, q store.LeaseQuery, limit int, op string,
	pick func(rec *store.LeaseRecord) (v T, cursor string, take, done bool)) ([]T, string, error) {
	var out []T
	last := ""
	for {
		// One more than the page wants tells whether another follows.
		q.Limit = min(limit-len(out)+1, store.MaxLeasePage)
		recs, next, err := st.ListLeases(ctx, ns, q)
		if err != nil {
			return nil, "", storeErr(ctx, op, q.Entity, err)
		}
		for i := range recs {
			v, cursor, take, done := pick(&recs[i])
			if done {
				return out, "", nil
			}
			if !take {
				continue
			}
			if len(out) == limit {
				return out, last, nil
			}
			out, last = append(out, v), cursor
		}
		if next == "" {
			return out, "", nil
		}
		q.After = next
	}
}

// leaseInfo describes rec, its consumption counted as a resumed lease
// counts it.
func leaseInfo(rec *store.LeaseRecord) LeaseInfo {
	info := LeaseInfo{ID: rec.ID, Entity: rec.Entity, Resource: rec.Resource, Holder: rec.Holder,
		Created: time.UnixMilli(rec.Created)}
	if rec.Expires > 0 {
		info.Expires = time.UnixMilli(rec.Expires)
	}
	var d leaseData
	d.resume(rec)
	info.Consumed = d.consumed()
	return info
}

// checkLeaseQuery checks the arguments of Leases.
func checkLeaseQuery(entity, resource, after string, limit int) error {
	if entity != "" {
		if err := model.ValidateEntityID(entity); err != nil {
			return err
		}
	}
	if resource != "" {
		if entity == "" {
			return model.Invalid("resource", resource, "narrows an entity's leases: name the entity too")
		}
		if err := model.ValidateResource(resource); err != nil {
			return err
		}
	}
	if after != "" {
		if err := model.ValidateLeaseID(after); err != nil {
			return model.Invalid("after", after, "not a lease id")
		}
	}
	if limit < 1 || limit > store.MaxLeasePage {
		return model.Invalid("limit", strconv.Itoa(limit), "must be 1 to "+strconv.Itoa(store.MaxLeasePage))
	}
	return nil
}
