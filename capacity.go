package tollgate

import (
	"context"
	"maps"
	"slices"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// ErrCapacityUnsupported is returned by Capacity when the admin's store
// cannot list a resource's buckets (it does not implement
// store.BucketLister).
var ErrCapacityUnsupported = model.ErrCapacityUnsupported

// Capacity sums, over every bucket of resource in the admin's namespace,
// each limit's capacity and current (refilled) balance. A sharded bucket
// counts once. It reads every bucket: for dashboards, not for hot paths.
func (a *Admin) Capacity(ctx context.Context, resource string) (ResourceCapacity, error) {
	bl, ok := a.store.(store.BucketLister)
	if !ok {
		return ResourceCapacity{}, ErrCapacityUnsupported
	}
	if err := model.ValidateResource(resource); err != nil {
		return ResourceCapacity{}, err
	}
	ns, err := a.namespaceID(ctx)
	if err != nil {
		return ResourceCapacity{}, err
	}
	now := a.clock.Now().UnixMilli()
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
				st := bucket.RefillBetween(ls.State, ls.Params, b.Record.Refilled, now)
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
			if lc.Kind, err = a.heldKind(ctx, ns, s.entity, resource, name); err != nil {
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
// capacity report one lookup per such limit, not one per bucket.
func (a *Admin) heldKind(ctx context.Context, ns, entity, resource, name string) (Kind, error) {
	_, cfg, _, err := storedLimits(ctx, a.store, ns, entity, resource)
	if err != nil || cfg == nil {
		return model.Concurrency, err
	}
	for _, lim := range cfg.Limits {
		if lim.Name == name && lim.Kind == model.Reserved {
			return model.Reserved, nil
		}
	}
	return model.Concurrency, nil
}

// addSat adds two balances, saturating at ±bucket.MaxTokens.
func addSat(a, b int64) int64 { return bucket.ForceConsume(bucket.State{Tokens: a}, -b).Tokens }
