package tollgate

import (
	"context"
	"maps"
	"slices"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// ErrCapacityUnsupported is returned by Capacity when the limiter's store
// cannot list a resource's buckets (it does not implement
// store.BucketLister).
var ErrCapacityUnsupported = model.ErrCapacityUnsupported

// Capacity sums, over every bucket of resource in the limiter's namespace,
// each limit's capacity and current (refilled) balance. A sharded bucket
// counts once. It reads every bucket: for dashboards, not for hot paths.
func (l *Limiter) Capacity(ctx context.Context, resource string) (ResourceCapacity, error) {
	bl, ok := l.store.(store.BucketLister)
	if !ok {
		return ResourceCapacity{}, ErrCapacityUnsupported
	}
	if err := model.ValidateResource(resource); err != nil {
		return ResourceCapacity{}, err
	}
	ns, err := l.nsForAdmin(ctx)
	if err != nil {
		return ResourceCapacity{}, err
	}
	wall := l.clock.Now()
	now := wall.UnixMilli()
	out := ResourceCapacity{Resource: resource}
	sums := map[string]*limitSum{}
	for after := ""; ; {
		page, err := bl.ListBuckets(ctx, ns, resource, after, store.MaxBucketPage)
		if err != nil {
			return ResourceCapacity{}, storeErr(ctx, "list buckets", resource, err)
		}
		for _, b := range page {
			out.Entities++
			for _, ls := range b.Record.Limits {
				st := bucket.Refill(ls.State, ls.Params, now-b.Record.Refilled)
				s := sums[ls.Name]
				if s == nil {
					s = &limitSum{}
					sums[ls.Name] = s
				}
				s.capacity = addSat(s.capacity, ls.Params.Capacity)
				s.tokens = addSat(s.tokens, st.Tokens)
				if !ls.Params.Refills() && !s.held {
					s.held, s.entity = true, b.Entity
				}
			}
		}
		if len(page) < store.MaxBucketPage {
			break
		}
		after = page[len(page)-1].Entity
	}
	for _, name := range slices.Sorted(maps.Keys(sums)) {
		s := sums[name]
		lc := LimitCapacity{Limit: name, Capacity: bucket.Tokens(s.capacity), Available: bucket.Available(bucket.State{Tokens: s.tokens})}
		if s.held {
			if lc.Kind, err = l.heldKind(ctx, ns, s.entity, resource, name, nanoOf(wall)); err != nil {
				return ResourceCapacity{}, err
			}
		}
		if s.capacity > 0 {
			lc.Utilisation = 1 - float64(s.tokens)/float64(s.capacity)
		}
		out.Limits = append(out.Limits, lc)
	}
	return out, nil
}

// limitSum accumulates one limit over buckets, in millitokens.
type limitSum struct {
	capacity, tokens int64
	// held is set for a limit that does not refill: a concurrency or a
	// reserved limit, which buckets do not tell apart; entity is the
	// first bucket's that has it, whose configuration tells.
	held   bool
	entity string
}

// heldKind returns the kind of limit name, which does not refill, in
// entity's stored limits for resource: Reserved or Concurrency. A limit
// that is not stored there (it came with WithLimits, or its configuration
// changed since) is reported as Concurrency, which it behaves as. Buckets
// keep no kind, and asking the configuration once per limit name costs a
// capacity report one cached lookup per such limit, not one per bucket.
func (l *Limiter) heldKind(ctx context.Context, ns, entity, resource, name string, now unixNano) (Kind, error) {
	r, err := l.resolve(ctx, ns, entity, resource, now)
	if err != nil {
		return 0, err
	}
	for _, p := range r.limits {
		if p.limit.Name == name && p.limit.Kind == model.Reserved {
			return model.Reserved, nil
		}
	}
	return model.Concurrency, nil
}

// addSat adds two balances, saturating at ±bucket.MaxTokens.
func addSat(a, b int64) int64 { return bucket.ForceConsume(bucket.State{Tokens: a}, -b).Tokens }
