package tollgate

import (
	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// A recycled lease state plans a request laid out as its last one by its
// amounts alone (see plan).

// layoutMemo says what a state's last request was planned from, when that
// can be planned again by its amounts alone: the call's own limits
// (WithLimits) or stored ones, none of them reserved. Its layout, the
// fields of its buckets and limits that do not depend on the amounts
// (keys, entities, names, parameters, kinds), stays in place through
// recycling; the next request of the state, usually the same caller's next
// call, with the same entities at every level and the same limits, finds
// it there (sameLayout, sameStoredLayout) and sets only the amounts and
// what follows from them (refill). Valid from a plan that laid it out
// until the next plan that does not, or until something other than plan
// rebuilds the request (resume). Its resource is the state's
// validResource: plan invalidates it when that changes.
type layoutMemo struct {
	valid bool
	// counted says that the state's decision counters (leaseData.counter)
	// are those of this layout's limits, in order (noteDecision).
	counted bool
	// stored says that the limits are stored ones, limits[level] each
	// level's (a cached resolution's, which never change); otherwise they
	// are the call's own, prepared by explicitLimits from the option's
	// limits explicitOf (prepared again, in place, only for another
	// option).
	stored     bool
	limits     [model.MaxCascadeDepth][]prepared
	explicitOf []model.Limit
	depths     int // levels
	kinds      int // limits, over every level
}

// rememberLayout notes the layout plan just made: depths levels, kinds
// limits in all, the call's own if explicit is set, else levels'. (Slices
// are stored only when they changed: see plan on write barriers.)
func (d *leaseData) rememberLayout(depths, kinds int, explicit bool, levels *[model.MaxCascadeDepth][]prepared) {
	m := &d.layout
	m.valid, m.stored, m.depths, m.kinds = true, !explicit, depths, kinds
	if explicit {
		if !sameSlice(m.explicitOf, d.explicitOf) {
			m.explicitOf = d.explicitOf
		}
		return
	}
	for depth := range depths {
		if !sameSlice(m.limits[depth], levels[depth]) {
			m.limits[depth] = levels[depth]
		}
	}
}

// sameLayout reports whether d's request is laid out for chain and the
// call's own limits, and needs only refill: the same option's limits,
// and at every level the same entity; and no reservation, which refill
// does not check.
func (d *leaseData) sameLayout(chain []*model.Entity) bool {
	m := &d.layout
	if !m.valid || m.stored || len(chain) != m.depths || d.opts.Reservation != "" ||
		!sameSlice(d.explicitOf, m.explicitOf) {
		return false
	}
	return d.sameEntities(chain)
}

// sameStoredLayout is sameLayout for stored limits: every level's limits
// are those its resolution memo holds, still fresh (as resolutionVia
// would find them, so that planning asks nothing of the store), and the
// same as the layout's. It counts those memo hits as resolutionVia would.
func (l *Limiter) sameStoredLayout(d *leaseData, chain []*model.Entity, resource string, now unixNano) bool {
	m := &d.layout
	if !m.valid || !m.stored || len(chain) != m.depths || d.opts.Reservation != "" || l.cache.ttl == 0 ||
		!d.sameEntities(chain) {
		return false
	}
	epoch := l.cache.epoch.Load()
	for depth, e := range chain {
		r := d.resolutions[depth].fresh(epoch, now, store.BucketKey{Entity: e.ID, Resource: resource})
		if r == nil || !r.found || !sameSlice(r.limits, m.limits[depth]) {
			return false
		}
	}
	d.memoHits += uint64(len(chain))
	return true
}

// sameEntities reports whether every level of d's request laid out has
// chain's entity.
func (d *leaseData) sameEntities(chain []*model.Entity) bool {
	for depth, b := range d.req.Buckets[:len(chain)] {
		if b.Entity != chain[depth] {
			return false
		}
	}
	return true
}

// refill plans a request laid out in place (sameLayout, sameStoredLayout)
// for consume, as plan's loop does: each limit's amount is the entity's
// where fitConsume fitted consume to the limits (the first level; every
// level with the call's own limits, which apply alike at each), else the
// amount consume names for it, at most the level's capacity; and what
// follows from the amount.
func (d *leaseData) refill(consume Consume) error {
	m := &d.layout
	d.req.Buckets = d.req.Buckets[:m.depths]
	d.kinds = d.kinds[:m.kinds]
	k := 0
	for bi := range d.req.Buckets {
		br := &d.req.Buckets[bi]
		fitted := bi == 0 || !m.stored
		for i := range br.Limits {
			lr, pl := &br.Limits[i], &d.kinds[k]
			k++
			amount := int64(-1)
			if fitted {
				amount = d.amounts[i]
			} else if n, ok := consume[lr.Name]; ok {
				amount = n * bucket.MilliPerToken // in range: fitConsume checked consume
			}
			check := amount >= 0
			if !check {
				amount = 0
			} else if amount > lr.Params.Capacity && !pl.shadow {
				return exceedsCapacity(m.limits[bi][i].limit, br.Key.Entity, bucket.Tokens(amount))
			}
			pl.checked = check
			d.shadow = d.shadow || pl.shadow && check
			if lr.Params.Amount == 0 && amount > 0 {
				d.holds = true // a concurrency token taken: the lease is durable
			}
			// A shadow limit is debited, never checked: the store grants
			// without it, and its status says whether it would have.
			lr.Check, lr.Amount = check && !pl.shadow, amount
			lr.Observed, lr.Wait = bucket.State{}, 0
		}
		if br.Placement != 0 || br.Estimated {
			br.Placement, br.Estimated = 0, false
		}
	}
	return nil
}
