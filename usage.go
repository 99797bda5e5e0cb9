package tollgate

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// ErrUsageUnsupported is returned by the usage queries when the admin's
// store keeps no usage snapshots (it does not implement store.UsageStore).
var ErrUsageUnsupported = model.ErrUsageUnsupported

// Usage lists usage snapshots; next, when not empty, is the After of the
// following page. Snapshots appear once the aggregator has written them
// (see package aggregator).
func (a *Admin) Usage(ctx context.Context, q UsageQuery) (usage []Usage, next string, err error) {
	snaps, next, err := a.usagePage(ctx, q)
	if err != nil {
		return nil, "", err
	}
	out := make([]Usage, len(snaps))
	for i, s := range snaps {
		out[i] = Usage{Entity: s.Key.Entity, Resource: s.Key.Resource, Window: s.Key.Window,
			Start: time.UnixMilli(s.Key.Start).UTC(), Consumed: tokens(s.Consumed), Events: s.Events}
	}
	return out, next, nil
}

// usagePage reads one page of stored snapshots, in millitokens.
func (a *Admin) usagePage(ctx context.Context, q UsageQuery) (snaps []store.UsageSnapshot, next string, err error) {
	us, ok := a.store.(store.UsageStore)
	if !ok {
		return nil, "", ErrUsageUnsupported
	}
	sq, err := a.storeQuery(q)
	if err != nil {
		return nil, "", err
	}
	ns, err := a.namespaceID(ctx)
	if err != nil {
		return nil, "", err
	}
	snaps, err = us.ListUsage(ctx, ns, sq)
	if err != nil {
		return nil, "", storeErr(ctx, "list usage", q.Entity+q.Resource, err)
	}
	if size, _ := sq.Validate(); len(snaps) == size {
		next = snaps[len(snaps)-1].Cursor
	}
	return snaps, next, nil
}

func (a *Admin) storeQuery(q UsageQuery) (store.UsageQuery, error) {
	if q.Entity != "" {
		if err := model.ValidateEntityID(q.Entity); err != nil {
			return store.UsageQuery{}, err
		}
	}
	if q.Resource != "" {
		if err := model.ValidateResource(q.Resource); err != nil {
			return store.UsageQuery{}, err
		}
	}
	if !q.To.After(q.From) {
		return store.UsageQuery{}, model.Invalid("to", q.To.String(), "must be after from")
	}
	sq := store.UsageQuery{Entity: q.Entity, Resource: q.Resource, Window: q.Window,
		From: q.From.UnixMilli(), To: q.To.UnixMilli(), After: q.After, Limit: q.Limit, Now: a.clock.Now().UnixMilli()}
	if _, err := sq.Validate(); err != nil {
		return store.UsageQuery{}, err
	}
	return sq, nil
}

// tokens converts millitokens to whole tokens, rounding toward zero.
func tokens(milli map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(milli))
	for k, v := range milli {
		out[k] = bucket.Tokens(v)
	}
	return out
}

// UsageSummary reads every page of q and totals it. It sums millitokens
// and rounds only the results, so many snapshots of fractions of a token
// add up as they should. A resource's summary (q.Entity empty) sums the
// snapshots of every entity using it: an acquire that cascades is in the
// snapshot of each level it debited (its key's and its organisation's), so
// it counts once per level. Summarise one entity for what it alone used.
func (a *Admin) UsageSummary(ctx context.Context, q UsageQuery) (UsageSummary, error) {
	perWindow := map[string]map[int64]int64{} // limit -> window start -> millitokens
	var sum UsageSummary
	sum.Limits = map[string]LimitUsage{}
	for {
		page, next, err := a.usagePage(ctx, q)
		if err != nil {
			return UsageSummary{}, err
		}
		for _, s := range page {
			sum.Events += s.Events
			for limit, n := range s.Consumed {
				if perWindow[limit] == nil {
					perWindow[limit] = map[int64]int64{}
				}
				perWindow[limit][s.Key.Start] = addSat(perWindow[limit][s.Key.Start], n)
			}
		}
		if next == "" {
			break
		}
		q.After = next
	}
	d := q.Window.Duration()
	sum.Windows = max(1, int64((q.To.Sub(q.From)+d-1)/d))
	for limit, byStart := range perWindow {
		var total, peak int64
		var peakStart int64
		for i, start := range slices.Sorted(maps.Keys(byStart)) {
			n := byStart[start]
			total = addSat(total, n)
			if i == 0 || n > peak {
				peak, peakStart = n, start
			}
		}
		sum.Limits[limit] = LimitUsage{
			Total:     bucket.Tokens(total),
			Average:   float64(total) / bucket.MilliPerToken / float64(sum.Windows),
			Peak:      bucket.Tokens(peak),
			PeakStart: time.UnixMilli(peakStart).UTC(),
		}
	}
	return sum, nil
}
