package redis_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/calendar"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/redis"
)

// A bucket whose calendar quota is in debt expires no sooner than the
// quota is full again: windows after the write, not window indexes (a
// missing bucket is a full one). Checked after the acquire script and
// after the deltas script.
func TestQuotaBucketOutlivesItsDebt(t *testing.T) {
	s, raw, ns, ctx := newStore(t), rawClient(t, serverURL), randomID(t), context.Background()
	monthly := bucket.Params{Capacity: 3_000, Amount: 3_000, Period: 1, Window: calendar.Window{Unit: calendar.Month, Zone: "UTC"}}
	now := time.Date(2026, 11, 28, 21, 0, 0, 0, time.UTC).UnixMilli()
	k := store.BucketKey{Entity: "q", Resource: "api"}
	req := &store.ConsumeRequest{Now: now, Buckets: []store.BucketRequest{{Key: k,
		Limits: []store.LimitRequest{{Name: "tok", Params: monthly, Check: true, Amount: 3_000}}}}}
	if ok, err := s.Consume(ctx, ns, req); !ok || err != nil {
		t.Fatalf("Consume = %v, %v", ok, err)
	}
	pttl := func() int64 {
		t.Helper()
		var key string
		for _, k := range keysMatching(t, raw, "tg:{"+ns+"}:*") {
			if strings.Contains(k, "q") && strings.Contains(k, "api") {
				key = k
			}
		}
		ttl, err := raw.Do(ctx, raw.B().Pttl().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatalf("PTTL %s: %v", key, err)
		}
		return ttl
	}
	december := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	if got := pttl(); got < december-now {
		t.Errorf("empty until December: PTTL %d ms, want at least %d", got, december-now)
	}
	// 6 more owed: full again on 1 February 2027.
	if err := s.ApplyDeltas(ctx, ns, []store.Delta{{Key: k, Limit: "tok", Amount: 6_000, Params: monthly}}); err != nil {
		t.Fatal(err)
	}
	february := time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	if got := pttl(); got < february-now {
		t.Errorf("in debt until February: PTTL %d ms, want at least %d", got, february-now)
	}
	recs, err := s.ReadBuckets(ctx, ns, []store.BucketKey{k})
	if err != nil || recs[0] == nil {
		t.Fatalf("ReadBuckets = %v, %v", recs, err)
	}
	i := slices.IndexFunc(recs[0].Limits, func(l store.LimitState) bool { return l.Name == "tok" })
	if l := recs[0].Limits[i]; l.Params != monthly || bucket.RefillBetween(l.State, l.Params, recs[0].Refilled, now).Tokens != -6_000 {
		t.Errorf("read back %+v at %d, want the quota at -6000 millitokens", l, recs[0].Refilled)
	}
}

// The scripts' bound of a window's length is calendar's, unit by unit: a
// smaller one would expire a bucket in debt early.
func TestScriptWindowSpans(t *testing.T) {
	for u := calendar.Hour; u <= calendar.Month; u++ {
		want := u.String() + " = " + strconv.FormatInt(calendar.Window{Unit: u, Zone: "UTC"}.MaxMillis(), 10)
		if !strings.Contains(redis.LuaLimits, want) {
			t.Errorf("the scripts' B_SPANS lack %q", want)
		}
	}
}

// TestWideQuotaObserved debits a calendar quota past 2^53 millitokens, so
// that the script answers its excess as a decimal string rather than an
// integer: the state Go reads from it must be the one it reads from an
// integer, at the window the quota was decided in (the tokens left, not a
// state at some instant far from it).
func TestWideQuotaObserved(t *testing.T) {
	s, ns, ctx := newStore(t), randomID(t), context.Background()
	const capacity = 20_000_000_000_000_000 // millitokens: 2·10^16, above 2^53
	daily := bucket.Params{Capacity: capacity, Amount: capacity, Period: 1, Window: calendar.Window{Unit: calendar.Day, Zone: "UTC"}}
	now := time.Date(2026, 11, 28, 21, 0, 0, 0, time.UTC).UnixMilli()
	k := store.BucketKey{Entity: "q", Resource: "api"}
	for _, tc := range []struct {
		amount, left int64 // debited, then left
	}{
		{capacity / 2, capacity / 2}, // the excess 10^16: wide
		{capacity / 4, capacity / 4}, // 1.5·10^16: wide
		{capacity / 4, 0},            // 2·10^16: wide
	} {
		req := &store.ConsumeRequest{Now: now, Buckets: []store.BucketRequest{{Key: k,
			Limits: []store.LimitRequest{{Name: "tok", Params: daily, Check: true, Amount: tc.amount}}}}}
		if ok, err := s.Consume(ctx, ns, req); !ok || err != nil {
			t.Fatalf("Consume(%d) = %v, %v", tc.amount, ok, err)
		}
		read := &store.ConsumeRequest{Now: now, Buckets: []store.BucketRequest{{Key: k,
			Limits: []store.LimitRequest{{Name: "tok", Params: daily, Check: true}}}}}
		if _, err := s.Consume(ctx, ns, read); err != nil {
			t.Fatal(err)
		}
		if got := read.Buckets[0].Limits[0].Observed.Tokens; got != tc.left {
			t.Fatalf("after %d: %d millitokens observed, want %d", tc.amount, got, tc.left)
		}
	}
}
