package tollgate

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tollgate-rl/tollgate/store"
)

// NearLimit is the use of a limit (the share of its capacity taken,
// LimitDecisions.NearLimit) at and above which a decision counts as near
// the limit.
const NearLimit = 0.8

// OtherSeries is the resource and limit under which a limiter counts the
// decisions of pairs beyond MaxDecisionSeries: resource names come from
// callers wherever a system-level configuration applies, and limit names
// from callers that pass their own limits (WithLimits), so the pairs a
// limiter counts separately are capped. No resource or limit takes this
// name (neither may start with an underscore).
const OtherSeries = "_other"

// DegradedLimit is the limit a degraded decision is counted under
// (LimitDecisions.Degraded): the store did not answer, so no limit
// decided.
const DegradedLimit = "_any"

// MaxDecisionSeries bounds the resource and limit pairs whose decisions a
// limiter counts apart (Stats.Decisions), and those whose shadow denials
// it counts apart (Stats.Shadow); those of further pairs are counted
// under OtherSeries.
const MaxDecisionSeries = 512

// LimitDecisions counts the decisions one limit of one resource took part
// in: those it was asked for (the call's consume named it), at every level
// of the entity's cascade. A decision counts once per limit, under one
// outcome: Denied when the limit refused it, ShadowDenied when the limit,
// enforced in shadow, would have, Granted when the decision was granted
// otherwise; a limit that did not refuse a decision other limits refused
// counts in none of these. NearLimit counts, among all of them, those
// that left the limit's use (the share of capacity taken, after the debit
// of a grant, with the amount asked for added when the limit refused) at
// NearLimit or above. Degraded counts the leases granted without the
// store (DegradedLimit).
//
// Entities are never part of the key: the counts are as many as the
// resource and limit pairs in use, at most MaxDecisionSeries and the
// OtherSeries pair. The entities denied most are TopDenied's.
type LimitDecisions struct {
	Resource, Limit                                    string
	Granted, Denied, ShadowDenied, Degraded, NearLimit uint64
}

// decisionCounts are a limiter's LimitDecisions.
type decisionCounts struct {
	m sync.Map     // shadowKey -> *limitCounters
	n atomic.Int64 // entries of m
}

// limitCounters are the counts of one resource and limit, in stripes
// that sum to them: each lease state counts in its own stripe
// (leaseData.stripe), so that cores counting grants of one limit at once
// do not take turns on one cache line.
type limitCounters struct {
	stripes [counterStripes]counterStripe
}

// counterStripes is how many stripes a counter hit on every acquire is
// split into.
const counterStripes = 4

// counterStripe is one stripe of a limit's counts, a cache line of its own.
//
// grantedHit counts grants that are also a hit of the config cache
// through a lease state's memory (leaseData.memoHits): one atomic add
// for both counts, the usual warm acquire's. Granted sums both; the
// cache's hits add grantedHit of every limit (Limiter.Stats).
type counterStripe struct {
	granted, denied, shadowDenied, degraded, near, grantedHit atomic.Uint64
	_                                                         [64 - 6*8]byte
}

// sum returns the counts of every stripe added up.
func (c *limitCounters) sum() (out counterSums) {
	for i := range c.stripes {
		s := &c.stripes[i]
		hit := s.grantedHit.Load()
		out.granted += s.granted.Load() + hit
		out.memoHits += hit
		out.denied += s.denied.Load()
		out.shadowDenied += s.shadowDenied.Load()
		out.degraded += s.degraded.Load()
		out.near += s.near.Load()
	}
	return out
}

type counterSums struct{ granted, denied, shadowDenied, degraded, near, memoHits uint64 }

// get returns the counters of resource and limit, those of OtherSeries
// once MaxDecisionSeries pairs are counted. Racing first uses may store a
// few more pairs than the cap, never many.
func (c *decisionCounts) get(resource, limit string) *limitCounters {
	k := shadowKey{resource, limit}
	if v, ok := c.m.Load(k); ok {
		return v.(*limitCounters)
	}
	if c.n.Load() >= MaxDecisionSeries {
		k = shadowKey{OtherSeries, OtherSeries}
		if v, ok := c.m.Load(k); ok {
			return v.(*limitCounters)
		}
	}
	v, loaded := c.m.LoadOrStore(k, new(limitCounters))
	if !loaded {
		c.n.Add(1)
	}
	return v.(*limitCounters)
}

// memoHits returns the config cache hits counted with grants (grantedHit).
func (c *decisionCounts) memoHits() (n uint64) {
	c.m.Range(func(_, v any) bool {
		n += v.(*limitCounters).sum().memoHits
		return true
	})
	return n
}

// countMemoHits counts in the cache's stats the hits through d's
// memory that no decision counted, and forgets them.
func (l *Limiter) countMemoHits(d *leaseData) {
	if d.memoHits != 0 {
		l.cache.memoHits[d.stripe%counterStripes].n.Add(d.memoHits)
		d.memoHits = 0
	}
}

// snapshot returns the counts, by resource and limit.
func (c *decisionCounts) snapshot() []LimitDecisions {
	var out []LimitDecisions
	c.m.Range(func(k, v any) bool {
		key, lc := k.(shadowKey), v.(*limitCounters).sum()
		out = append(out, LimitDecisions{Resource: key.resource, Limit: key.limit,
			Granted: lc.granted, Denied: lc.denied, ShadowDenied: lc.shadowDenied,
			Degraded: lc.degraded, NearLimit: lc.near})
		return true
	})
	slices.SortFunc(out, func(a, b LimitDecisions) int {
		return cmp.Or(cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Limit, b.Limit))
	})
	return out
}

// noteDecision counts the decision the store took on d's request (granted
// or not) for each limit the request named, feeds the entities denied to
// TopDenied, and the uses of limits with alert thresholds to the alerts
// (alerts.go). It reads only d's request: no status is built.
func (l *Limiter) noteDecision(d *leaseData, granted bool) {
	// The counters of a layout already counted are in place, in order;
	// they are once every limit of the layout was looked up.
	counted, every := d.layout.valid && d.layout.counted, true
	k := 0
	for bi := range d.req.Buckets {
		b := &d.req.Buckets[bi]
		for li := range b.Limits {
			lr := &b.Limits[li]
			if k >= len(d.kinds) || !d.kinds[k].checked {
				k++
				every = false
				continue // not asked for: no part in the decision
			}
			pl := &d.kinds[k]
			var lc *limitCounters
			if counted {
				lc = d.counters[k].c
			} else {
				lc = d.counter(k, b.Key.Resource, lr.Name)
			}
			c := &lc.stripes[d.stripe%counterStripes]
			k++
			exceeded := lr.Observed.Tokens < lr.Amount
			switch {
			case exceeded && pl.shadow:
				c.shadowDenied.Add(1)
			case granted && d.memoHits > 0:
				c.grantedHit.Add(1)
				d.memoHits--
			case granted:
				c.granted.Add(1)
			case exceeded:
				c.denied.Add(1)
				l.topDenied.add(b.Key.Entity, b.Key.Resource, lr.Name)
			}
			if nearOf(lr, granted, exceeded) {
				c.near.Add(1)
			}
			if pl.alertAt[0] != 0 && l.alertFn != nil {
				l.alerts.observe(l, b.Key.Entity, b.Key.Resource, lr.Name, &pl.alertAt, useOf(lr, granted, exceeded), d.req.Now)
			}
		}
	}
	d.layout.counted = counted || d.layout.valid && every
}

// counterRef is the decision counters of a resource and limit.
type counterRef struct {
	resource, limit string
	c               *limitCounters
}

// counter returns the decision counters of resource and limit, the k-th
// limit of d's request. The request of a recycled state usually names the
// same resources and limits in the same order as the last one: comparing
// the names remembered costs less than the limiter's lookup (a hash of
// both), and nothing is stored unless they changed.
func (d *leaseData) counter(k int, resource, limit string) *limitCounters {
	if k < len(d.counters) {
		if r := &d.counters[k]; r.resource == resource && r.limit == limit {
			return r.c
		}
	}
	c := d.lim.decisions.get(resource, limit)
	for len(d.counters) <= k {
		d.counters = append(d.counters, counterRef{})
	}
	d.counters[k] = counterRef{resource, limit, c}
	return c
}

// noteDegraded counts a degraded lease for resource.
func (l *Limiter) noteDegraded(resource string) {
	l.decisions.get(resource, DegradedLimit).stripes[0].degraded.Add(1)
}

// nearOf reports whether useOf(lr, granted, exceeded) is NearLimit or
// above. A use of at most half the capacity, which integers tell, is
// below it whatever the rounding of the division (less than a part in
// 10^15): the usual decision, of a limit far from its capacity, divides
// nothing.
func nearOf(lr *store.LimitRequest, granted, exceeded bool) bool {
	capacity := lr.Params.Capacity
	if capacity <= 0 {
		return false // useOf is 0
	}
	tokens := lr.Observed.Tokens
	if granted || exceeded {
		tokens -= lr.Amount
	}
	if capacity-min(tokens, capacity) <= capacity/2 {
		return false
	}
	return useOf(lr, granted, exceeded) >= NearLimit
}

// useOf is the share of lr's capacity taken after the decision: after the
// debit when granted; with the amount asked for added when the limit
// refused it (or would have, in shadow), so that a refusal is a use above
// 1 whatever the balance left. A balance above capacity (refunds not yet
// capped by a refill) counts as full.
func useOf(lr *store.LimitRequest, granted, exceeded bool) float64 {
	capacity := lr.Params.Capacity
	if capacity <= 0 {
		return 0
	}
	tokens := lr.Observed.Tokens
	if granted || exceeded {
		tokens -= lr.Amount
	}
	return float64(capacity-min(tokens, capacity)) / float64(capacity)
}
