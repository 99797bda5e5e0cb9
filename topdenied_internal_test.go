package tollgate

import (
	"strconv"
	"testing"
)

// The space-saving summary keeps every triple refused more than a
// TopDeniedSize-th of all refusals, with a count at most Error over the
// true one, whatever the noise of triples refused once.
func TestTopDeniedSpaceSaving(t *testing.T) {
	var l Limiter
	heavy := map[string]uint64{"a": 500, "b": 300, "c": 200}
	noise := 0
	for round := range 500 {
		for e, n := range heavy {
			if uint64(round) < n {
				l.topDenied.add(e, "api", "rpm")
			}
		}
		for range 4 { // 2000 triples refused once each
			l.topDenied.add("noise-"+strconv.Itoa(noise), "api", "rpm")
			noise++
		}
	}
	if n := len(l.topDenied.items); n != TopDeniedSize {
		t.Fatalf("%d triples followed, want %d", n, TopDeniedSize)
	}
	top := TopDenied(l.topDenied.snapshot(), 3, "api", "")
	for i, e := range []string{"a", "b", "c"} {
		if i >= len(top) || top[i].Entity != e {
			t.Fatalf("TopDenied = %+v, want a, b, c first", top)
		}
		if c := top[i]; c.Count < heavy[e] || c.Count-c.Error > heavy[e] {
			t.Errorf("%s: count %d error %d, want a count of at least %d, at most error over it", e, c.Count, c.Error, heavy[e])
		}
	}
	if got := TopDenied(l.topDenied.snapshot(), 5, "other", ""); len(got) != 0 {
		t.Errorf("TopDenied of another resource = %+v, want none", got)
	}
}

// Alert states are bounded: beyond MaxAlertStates one is forgotten, and
// the tracker never holds more; a state falls out once its use drops
// below the band.
func TestAlertStatesBounded(t *testing.T) {
	var sent int
	l := &Limiter{alertFn: func(Alert) { sent++ }}
	at := [4]float64{0.5}
	const entities = 2 * MaxAlertStates
	for i := range entities {
		l.alerts.observe(l, "e"+strconv.Itoa(i), "api", "rpm", &at, 0.6, 0)
	}
	total := 0
	for i := range l.alerts.shards {
		sh := &l.alerts.shards[i]
		if n := len(sh.fired); n != MaxAlertStates/alertShards || sh.n.Load() != int64(n) {
			t.Errorf("shard %d: %d states (counted %d), want it full, %d", i, n, sh.n.Load(), MaxAlertStates/alertShards)
		}
		total += len(sh.fired)
	}
	if total != MaxAlertStates {
		t.Errorf("%d states, want %d", total, MaxAlertStates)
	}
	if sent != entities {
		t.Errorf("%d alerts, want one per entity, %d", sent, entities)
	}
	// Falling below the band forgets an entity's state.
	last := "e" + strconv.Itoa(entities-1)
	sh := l.alerts.shard(last)
	before := sh.n.Load()
	l.alerts.observe(l, last, "api", "rpm", &at, 0.1, 0)
	if n := sh.n.Load(); n != before-1 {
		t.Errorf("%d states in the shard after one re-armed, want %d", n, before-1)
	}
}
