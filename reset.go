package tollgate

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Reset refills limits of entity's bucket for resource to capacity, for
// every process sharing the store: it lifts a penalty (Penalize) and
// forgives debt and consumption. It is an operator's undo, recorded in the
// audit log (model.ActionLimitReset) with the reason, the limits and the
// principal given by WithPrincipal, in the same atomic step as the refill.
// Only the entity's own bucket is refilled, not its cascade ancestors'.
//
// The limits are those the bucket holds, with the parameters it holds
// them under (whether they came from stored limits or WithLimits); none
// named means every refilling limit of the bucket. A named limit the
// bucket does not hold, or one time does not refill (a concurrency or
// reserved limit, given back only by ending the leases that hold it: a
// reset would admit more than the limit), is a *ValidationError. A bucket
// that does not exist is full: only the event is written.
func (a *Admin) Reset(ctx context.Context, entity, resource, reason string, limits []string, opts ...WriteOption) error {
	if err := checkReset(entity, resource, reason, limits); err != nil {
		return err
	}
	now := nanoOf(a.clock.Now())
	ns, err := a.namespaceID(ctx)
	if err != nil {
		return err
	}
	key := store.BucketKey{Entity: entity, Resource: resource}
	recs, err := a.store.ReadBuckets(ctx, ns, []store.BucketKey{key})
	if err != nil {
		return storeErr(ctx, "reset", entity+"/"+resource, err)
	}
	b := store.BucketRequest{Key: key}
	if rec := recs[0]; rec != nil {
		if b.Limits, err = resetLimits(rec, key, limits); err != nil {
			return err
		}
	}
	details := map[string]string{"limits": strings.Join(limits, ",")}
	if len(limits) == 0 {
		details["limits"] = "*"
	}
	if reason != "" {
		details["reason"] = reason
	}
	ev, err := a.auditEvent(model.ActionLimitReset, entity, resource, details, opts)
	if err != nil {
		return err
	}
	err = a.store.Reset(ctx, ns, &store.ResetRequest{Now: now.milli(), Bucket: b, Event: &ev})
	a.changes.resets.Add(1) // after an error too: the reset may have been written
	return storeErr(ctx, "reset", entity+"/"+resource, err)
}

// maxResetNames bounds the limits one Reset names: a bucket holds few.
const maxResetNames = 64

// checkReset checks what Reset's caller passed.
func checkReset(entity, resource, reason string, names []string) error {
	if err := model.ValidateEntityID(entity); err != nil {
		return err
	}
	if err := model.ValidateResource(resource); err != nil {
		return err
	}
	if len(reason) > model.MaxReasonLen {
		return model.Invalid("reason", reason[:64]+"...", "longer than "+strconv.Itoa(model.MaxReasonLen)+" bytes")
	}
	if len(names) > maxResetNames {
		return model.Invalid("limits", "", "more than "+strconv.Itoa(maxResetNames)+" limits")
	}
	for _, n := range names {
		if err := model.ValidateLimitName(n); err != nil {
			return err
		}
	}
	return nil
}

// resetLimits lists the limits of rec, the bucket key's record, with the
// named ones checked (every refilling one if none is named). Hidden limits
// (a backend's, named with a leading underscore) are left alone.
func resetLimits(rec *store.Record, key store.BucketKey, names []string) ([]store.LimitRequest, error) {
	var out []store.LimitRequest
	for _, l := range rec.Limits {
		if strings.HasPrefix(l.Name, "_") {
			continue
		}
		check := len(names) == 0 && l.Params.Refills() || slices.Contains(names, l.Name)
		if check && !l.Params.Refills() {
			return nil, model.Invalid("limits", l.Name, "concurrency or reserved limit "+strconv.Quote(l.Name)+
				" cannot be reset: its tokens come back when the leases holding them end, and a reset would admit more than the limit")
		}
		out = append(out, store.LimitRequest{Name: l.Name, Params: l.Params, Check: check})
	}
	for _, n := range names {
		if !slices.ContainsFunc(out, func(lr store.LimitRequest) bool { return lr.Name == n }) {
			return nil, model.Invalid("limits", n, "bucket "+key.Entity+"/"+key.Resource+" holds no limit named "+strconv.Quote(n))
		}
	}
	return out, nil
}
