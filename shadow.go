package tollgate

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
)

// ShadowDenials counts the decisions of one limit enforced in shadow
// (Config.Shadow) that it would have denied: acquires it was asked for
// and could not cover, granted or refused by other limits.
type ShadowDenials struct {
	Resource string
	Limit    string
	Count    uint64
}

// shadowCounts are a limiter's ShadowDenials, by resource and limit.
// Resource names come from callers wherever a system- or entity-level
// configuration holds a shadow limit, so, as the decision counts, the
// pairs counted apart stop at MaxDecisionSeries and further ones are
// counted under OtherSeries.
type shadowCounts struct {
	m sync.Map     // shadowKey -> *atomic.Uint64
	n atomic.Int64 // entries of m
}

type shadowKey struct{ resource, limit string }

// add counts a would-be denial of resource and limit. Racing first uses
// may store a few more pairs than the cap, never many.
func (c *shadowCounts) add(resource, limit string) {
	k := shadowKey{resource, limit}
	v, ok := c.m.Load(k)
	if !ok {
		if c.n.Load() >= MaxDecisionSeries {
			k = shadowKey{OtherSeries, OtherSeries}
		}
		var loaded bool
		if v, loaded = c.m.LoadOrStore(k, new(atomic.Uint64)); !loaded {
			c.n.Add(1)
		}
	}
	v.(*atomic.Uint64).Add(1)
}

// snapshot returns the counts, by resource and limit.
func (c *shadowCounts) snapshot() []ShadowDenials {
	var out []ShadowDenials
	c.m.Range(func(k, v any) bool {
		key := k.(shadowKey)
		out = append(out, ShadowDenials{Resource: key.resource, Limit: key.limit, Count: v.(*atomic.Uint64).Load()})
		return true
	})
	slices.SortFunc(out, func(a, b ShadowDenials) int {
		return cmp.Or(cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Limit, b.Limit))
	})
	return out
}

// noteShadow counts the shadow limits of d's request, decided by the
// store, that would have denied it.
func (l *Limiter) noteShadow(d *leaseData) {
	k := 0
	for _, b := range d.req.Buckets {
		for _, lr := range b.Limits {
			if k < len(d.kinds) && d.kinds[k].shadow && d.kinds[k].checked && lr.Observed.Tokens < lr.Amount {
				l.shadow.add(b.Key.Resource, lr.Name)
			}
			k++
		}
	}
}
