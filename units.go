package tollgate

import "time"

// unixNano is a time in Unix nanoseconds: the time of an acquire, a peek or
// a cache entry's expiry. The acquire path carries it rather than a
// time.Time (24 bytes, and slower to compare and add to); the store is told
// the time in Unix milliseconds (milli), and durations are time.Durations.
type unixNano int64

// nanoOf returns t in Unix nanoseconds.
func nanoOf(t time.Time) unixNano { return unixNano(t.UnixNano()) }

// add returns t plus d.
func (t unixNano) add(d time.Duration) unixNano { return t + unixNano(d) }

// milli returns t in Unix milliseconds, rounded down as time.Time.UnixMilli
// rounds: the time the store is told.
func (t unixNano) milli() int64 {
	ms := int64(t) / 1e6
	if int64(t)%1e6 < 0 {
		ms--
	}
	return ms
}
