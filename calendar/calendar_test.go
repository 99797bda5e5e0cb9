package calendar

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func ms(t *testing.T, s string, zone string) int64 {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v.UnixMilli()
}

// Each window's start and length, in the zone's own terms, including
// the days a clock change makes 23 or 25 hours long.
func TestWindows(t *testing.T) {
	cases := []struct {
		window string
		at     string // an instant inside the window, in the zone
		start  string // the window's first instant, in the zone
		hours  float64
	}{
		{"month@UTC", "2026-11-28 20:47", "2026-11-01 00:00", 30 * 24},
		{"month@UTC", "2024-02-29 23:59", "2024-02-01 00:00", 29 * 24},
		{"month@Europe/Berlin", "2026-03-15 12:00", "2026-03-01 00:00", 31*24 - 1},
		{"month@Europe/Berlin", "2026-10-31 23:59", "2026-10-01 00:00", 31*24 + 1},
		{"day@Europe/Berlin", "2026-03-29 12:00", "2026-03-29 00:00", 23},
		{"day@Europe/Berlin", "2026-10-25 12:00", "2026-10-25 00:00", 25},
		{"day@Europe/Berlin", "2026-11-28 00:00", "2026-11-28 00:00", 24},
		{"day@America/New_York", "2026-11-01 23:30", "2026-11-01 00:00", 25},
		{"week@UTC", "2026-11-28 20:47", "2026-11-23 00:00", 7 * 24},
		{"week@UTC", "2026-11-23 00:00", "2026-11-23 00:00", 7 * 24},
		{"week@UTC", "1970-01-01 00:00", "1969-12-29 00:00", 7 * 24},
		{"week@Europe/Berlin", "2026-03-29 12:00", "2026-03-23 00:00", 7*24 - 1},
		{"hour@UTC", "2026-11-28 20:47", "2026-11-28 20:00", 1},
		{"hour@Asia/Kolkata", "2026-11-28 20:47", "2026-11-28 20:00", 1},
		{"hour@Asia/Kathmandu", "2026-11-28 20:05", "2026-11-28 20:00", 1},
		{"hour@America/St_Johns", "2026-11-28 20:47", "2026-11-28 20:00", 1},
		{"hour@Europe/Berlin", "2026-03-29 03:30", "2026-03-29 03:00", 1},
		// Cuba moves its clock at midnight: the day begins at 01:00.
		{"day@America/Havana", "2026-03-08 12:00", "2026-03-08 01:00", 23},
		{"day@America/Havana", "2026-11-01 12:00", "2026-11-01 00:00", 25},
	}
	for _, c := range cases {
		w, err := Parse(c.window)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.window, err)
		}
		at, start := ms(t, c.at, w.Zone), ms(t, c.start, w.Zone)
		i := w.Index(at)
		if got := w.Start(i); got != start {
			t.Errorf("%s at %s: starts %v, want %s", c.window, c.at, time.UnixMilli(got).In(w.location()), c.start)
		}
		if got := w.Start(i + 1); got-start != int64(c.hours*float64(msPerHour)) {
			t.Errorf("%s at %s: lasts %v, want %vh", c.window, c.at, time.Duration(got-start)*time.Millisecond, c.hours)
		}
		if w.Index(start) != i || w.Index(start-1) != i-1 {
			t.Errorf("%s at %s: indexes %d at its start, %d before, want %d and %d", c.window, c.at, w.Index(start), w.Index(start-1), i, i-1)
		}
	}
}

// Samoa left out 30 December 2011: that day lasts nothing, and the day
// after it begins where the day before ends.
func TestSkippedDay(t *testing.T) {
	w := Window{Day, "Pacific/Apia"}
	before := w.Index(ms(t, "2011-12-29 12:00", w.Zone))
	after := w.Index(ms(t, "2011-12-31 12:00", w.Zone))
	if after != before+2 {
		t.Fatalf("days 29 and 31 December 2011 are %d apart, want 2", after-before)
	}
	if w.Start(before+1) != w.Start(before+2) || w.Start(before+2) != ms(t, "2011-12-31 00:00", w.Zone) {
		t.Errorf("the skipped day starts %d, the next %d", w.Start(before+1), w.Start(before+2))
	}
}

// Around any instant, in many zones and every unit: the window holding
// it starts at or before it and ends after it, windows follow each other
// without gaps, and none lasts longer than MaxMillis.
func TestIndexAndStartAgree(t *testing.T) {
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu",
		"America/Havana", "Pacific/Apia", "America/St_Johns", "Pacific/Chatham", "Africa/Casablanca"}
	r := rand.New(rand.NewPCG(1, 2))
	lo, hi := ms(t, "1990-01-01 00:00", "UTC"), ms(t, "2040-01-01 00:00", "UTC")
	for _, z := range zones {
		for u := Hour; u <= Month; u++ {
			w := Window{u, z}
			for range 300 {
				at := lo + r.Int64N(hi-lo)
				i := w.Index(at)
				s, e := w.Start(i), w.Start(i+1)
				if !(s <= at && at < e) {
					t.Fatalf("%s: %d (%v) is in window %d, which runs from %d to %d", w, at, time.UnixMilli(at).UTC(), i, s, e)
				}
				if e-s > w.MaxMillis() {
					t.Fatalf("%s: window %d lasts %d ms, more than MaxMillis %d", w, i, e-s, w.MaxMillis())
				}
				if w.Index(s) != i || w.Index(e) != i+1 {
					t.Fatalf("%s: window %d's start has index %d, its end %d", w, i, w.Index(s), w.Index(e))
				}
			}
		}
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want error
	}{
		{"month@UTC", nil},
		{"day@Europe/Berlin", nil},
		{"fortnight@UTC", ErrUnknownUnit},
		{"day@Mars/Olympus_Mons", ErrUnknownZone},
		{"day@Local", ErrUnknownZone},
		{"day@", ErrUnknownZone},
		{"day@../../etc/passwd", ErrUnknownZone},
	} {
		w, err := Parse(c.in)
		if !errors.Is(err, c.want) {
			t.Errorf("Parse(%q) = %v, want %v", c.in, err, c.want)
		}
		if err == nil && w.String() != c.in {
			t.Errorf("Parse(%q).String() = %q", c.in, w.String())
		}
	}
	if _, err := Parse("month"); err == nil {
		t.Error(`Parse("month") succeeded`)
	}
}

// Far windows saturate rather than overflow: a deep debt's refill time
// is "never", not a wrapped instant.
func TestStartSaturates(t *testing.T) {
	for u := Hour; u <= Month; u++ {
		w := Window{u, "Europe/Berlin"}
		if got := w.Start(math.MaxInt64 / 2); got != math.MaxInt64 {
			t.Errorf("%s: Start(MaxInt64/2) = %d", w, got)
		}
		if got := w.Start(math.MinInt64 / 2); got != math.MinInt64 {
			t.Errorf("%s: Start(MinInt64/2) = %d", w, got)
		}
		i := w.Index(math.MaxInt64)
		if s := w.Start(i); s > math.MaxInt64/2 && s != math.MaxInt64 {
			t.Errorf("%s: Start(Index(MaxInt64)) = %d", w, s)
		}
	}
}

func BenchmarkIndex(b *testing.B) {
	for _, w := range []Window{{Day, "UTC"}, {Month, "Europe/Berlin"}, {Hour, "Asia/Kolkata"}} {
		b.Run(w.String(), func(b *testing.B) {
			at := int64(1_795_000_000_000)
			for b.Loop() {
				at += 997
				_ = w.Index(at)
			}
		})
	}
}

// Any instant, in any unit of a few zones, lies in the window Index names,
// between its Start and the next one's.
func FuzzIndexStart(f *testing.F) {
	zones := []string{"UTC", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kathmandu", "America/Havana", "Pacific/Apia"}
	f.Add(int64(1_700_000_000_000), uint8(0), uint8(1))
	f.Add(int64(-62_135_596_800_000), uint8(3), uint8(4))
	f.Add(int64(253_402_300_799_000), uint8(5), uint8(2))
	f.Fuzz(func(t *testing.T, at int64, zone, unit uint8) {
		w := Window{Unit(unit%4 + 1), zones[int(zone)%len(zones)]}
		at %= 1 << 55 // about a million years either side of 1970
		i := w.Index(at)
		if s, e := w.Start(i), w.Start(i+1); !(s <= at && at < e) {
			t.Fatalf("%s: %d is in window %d, which runs from %d to %d", w, at, i, s, e)
		}
	})
}
