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

// snapshot returns the triples followed, most refused first.
func (t *topDenied) snapshot() []DeniedEntity {
	t.mu.Lock()
	out := slices.Clone(t.items)
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b DeniedEntity) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Entity, b.Entity),
			cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Limit, b.Limit))
	})
	return out
}

// TopDenied returns at most n of denied (Stats.TopDenied, most refused
// first), of resource and limit only when they are not empty.
func TopDenied(denied []DeniedEntity, n int, resource, limit string) []DeniedEntity {
	var out []DeniedEntity
	for _, d := range denied {
		if len(out) == n {
			break
		}
		if (resource == "" || d.Resource == resource) && (limit == "" || d.Limit == limit) {
			out = append(out, d)
		}
	}
	return out
}
