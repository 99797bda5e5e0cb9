package model

import "time"

// UnixMilli is t in Unix milliseconds, 0 for the zero time: how stored
// records and the wire format say "no time" (no expiry, not deleted).
func UnixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// FromUnixMilli undoes UnixMilli, in UTC: 0 is the zero time.
func FromUnixMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
