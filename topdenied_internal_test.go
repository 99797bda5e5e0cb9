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
// the tracker never holds more.
func TestAlertStatesBounded(t *testing.T) {
	var sent int
	l := &Limiter{alertFn: func(Alert) { sent++ }}
	at := [4]float64{0.5}
	for i := range MaxAlertStates + 10 {
		l.alerts.observe(l, "e"+strconv.Itoa(i), "api", "rpm", &at, 0.6, 0)
	}
	if n := len(l.alerts.fired); n != MaxAlertStates || l.alerts.n.Load() != MaxAlertStates {
		t.Errorf("%d states (counted %d), want %d", n, l.alerts.n.Load(), MaxAlertStates)
	}
	if sent != MaxAlertStates+10 {
		t.Errorf("%d alerts, want one per entity, %d", sent, MaxAlertStates+10)
	}
	// Falling below the band forgets an entity's state.
	l.alerts.observe(l, "e"+strconv.Itoa(MaxAlertStates+9), "api", "rpm", &at, 0.1, 0)
	if n := l.alerts.n.Load(); n != MaxAlertStates-1 {
		t.Errorf("%d states after one re-armed, want %d", n, MaxAlertStates-1)
	}
}
