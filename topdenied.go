package tollgate

import (
	"cmp"
	"slices"
	"sync"
)

// TopDeniedSize is how many entity, resource and limit triples a limiter
// follows for TopDenied.
const TopDeniedSize = 128

// DeniedEntity is an entity that a limit of a resource refused, with how
// often (TopDenied).
type DeniedEntity struct {
	Entity   string
	Resource string
	Limit    string
	// Count is how many decisions the limit refused the entity, at most
	// Error too many: the triple may have taken the place of another,
	// whose count it inherited.
	Count uint64
	Error uint64
}

// topDenied follows the triples refused most with the space-saving
// algorithm (Metwally et al.): TopDeniedSize counters; a triple not
// followed takes the place of the smallest, inheriting its count as its
// error. Every triple refused more than a TopDeniedSize-th of all
// refusals is followed, with its count over-estimated by at most Error.
type topDenied struct {
	mu    sync.Mutex
	idx   map[alertKey]int
	items []DeniedEntity
}

func (t *topDenied) add(entity, resource, limit string) {
	k := alertKey{entity, resource, limit}
	t.mu.Lock()
	defer t.mu.Unlock()
	if i, ok := t.idx[k]; ok {
		t.items[i].Count++
		return
	}
	if t.idx == nil {
		t.idx = make(map[alertKey]int, TopDeniedSize)
	}
	if len(t.items) < TopDeniedSize {
		t.idx[k] = len(t.items)
		t.items = append(t.items, DeniedEntity{Entity: entity, Resource: resource, Limit: limit, Count: 1})
		return
	}
	m := 0
	for i := range t.items {
		if t.items[i].Count < t.items[m].Count {
			m = i
		}
	}
	old := t.items[m]
	delete(t.idx, alertKey{old.Entity, old.Resource, old.Limit})
	t.items[m] = DeniedEntity{Entity: entity, Resource: resource, Limit: limit, Count: old.Count + 1, Error: old.Count}
	t.idx[k] = m
}

// TopDenied returns at most n of the entities the limiter refused most,
// by resource and limit, most refused first: of resource and limit only
// when they are not empty. It follows TopDeniedSize triples of all
// resources (DeniedEntity.Error says how far a count may be over), so the
// entities of a resource refused rarely beside others may not be listed.
// It counts this limiter's refusals since it was made.
func (l *Limiter) TopDenied(n int, resource, limit string) []DeniedEntity {
	l.topDenied.mu.Lock()
	out := make([]DeniedEntity, 0, len(l.topDenied.items))
	for _, it := range l.topDenied.items {
		if (resource == "" || it.Resource == resource) && (limit == "" || it.Limit == limit) {
			out = append(out, it)
		}
	}
	l.topDenied.mu.Unlock()
	slices.SortFunc(out, func(a, b DeniedEntity) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Entity, b.Entity),
			cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Limit, b.Limit))
	})
	if n >= 0 && len(out) > n {
		out = out[:n]
	}
	return out
}
