package server

import "testing"

func TestRetryAfterHeaderDoesNotWrap(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want string
	}{
		{1, "1"},
		{2000, "2"},
		{2001, "3"},
		{16144, "17"},
		{1_000_000_000_001_000, "1000000000001"},
		{1<<63 - 1, "9223372036854776"},
	} {
		if got := retryAfterHeader(tc.ms); got != tc.want {
			t.Errorf("retryAfterHeader(%d) = %q, want %q", tc.ms, got, tc.want)
		}
	}
}
