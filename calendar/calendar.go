// Package calendar maps instants to the calendar windows of a time zone:
// its hours, days, weeks (Monday first, as ISO 8601) and months.
//
// A window's index counts windows from the one holding the Unix epoch, so
// the number of boundaries between two instants is the difference of
// their indexes, and Start maps an index back to the window's first
// millisecond. Days, weeks and months are the zone's: a day in
// Europe/Berlin lasts 23 hours in March and 25 in October. Hours are real
// hours that begin where the zone's clock shows a whole hour.
//
// Time zones are IANA names (UTC, Europe/Berlin, America/New_York). They
// are read from the system's time zone database, or from the copy built
// into the binary (time/tzdata) where it has none; replicas that must
// agree on boundaries should run with the same database.
package calendar

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // a zone database on machines without one
)

// Unit is the length of a calendar window.
type Unit uint8

// The units of a window. Their values are stored: they must not change.
const (
	// Hour is an hour that begins where the zone's clock shows a whole hour.
	Hour Unit = iota + 1
	// Day begins at the zone's midnight.
	Day
	// Week begins at the zone's midnight between Sunday and Monday.
	Week
	// Month begins at the zone's midnight of its first day.
	Month
)

var unitNames = [...]string{Hour: "hour", Day: "day", Week: "week", Month: "month"}

// String returns "hour", "day", "week" or "month".
func (u Unit) String() string {
	if u >= Hour && u <= Month {
		return unitNames[u]
	}
	return "unit(" + strconv.Itoa(int(u)) + ")"
}

// ParseUnit reads a Unit's String.
func ParseUnit(s string) (Unit, bool) {
	for u := Hour; u <= Month; u++ {
		if unitNames[u] == s {
			return u, true
		}
	}
	return 0, false
}

// A Window is a unit of a time zone's calendar, written "month@UTC" or
// "day@Europe/Berlin". The zero Window is none: a limit without one
// refills continuously. Windows are comparable values: two are equal when
// their unit and zone name are.
type Window struct {
	Unit Unit
	Zone string // an IANA time zone name
}

// IsZero reports whether w is no window.
func (w Window) IsZero() bool { return w == Window{} }

// String returns w as Parse reads it, e.g. "month@UTC"; "" for none.
func (w Window) String() string {
	if w.IsZero() {
		return ""
	}
	return w.Unit.String() + "@" + w.Zone
}

// Errors of Parse and Validate, matched with errors.Is.
var (
	// ErrUnknownUnit is a unit that is not hour, day, week or month.
	ErrUnknownUnit = errors.New("unknown calendar unit (want hour, day, week or month)")
	// ErrUnknownZone is a zone name the time zone database does not hold.
	ErrUnknownZone = errors.New("unknown time zone")
)

// Parse reads "UNIT@ZONE", e.g. "month@UTC" or "day@Europe/Berlin".
func Parse(s string) (Window, error) {
	unit, zone, ok := strings.Cut(s, "@")
	if !ok {
		return Window{}, errors.New(`missing "@" and time zone (want UNIT@ZONE, e.g. month@UTC)`)
	}
	u, ok := ParseUnit(unit)
	if !ok {
		return Window{}, ErrUnknownUnit
	}
	w := Window{Unit: u, Zone: zone}
	return w, w.Validate()
}

// Validate reports whether w's unit is known and its zone is in the time
// zone database. "Local" is refused: it would differ from machine to
// machine.
func (w Window) Validate() error {
	if w.Unit < Hour || w.Unit > Month {
		return ErrUnknownUnit
	}
	_, err := zone(w.Zone)
	return err
}

// zones caches loaded zones by name: loading one reads and parses a file,
// and a zone's rules never change while the process runs. Only names the
// database holds are kept, so it holds at most the database's ~600 zones.
var zones sync.Map // string -> *time.Location

func zone(name string) (*time.Location, error) {
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	if name == "" || name == "Local" || len(name) > 64 {
		return nil, ErrUnknownZone
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, ErrUnknownZone
	}
	zones.Store(name, loc)
	return loc, nil
}

// location returns w's zone, UTC if it cannot be loaded (Validate has
// refused it before it reaches arithmetic).
func (w Window) location() *time.Location {
	loc, err := zone(w.Zone)
	if err != nil {
		return time.UTC
	}
	return loc
}

const (
	// horizon bounds the instants Index distinguishes (Unix milliseconds,
	// about 36 million years): every calendar computation stays far
	// inside the int64 range.
	horizon   = int64(1) << 60
	msPerHour = int64(time.Hour / time.Millisecond)
	msPerDay  = 24 * msPerHour
)

// Index returns the index of the window that holds the instant ms (Unix
// milliseconds): windows are counted from the one holding the Unix epoch,
// and Index never decreases as ms grows (but for hours in the few zones
// whose clocks move by a fraction of an hour, see hourPhase).
func (w Window) Index(ms int64) int64 {
	ms = max(-horizon, min(ms, horizon))
	t := time.UnixMilli(ms).In(w.location())
	switch w.Unit {
	case Hour:
		return floorDiv(ms+hourPhase(t), msPerHour)
	case Week:
		return floorDiv(dayNumber(t)+3, 7) // 1970-01-01 was a Thursday
	case Month:
		y, m, _ := t.Date()
		return int64(y-1970)*12 + int64(m) - 1
	}
	return dayNumber(t)
}

// Start returns the first millisecond of window i: the least instant
// whose Index is i or more. A window the zone's clock skips (a day Samoa
// left out) starts where the next one does: it lasts nothing.
//
// Beyond the horizon (windows some 36 million years from 1970) Start
// returns math.MaxInt64 (never) or, before it, math.MinInt64.
func (w Window) Start(i int64) int64 {
	if lim := horizon / (w.MaxMillis() / 2); i > lim || i < -lim {
		if i > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	s := w.guess(i)
	if w.Index(s) >= i && w.Index(s-1) < i {
		return s
	}
	// The clock changed near the boundary (a midnight that does not exist,
	// a skipped day): find it by bisection. No zone moves its clock by
	// more than a few days at once.
	lo, hi := s-4*msPerDay, s+4*msPerDay
	for w.Index(lo) >= i {
		lo -= 4 * msPerDay
	}
	for w.Index(hi) < i {
		hi += 4 * msPerDay
	}
	for hi-lo > 1 { // Index(lo) < i <= Index(hi)
		mid := lo + (hi-lo)/2
		if w.Index(mid) >= i {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// guess is Start(i) computed from the calendar: right unless the clock
// changes at the boundary.
func (w Window) guess(i int64) int64 {
	loc := w.location()
	switch w.Unit {
	case Hour:
		s := i * msPerHour
		return s - hourPhase(time.UnixMilli(s).In(loc))
	case Week:
		return dayStart(7*i-3, loc)
	case Month:
		y, m := 1970+floorDiv(i, 12), time.Month(i-floorDiv(i, 12)*12+1)
		return time.Date(int(y), m, 1, 0, 0, 0, 0, loc).UnixMilli()
	}
	return dayStart(i, loc)
}

// MaxMillis bounds the length of w's windows in milliseconds: an hour and
// a half (a clock moved by half an hour), 26 hours, a week and 2 hours,
// 31 days and 2 hours.
func (w Window) MaxMillis() int64 {
	switch w.Unit {
	case Hour:
		return msPerHour * 3 / 2
	case Week:
		return 7*msPerDay + 2*msPerHour
	case Month:
		return 31*msPerDay + 2*msPerHour
	}
	return msPerDay + 2*msPerHour
}

// hourPhase is how far past a whole UTC hour the zone's whole hours fall
// at t, in milliseconds (30 minutes in Asia/Kolkata, 45 in Asia/Kathmandu,
// 0 in most zones whatever their DST).
func hourPhase(t time.Time) int64 {
	_, off := t.Zone()
	return (int64(off)%3600 + 3600) % 3600 * 1000
}

// dayNumber is the number of t's date in its zone, counted in days from
// 1970-01-01.
func dayNumber(t time.Time) int64 {
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
}

// dayStart is the zone's midnight that begins day number n.
func dayStart(n int64, loc *time.Location) int64 {
	y, m, d := time.Unix(n*86400, 0).UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, loc).UnixMilli()
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
