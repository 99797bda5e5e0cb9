package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

const hour = int64(3_600_000)

// RunUsage is the conformance suite of store.UsageStore. newStore is called
// once per case; every case uses its own random namespace.
func RunUsage(t *testing.T, newStore func(t *testing.T) store.UsageStore) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, s store.UsageStore, ns string)
	}{
		{"AddsAndLists", usageAddsAndLists},
		{"WindowsApart", usageWindowsApart},
		{"ExactlyOnce", usageExactlyOnce},
		{"Refunds", usageRefunds},
		{"QueryByEntity", usageQueryByEntity},
		{"QueryByResource", usageQueryByResource},
		{"Paging", usagePaging},
		{"Expiry", usageExpiry},
		{"NamespacesApart", usageNamespacesApart},
		{"BadQueries", usageBadQueries},
		{"ConcurrentAdds", usageConcurrentAdds},
	}
	for _, c := range cases {
		t.Run("Usage/"+c.name, func(t *testing.T) {
			c.fn(t, newStore(t), newNamespace(t))
		})
	}
}

func hourKey(entity, resource string, start int64) store.UsageKey {
	return store.UsageKey{Entity: entity, Resource: resource, Window: store.Hourly, Start: start}
}

func inc(k store.UsageKey, source, seq string, events int64, consumed map[string]int64) store.UsageIncrement {
	return store.UsageIncrement{Key: k, Consumed: consumed, Events: events, Source: source, Seq: seq}
}

func mustAdd(t *testing.T, s store.UsageStore, ns string, incs ...store.UsageIncrement) {
	t.Helper()
	if err := s.AddUsage(context.Background(), ns, incs); err != nil {
		t.Fatalf("AddUsage: %v", err)
	}
}

func mustList(t *testing.T, s store.UsageStore, ns string, q store.UsageQuery) []store.UsageSnapshot {
	t.Helper()
	out, err := s.ListUsage(context.Background(), ns, q)
	if err != nil {
		t.Fatalf("ListUsage(%+v): %v", q, err)
	}
	return out
}

// summary renders snapshots for comparison.
func summary(snaps []store.UsageSnapshot) []string {
	out := make([]string, len(snaps))
	for i, s := range snaps {
		out[i] = fmt.Sprintf("%s/%s/%s@%d events=%d %v", s.Key.Entity, s.Key.Resource, s.Key.Window, (s.Key.Start-t0h)/hour, s.Events, s.Consumed)
	}
	return out
}

func expect(t *testing.T, got []store.UsageSnapshot, want ...string) {
	t.Helper()
	g := summary(got)
	if fmt.Sprint(g) != fmt.Sprint(want) {
		t.Errorf("snapshots\n got %q\nwant %q", g, want)
	}
}

var t0h = store.Hourly.Start(T0)

func usageAddsAndLists(t *testing.T, s store.UsageStore, ns string) {
	k := hourKey("key-1", "api", t0h)
	mustAdd(t, s, ns, inc(k, "a", "001", 1, map[string]int64{"rpm": 1000, "tpm": 500_000}))
	mustAdd(t, s, ns, inc(k, "a", "002", 1, map[string]int64{"rpm": 1000}), inc(k, "a", "003", 0, map[string]int64{"tpm": 250_000}))
	got := mustList(t, s, ns, store.UsageQuery{Entity: "key-1", Resource: "api", Window: store.Hourly, From: t0h, To: t0h + hour})
	if len(got) != 1 || got[0].Key != k || got[0].Events != 2 || !maps.Equal(got[0].Consumed, map[string]int64{"rpm": 2000, "tpm": 750_000}) {
		t.Errorf("snapshot %+v", got)
	}
}

func usageWindowsApart(t *testing.T, s store.UsageStore, ns string) {
	day := store.Daily.Start(T0)
	mustAdd(t, s, ns,
		inc(hourKey("k", "api", t0h), "a", "1", 1, map[string]int64{"rpm": 1000}),
		inc(store.UsageKey{Entity: "k", Resource: "api", Window: store.Daily, Start: day}, "a", "1", 1, map[string]int64{"rpm": 1000}))
	mustAdd(t, s, ns,
		inc(hourKey("k", "api", t0h+hour), "a", "2", 1, map[string]int64{"rpm": 1000}),
		inc(store.UsageKey{Entity: "k", Resource: "api", Window: store.Daily, Start: day}, "a", "2", 1, map[string]int64{"rpm": 1000}))
	hours := mustList(t, s, ns, store.UsageQuery{Entity: "k", Window: store.Hourly, From: day, To: day + 24*hour})
	days := mustList(t, s, ns, store.UsageQuery{Entity: "k", Window: store.Daily, From: day, To: day + 24*hour})
	if len(hours) != 2 || len(days) != 1 || days[0].Events != 2 || days[0].Consumed["rpm"] != 2000 {
		t.Errorf("hours %q, days %q", summary(hours), summary(days))
	}
}

func usageExactlyOnce(t *testing.T, s store.UsageStore, ns string) {
	k := hourKey("k", "api", t0h)
	batch := []store.UsageIncrement{
		inc(k, "shard-1", "0005", 1, map[string]int64{"rpm": 1000}),
		inc(k, "shard-1", "0007", 1, map[string]int64{"rpm": 1000}),
	}
	mustAdd(t, s, ns, batch...)
	mustAdd(t, s, ns, batch...)                                                    // redelivered
	mustAdd(t, s, ns, inc(k, "shard-1", "0006", 1, map[string]int64{"rpm": 1000})) // older than applied
	mustAdd(t, s, ns, inc(k, "shard-2", "0001", 1, map[string]int64{"rpm": 1000})) // another source
	mustAdd(t, s, ns, inc(k, "shard-1", "0008", 1, map[string]int64{"rpm": 1000}))
	expect(t, mustList(t, s, ns, store.UsageQuery{Entity: "k", Window: store.Hourly, From: t0h, To: t0h + hour}),
		"k/api/hour@0 events=4 map[rpm:4000]")
}

func usageRefunds(t *testing.T, s store.UsageStore, ns string) {
	k := hourKey("k", "api", t0h)
	mustAdd(t, s, ns, inc(k, "a", "1", 1, map[string]int64{"tpm": 4000_000}), inc(k, "a", "2", 0, map[string]int64{"tpm": -1500_000}))
	expect(t, mustList(t, s, ns, store.UsageQuery{Entity: "k", Window: store.Hourly, From: t0h, To: t0h + hour}),
		"k/api/hour@0 events=1 map[tpm:2500000]")
}

func seedGrid(t *testing.T, s store.UsageStore, ns string) {
	seq := 0
	for _, e := range []string{"b-key", "a-key"} {
		for _, r := range []string{"chat", "api"} {
			for h := int64(0); h < 3; h++ {
				seq++
				mustAdd(t, s, ns, inc(hourKey(e, r, t0h+h*hour), "a", fmt.Sprintf("%04d", seq), 1, map[string]int64{"rpm": 1000}))
			}
		}
	}
}

func usageQueryByEntity(t *testing.T, s store.UsageStore, ns string) {
	seedGrid(t, s, ns)
	expect(t, mustList(t, s, ns, store.UsageQuery{Entity: "a-key", Window: store.Hourly, From: t0h + hour, To: t0h + 3*hour}),
		"a-key/api/hour@1 events=1 map[rpm:1000]", "a-key/api/hour@2 events=1 map[rpm:1000]",
		"a-key/chat/hour@1 events=1 map[rpm:1000]", "a-key/chat/hour@2 events=1 map[rpm:1000]")
	expect(t, mustList(t, s, ns, store.UsageQuery{Entity: "a-key", Resource: "chat", Window: store.Hourly, From: t0h, To: t0h + hour}),
		"a-key/chat/hour@0 events=1 map[rpm:1000]")
	expect(t, mustList(t, s, ns, store.UsageQuery{Entity: "a-key", Window: store.Daily, From: t0h, To: t0h + 24*hour}))
}

func usageQueryByResource(t *testing.T, s store.UsageStore, ns string) {
	seedGrid(t, s, ns)
	expect(t, mustList(t, s, ns, store.UsageQuery{Resource: "api", Window: store.Hourly, From: t0h, To: t0h + 2*hour}),
		"a-key/api/hour@0 events=1 map[rpm:1000]", "b-key/api/hour@0 events=1 map[rpm:1000]",
		"a-key/api/hour@1 events=1 map[rpm:1000]", "b-key/api/hour@1 events=1 map[rpm:1000]")
}

func usagePaging(t *testing.T, s store.UsageStore, ns string) {
	seedGrid(t, s, ns)
	q := store.UsageQuery{Entity: "b-key", Window: store.Hourly, From: t0h, To: t0h + 3*hour, Limit: 4}
	var all []store.UsageSnapshot
	for page := 0; ; page++ {
		got := mustList(t, s, ns, q)
		all = append(all, got...)
		if len(got) < q.Limit || page > 5 {
			break
		}
		q.After = got[len(got)-1].Cursor
	}
	expect(t, all,
		"b-key/api/hour@0 events=1 map[rpm:1000]", "b-key/api/hour@1 events=1 map[rpm:1000]", "b-key/api/hour@2 events=1 map[rpm:1000]",
		"b-key/chat/hour@0 events=1 map[rpm:1000]", "b-key/chat/hour@1 events=1 map[rpm:1000]", "b-key/chat/hour@2 events=1 map[rpm:1000]")
}

func usageExpiry(t *testing.T, s store.UsageStore, ns string) {
	k := hourKey("k", "api", t0h)
	a := inc(k, "a", "1", 1, map[string]int64{"rpm": 1000})
	a.Expires = T0 + 10*hour
	b := inc(k, "a", "2", 1, map[string]int64{"rpm": 1000})
	b.Expires = T0 + 5*hour // an earlier retention does not shorten it
	mustAdd(t, s, ns, a, b)
	q := store.UsageQuery{Entity: "k", Window: store.Hourly, From: t0h, To: t0h + hour, Now: T0 + 9*hour}
	if got := mustList(t, s, ns, q); len(got) != 1 || got[0].Expires != T0+10*hour {
		t.Errorf("before expiry: %+v", got)
	}
	q.Now = T0 + 10*hour
	expect(t, mustList(t, s, ns, q))
}

func usageNamespacesApart(t *testing.T, s store.UsageStore, ns string) {
	other := newNamespace(t)
	mustAdd(t, s, ns, inc(hourKey("k", "api", t0h), "a", "1", 1, map[string]int64{"rpm": 1000}))
	mustAdd(t, s, other, inc(hourKey("k", "api", t0h), "a", "1", 1, map[string]int64{"rpm": 5000}))
	expect(t, mustList(t, s, ns, store.UsageQuery{Entity: "k", Window: store.Hourly, From: t0h, To: t0h + hour}),
		"k/api/hour@0 events=1 map[rpm:1000]")
}

func usageBadQueries(t *testing.T, s store.UsageStore, ns string) {
	for _, q := range []store.UsageQuery{
		{Window: store.Hourly, From: t0h, To: t0h + hour},                                  // neither entity nor resource
		{Entity: "k", Window: "week", From: t0h, To: t0h + hour},                           // bad window
		{Entity: "k", Window: store.Hourly, From: t0h, To: t0h + hour, Limit: -1},          // bad limit
		{Entity: "k", Window: store.Hourly, From: t0h, To: t0h + hour, Limit: 1_000_000},   // too large
		{Entity: "k", Window: store.Hourly, From: t0h, To: t0h + hour, After: "\x00bogus"}, // bad cursor
	} {
		if _, err := s.ListUsage(context.Background(), ns, q); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("ListUsage(%+v) = %v, want a validation error", q, err)
		}
	}
	bad := inc(store.UsageKey{Entity: "k", Resource: "api", Window: "week", Start: t0h}, "a", "1", 1, nil)
	if err := s.AddUsage(context.Background(), ns, []store.UsageIncrement{bad}); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("AddUsage of a bad window = %v, want a validation error", err)
	}
}

func usageConcurrentAdds(t *testing.T, s store.UsageStore, ns string) {
	k := hourKey("k", "api", t0h)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 10 {
				mustAdd(t, s, ns, inc(k, fmt.Sprintf("src-%d", w), fmt.Sprintf("%04d", i), 1, map[string]int64{"rpm": 1000}))
			}
		})
	}
	wg.Wait()
	expect(t, mustList(t, s, ns, store.UsageQuery{Entity: "k", Window: store.Hourly, From: t0h, To: t0h + hour}),
		"k/api/hour@0 events=80 map[rpm:80000]")
}
