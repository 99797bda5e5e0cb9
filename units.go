package tollgate

import (
	"math"
	"time"
)

// unixNano is a time in Unix nanoseconds: the time of an acquire, a peek or
// a cache entry's expiry. The acquire path carries it rather than a
// time.Time (24 bytes, and slower to compare and add to); the store is told
// the time in Unix milliseconds (milli), and durations are time.Durations.
type unixNano int64

// nanoOf returns t in Unix nanoseconds, which count the years 1678 to
// 2262: a time outside saturates at either end rather than wrap (for such
// a time, t.UnixNano is undefined).
func nanoOf(t time.Time) unixNano {
	switch s := t.Unix(); {
	case s >= math.MaxInt64/int64(time.Second):
		return math.MaxInt64
	case s <= math.MinInt64/int64(time.Second):
		return math.MinInt64
	}
	return unixNano(t.UnixNano())
}

// add returns t plus d, saturated at the ends of the range.
func (t unixNano) add(d time.Duration) unixNano {
	s := t + unixNano(d)
	if (s < t) != (d < 0) { // wrapped
		if d < 0 {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	return s
}

// milli returns t in Unix milliseconds, rounded down as time.Time.UnixMilli
// rounds: the time the store is told.
func (t unixNano) milli() int64 {
	if t >= 0 {
		return int64(uint64(t) / 1e6) // the usual case: cheaper unsigned
	}
	ms := int64(t) / 1e6
	if int64(t)%1e6 < 0 {
		ms--
	}
	return ms
}
