package tollgate

import (
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// With the real clock, an acquire's time is the wall clock's: read at most
// wallResync ago and carried forward on the monotonic clock, never behind
// an earlier reading and never ahead of a later one.
func TestLeaseDataNowFollowsWallClock(t *testing.T) {
	lim, err := New(memory.New())
	if err != nil {
		t.Fatal(err)
	}
	if !lim.realClock {
		t.Fatal("a limiter on the default clock does not know it is the real one")
	}
	d := lim.getLeaseData()
	defer d.release()
	prev := d.now()
	for range 10_000 {
		before := nanoOf(time.Now())
		got := d.now()
		after := nanoOf(time.Now())
		// A reading derived from an earlier one may be late by the two
		// clocks' tiny disagreement; allow a microsecond.
		if got < before-1000 || got > after {
			t.Fatalf("now() = %d, outside the wall-clock readings around it [%d, %d]", got, before, after)
		}
		if got < prev {
			t.Fatalf("now() went back from %d to %d", prev, got)
		}
		prev = got
	}
}

// A reading older than wallResync, or none, is replaced by a fresh one: a
// stepped wall clock is followed within wallResync.
func TestLeaseDataNowReadsWallClockAgain(t *testing.T) {
	lim, err := New(memory.New())
	if err != nil {
		t.Fatal(err)
	}
	d := lim.getLeaseData()
	defer d.release()
	d.wall = time.Time{}
	if got := d.now(); d.wall.IsZero() || got != nanoOf(d.wall) {
		t.Errorf("fresh state: now() = %d with reading %v; want a new reading", got, d.wall)
	}
	// A reading as old as a wall clock stepped an hour ago.
	stale := time.Now().Add(-time.Hour)
	d.wall, d.wallNano = stale, nanoOf(stale)
	got := d.now()
	if ago := nanoOf(time.Now()) - got; d.wall.Equal(stale) || ago > unixNano(time.Second) || ago < 0 {
		t.Errorf("stale reading: now() = %d, reading %v; want a new reading", got, d.wall)
	}
	// Within wallResync the reading is kept.
	d.wall = time.Now()
	d.wallNano = nanoOf(d.wall)
	kept := d.wall
	d.now()
	if elapsed := time.Since(kept); elapsed < wallResync && !d.wall.Equal(kept) {
		t.Errorf("reading replaced after %v, within wallResync %v", elapsed, wallResync)
	}
}

// Any other clock is read as it is, every time.
func TestLeaseDataNowUsesOtherClocks(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	lim, err := New(memory.New(), WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	d := lim.getLeaseData()
	defer d.release()
	for range 3 {
		if got, want := d.now(), nanoOf(fake.Now()); got != want {
			t.Errorf("now() = %v, want the fake clock's %v", got, want)
		}
		fake.Advance(time.Microsecond)
	}
}
