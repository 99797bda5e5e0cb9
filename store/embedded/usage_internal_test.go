package embedded

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// White-box tests of the usage key spaces: expiry deletion, index
// consistency and the encodings.

const hourMS = int64(3_600_000)

func hourly(entity, resource string, start int64) store.UsageKey {
	return store.UsageKey{Entity: entity, Resource: resource, Window: store.Hourly, Start: start}
}

func addUsage(t *testing.T, s *Store, incs ...store.UsageIncrement) {
	t.Helper()
	if err := s.AddUsage(t.Context(), "ns", incs); err != nil {
		t.Fatalf("AddUsage: %v", err)
	}
}

func expiring(k store.UsageKey, seq string, expires int64) store.UsageIncrement {
	return store.UsageIncrement{Key: k, Consumed: map[string]int64{"rpm": 1000}, Events: 1, Source: "a", Seq: seq, Expires: expires}
}

// usageState checks that the three usage buckets of namespace "ns" agree
// (every snapshot indexed by resource, and by expiry if it expires; no
// other index entry) and returns the snapshots' keys, sorted.
func usageState(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		u, ok := usageBucketsOf(nsBucket(tx, "ns"))
		if !ok {
			return nil
		}
		expiring := 0
		err := u.snaps.ForEach(func(k, v []byte) error {
			key, ok := parseUsageKey(k)
			rec, err := decodeUsageRec(v)
			if !ok || err != nil {
				return fmt.Errorf("record %q: %v, %v", k, ok, err)
			}
			if u.byRes.Get(byResKey(key)) == nil {
				t.Errorf("%+v is not in usage-by-resource", key)
			}
			if rec.expires != 0 {
				expiring++
				if u.expiry.Get(expiryKey(rec.expires, k)) == nil {
					t.Errorf("%+v is not in usage-expiry at %d", key, rec.expires)
				}
			}
			out = append(out, fmt.Sprintf("%s/%s@%d", key.Entity, key.Resource, (key.Start-store.Hourly.Start(t0))/hourMS))
			return nil
		})
		if n := u.byRes.Stats().KeyN; n != len(out) {
			t.Errorf("usage-by-resource holds %d keys for %d snapshots", n, len(out))
		}
		if n := u.expiry.Stats().KeyN; n != expiring {
			t.Errorf("usage-expiry holds %d keys for %d expiring snapshots", n, expiring)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// Snapshots whose Expires passed (by the store's clock) are deleted from
// every key space by the next AddUsage of their namespace; a snapshot
// whose expiry was pushed back is deleted at its new expiry, not its old.
func TestUsageExpiredAreDeleted(t *testing.T) {
	clk := clock.NewFake(time.UnixMilli(t0))
	s, path := openTest(t, WithClock(clk))
	h := store.Hourly.Start(t0)
	addUsage(t, s,
		expiring(hourly("a", "api", h), "1", t0+hourMS),
		expiring(hourly("b", "api", h), "1", t0+2*hourMS),
		expiring(hourly("c", "api", h), "1", 0), // never expires
		expiring(hourly("d", "chat", h), "1", t0+hourMS))
	if got, want := usageState(t, s), []string{"a/api@0", "b/api@0", "c/api@0", "d/chat@0"}; !slices.Equal(got, want) {
		t.Fatalf("snapshots %v, want %v", got, want)
	}
	clk.Set(time.UnixMilli(t0 + hourMS - 1))
	addUsage(t, s, expiring(hourly("e", "api", h), "1", 0))
	if got, want := usageState(t, s), []string{"a/api@0", "b/api@0", "c/api@0", "d/chat@0", "e/api@0"}; !slices.Equal(got, want) {
		t.Fatalf("before expiry: %v, want %v", got, want)
	}
	clk.Set(time.UnixMilli(t0 + hourMS)) // expired at or before now: gone
	addUsage(t, s, expiring(hourly("b", "api", h), "2", t0+5*hourMS))
	if got, want := usageState(t, s), []string{"b/api@0", "c/api@0", "e/api@0"}; !slices.Equal(got, want) {
		t.Fatalf("after a's and d's expiry: %v, want %v", got, want)
	}
	for _, q := range []store.UsageQuery{
		{Entity: "a", Window: store.Hourly, From: h, To: h + 1},
		{Resource: "chat", Window: store.Hourly, From: h, To: h + 1},
	} {
		if got, err := s.ListUsage(t.Context(), "ns", q); err != nil || len(got) != 0 {
			t.Errorf("ListUsage(%+v) = %+v, %v; want nothing", q, got, err)
		}
	}
	clk.Set(time.UnixMilli(t0 + 3*hourMS)) // b's first expiry: b stays
	addUsage(t, s, expiring(hourly("e", "api", h), "2", 0))
	if got, want := usageState(t, s), []string{"b/api@0", "c/api@0", "e/api@0"}; !slices.Equal(got, want) {
		t.Fatalf("after b's first expiry: %v, want %v", got, want)
	}
	// The expiry index survives a restart.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	clk.Set(time.UnixMilli(t0 + 5*hourMS))
	addUsage(t, s, expiring(hourly("e", "api", h), "3", 0))
	if got, want := usageState(t, s), []string{"c/api@0", "e/api@0"}; !slices.Equal(got, want) {
		t.Fatalf("after b's expiry: %v, want %v", got, want)
	}
	got, err := s.ListUsage(t.Context(), "ns", store.UsageQuery{Entity: "e", Window: store.Hourly, From: h, To: h + 1})
	if err != nil || len(got) != 1 || got[0].Events != 3 {
		t.Errorf("e = %+v, %v; want 3 events", got, err)
	}
}

// DeleteEntity deletes the entity's snapshots from every key space, and
// only its own (lp makes "x" no prefix of "xy").
func TestDeleteEntityDeletesUsageIndexes(t *testing.T) {
	s, _ := openTest(t, WithClock(clock.NewFake(time.UnixMilli(t0))))
	ctx := t.Context()
	h := store.Hourly.Start(t0)
	for i, e := range []string{"x", "xy"} {
		if err := s.CreateEntity(ctx, "ns", model.Entity{ID: e}, model.AuditEvent{ID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
		addUsage(t, s,
			expiring(hourly(e, "api", h), "1", t0+hourMS),
			expiring(hourly(e, "chat", h+hourMS), "1", 0),
			expiring(store.UsageKey{Entity: e, Resource: "api", Window: store.Daily, Start: store.Daily.Start(t0)}, "1", t0+24*hourMS))
	}
	if err := s.DeleteEntity(ctx, "ns", "x", model.AuditEvent{ID: "9"}); err != nil {
		t.Fatal(err)
	}
	// usageState renders starts in hours from h, daily ones included.
	want := []string{fmt.Sprintf("xy/api@%d", (store.Daily.Start(t0)-h)/hourMS), "xy/api@0", "xy/chat@1"}
	if got := usageState(t, s); !slices.Equal(got, want) {
		t.Errorf("after DeleteEntity(x): %v, want %v", got, want)
	}
}

// One AddUsage deletes at most usageSweepMin plus its number of increments
// of expired snapshots, oldest expiry first; the next calls go on.
func TestUsageSweepIsBounded(t *testing.T) {
	clk := clock.NewFake(time.UnixMilli(t0))
	s, _ := openTest(t, WithClock(clk))
	h := store.Hourly.Start(t0)
	const n = 2*usageSweepMin + 10
	var incs []store.UsageIncrement
	for i := range n {
		incs = append(incs, expiring(hourly(fmt.Sprintf("e%03d", i), "api", h), "1", t0+1+int64(n-i)))
	}
	addUsage(t, s, incs...)
	clk.Set(time.UnixMilli(t0 + hourMS))
	left := n
	for call := range 3 {
		addUsage(t, s, expiring(hourly("busy", "api", h), fmt.Sprint(call), 0), expiring(hourly("busy", "api", h+hourMS), fmt.Sprint(call), 0))
		left = max(0, left-(usageSweepMin+2))
		snaps := usageState(t, s)
		if got := len(snaps) - 2; got != left {
			t.Fatalf("after call %d: %d expired snapshots left, want %d", call, got, left)
		}
		// The latest expiries are left.
		if left > 0 && !slices.Contains(snaps, "e000/api@0") {
			t.Errorf("after call %d: the snapshot expiring last was deleted first", call)
		}
	}
}

// A usage key after its fixed prefix is the snapshot's cursor in an entity
// listing, and an index key its cursor in a resource listing: the scans
// seek to prefix + cursor, so the encodings must agree exactly.
func TestUsageKeysAreCursors(t *testing.T) {
	for _, k := range []store.UsageKey{
		hourly("key-1", "api", store.Hourly.Start(t0)),
		hourly("a", "openai/gpt-4o", 0),
		hourly("a", "r", -hourMS),
		{Entity: "e:1@x", Resource: "r", Window: store.Daily, Start: math.MinInt64},
		{Entity: "e", Resource: "r", Window: store.Daily, Start: math.MaxInt64},
	} {
		byEntity := store.UsageQuery{Entity: k.Entity, Window: k.Window}
		uk := usageKey(k)
		prefix := entityWindowPrefix(k.Entity, k.Window)
		if !bytes.HasPrefix(uk, prefix) || string(uk[len(prefix):]) != byEntity.UsageCursor(k) {
			t.Errorf("usage key %q, want prefix %q + cursor %q", uk, prefix, byEntity.UsageCursor(k))
		}
		byResource := store.UsageQuery{Resource: k.Resource, Window: k.Window}
		rk := byResKey(k)
		prefix = resourceWindowPrefix(k.Resource, k.Window)
		if !bytes.HasPrefix(rk, prefix) || string(rk[len(prefix):]) != byResource.UsageCursor(k) {
			t.Errorf("index key %q, want prefix %q + cursor %q", rk, prefix, byResource.UsageCursor(k))
		}
		if got, ok := parseUsageKey(uk); !ok || got != k {
			t.Errorf("parseUsageKey(%q) = %+v, %v; want %+v", uk, got, ok, k)
		}
	}
	// Expiry keys sort by expiry, negative ones included.
	var keys [][]byte
	for _, e := range []int64{math.MinInt64, -5, -1, 0, 1, t0, math.MaxInt64} {
		keys = append(keys, expiryKey(e, []byte("k")))
		if got, uk, ok := splitExpiryKey(keys[len(keys)-1]); !ok || got != e || string(uk) != "k" {
			t.Errorf("splitExpiryKey(expiryKey(%d)) = %d, %q, %v", e, got, uk, ok)
		}
	}
	if !slices.IsSortedFunc(keys, bytes.Compare) {
		t.Error("expiry keys do not sort by expiry")
	}
}

// A usage record survives encoding exactly, and every truncation of one,
// or another version, is refused.
func TestUsageRecordCodec(t *testing.T) {
	r := &usageRec{
		consumed: map[string]int64{"rpm": 12_000, "tpm": -3_000_000, "zero": 0},
		events:   42,
		expires:  t0 + 90*24*hourMS,
		applied:  map[string]string{"local-abc": "0000000000000042", "shard-1": "49650000000000000000000000000000000000001"},
	}
	b := appendUsageRec(nil, r)
	got, err := decodeUsageRec(b)
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("decode(encode(r)) = %+v, %v; want %+v", got, err, r)
	}
	if again := appendUsageRec(nil, got); !bytes.Equal(again, b) {
		t.Error("encoding is not deterministic")
	}
	for i := range len(b) {
		if _, err := decodeUsageRec(b[:i]); err == nil {
			t.Errorf("a record truncated to %d of %d bytes decoded", i, len(b))
		}
	}
	if _, err := decodeUsageRec(append(slices.Clone(b), 0)); err == nil {
		t.Error("a record with a trailing byte decoded")
	}
	b[0] = usageRecordVersion + 1
	if _, err := decodeUsageRec(b); err == nil {
		t.Error("a record of another version decoded")
	}
	empty := &usageRec{consumed: map[string]int64{}, applied: map[string]string{}}
	if got, err := decodeUsageRec(appendUsageRec(nil, empty)); err != nil || !reflect.DeepEqual(got, empty) {
		t.Errorf("empty record: %+v, %v", got, err)
	}
}
