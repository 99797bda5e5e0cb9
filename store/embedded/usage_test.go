package embedded_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/embedded"
	"github.com/tollgate-rl/tollgate/store/memory"
)

const hourMS = int64(3_600_000)

func usageKey(entity, resource string, w store.Window, start int64) store.UsageKey {
	return store.UsageKey{Entity: entity, Resource: resource, Window: w, Start: start}
}

func usageInc(k store.UsageKey, source, seq string, events int64, consumed map[string]int64) store.UsageIncrement {
	return store.UsageIncrement{Key: k, Consumed: consumed, Events: events, Source: source, Seq: seq}
}

// listAll pages through q and returns every snapshot.
func listAll(t *testing.T, s store.UsageStore, ns string, q store.UsageQuery) []store.UsageSnapshot {
	t.Helper()
	var all []store.UsageSnapshot
	for {
		page, err := s.ListUsage(t.Context(), ns, q)
		if err != nil {
			t.Fatalf("ListUsage(%+v): %v", q, err)
		}
		all = append(all, page...)
		if q.Limit == 0 || len(page) < q.Limit {
			return all
		}
		q.After = page[len(page)-1].Cursor
	}
}

// render is snapshots as "entity/resource/window@start events consumed
// expires" lines, for comparison.
func render(snaps []store.UsageSnapshot) string {
	var b strings.Builder
	for _, s := range snaps {
		fmt.Fprintf(&b, "%s/%s/%s@%d events=%d %v expires=%d\n", s.Key.Entity, s.Key.Resource, s.Key.Window, s.Key.Start, s.Events, s.Consumed, s.Expires)
	}
	return b.String()
}

// AddUsage is durable when it returns and its exactly-once state survives
// a restart: after reopening, the snapshots are as they were, a redelivered
// (Source, Seq) changes nothing, and later ones still apply.
func TestUsageSurvivesRestart(t *testing.T) {
	ctx := t.Context()
	path := tempFile(t)
	// The store's clock at t0: the snapshots expire after it (by the
	// system clock, t0 is long past and they would be deleted).
	clk := embedded.WithClock(clock.NewFake(time.UnixMilli(t0)))
	s, err := embedded.Open(path, embedded.WithFlushInterval(time.Hour), clk)
	if err != nil {
		t.Fatal(err)
	}
	h := store.Hourly.Start(t0)
	d := store.Daily.Start(t0)
	batch := []store.UsageIncrement{
		usageInc(usageKey("key-a", "api", store.Hourly, h), "shard-1", "0001", 1, map[string]int64{"rpm": 1000, "tpm": 7000}),
		usageInc(usageKey("key-a", "api", store.Daily, d), "shard-1", "0001", 1, map[string]int64{"rpm": 1000, "tpm": 7000}),
		usageInc(usageKey("key-b", "api", store.Hourly, h), "shard-2", "0009", 2, map[string]int64{"rpm": 2000}),
		usageInc(usageKey("key-a", "api", store.Hourly, h+hourMS), "shard-1", "0002", 1, map[string]int64{"rpm": 1000}),
	}
	batch[0].Expires = t0 + 1000*hourMS
	if err := s.AddUsage(ctx, "ns", batch); err != nil {
		t.Fatal(err)
	}
	byEntity := store.UsageQuery{Entity: "key-a", Window: store.Hourly, From: d, To: d + 24*hourMS}
	byResource := store.UsageQuery{Resource: "api", Window: store.Hourly, From: d, To: d + 24*hourMS}
	daily := store.UsageQuery{Entity: "key-a", Window: store.Daily, From: d, To: d + 1}
	want := render(listAll(t, s, "ns", byEntity)) + render(listAll(t, s, "ns", byResource)) + render(listAll(t, s, "ns", daily))
	if strings.Count(want, "\n") != 6 {
		t.Fatalf("before restart:\n%s", want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, path, clk)
	got := func() string {
		return render(listAll(t, s, "ns", byEntity)) + render(listAll(t, s, "ns", byResource)) + render(listAll(t, s, "ns", daily))
	}
	if g := got(); g != want {
		t.Fatalf("after restart:\n%s\nwant:\n%s", g, want)
	}
	// The same batch again (a resend after a restart), and an older Seq.
	if err := s.AddUsage(ctx, "ns", batch); err != nil {
		t.Fatal(err)
	}
	older := usageInc(batch[0].Key, "shard-1", "0000", 1, map[string]int64{"rpm": 1000})
	if err := s.AddUsage(ctx, "ns", []store.UsageIncrement{older}); err != nil {
		t.Fatal(err)
	}
	if g := got(); g != want {
		t.Errorf("after redelivery:\n%s\nwant:\n%s", g, want)
	}
	// A later Seq applies.
	if err := s.AddUsage(ctx, "ns", []store.UsageIncrement{usageInc(batch[0].Key, "shard-1", "0003", 1, map[string]int64{"rpm": 1000})}); err != nil {
		t.Fatal(err)
	}
	snaps := listAll(t, s, "ns", store.UsageQuery{Entity: "key-a", Resource: "api", Window: store.Hourly, From: h, To: h + 1})
	if len(snaps) != 1 || snaps[0].Events != 2 || snaps[0].Consumed["rpm"] != 2000 || snaps[0].Consumed["tpm"] != 7000 || snaps[0].Expires != t0+1000*hourMS {
		t.Errorf("after a new Seq: %s", render(snaps))
	}
}

// Deleting an entity deletes its usage snapshots from every listing, and
// purging a namespace deletes its usage (counted in the progress).
func TestUsageGoesWithEntityAndNamespace(t *testing.T) {
	ctx := t.Context()
	path := tempFile(t)
	clk := embedded.WithClock(clock.NewFake(time.UnixMilli(t0))) // nothing expires
	s, err := embedded.Open(path, clk)
	if err != nil {
		t.Fatal(err)
	}
	h := store.Hourly.Start(t0)
	if err := s.CreateNamespace(ctx, model.Namespace{Name: "tenant", ID: "tenant-id"}); err != nil {
		t.Fatal(err)
	}
	var incs []store.UsageIncrement
	for i, e := range []string{"gone", "gone2", "stays"} { // gone2: lp(gone) is not a prefix of it
		if err := s.CreateEntity(ctx, "tenant-id", model.Entity{ID: e}, model.AuditEvent{ID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
		for _, r := range []string{"api", "chat"} {
			in := usageInc(usageKey(e, r, store.Hourly, h), "a", fmt.Sprint(i), 1, map[string]int64{"rpm": 1000})
			in.Expires = t0 + 1000*hourMS
			incs = append(incs, in, usageInc(usageKey(e, r, store.Daily, store.Daily.Start(t0)), "a", fmt.Sprint(i), 1, nil))
		}
	}
	if err := s.AddUsage(ctx, "tenant-id", incs); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteEntity(ctx, "tenant-id", "gone", model.AuditEvent{ID: "9"}); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, w := range []store.Window{store.Hourly, store.Daily} {
			from := w.Start(t0)
			if got := listAll(t, s, "tenant-id", store.UsageQuery{Entity: "gone", Window: w, From: from, To: from + 1}); len(got) != 0 {
				t.Errorf("%s: deleted entity's %s usage listed: %s", when, w, render(got))
			}
			for _, r := range []string{"api", "chat"} {
				got := listAll(t, s, "tenant-id", store.UsageQuery{Resource: r, Window: w, From: from, To: from + 1})
				if len(got) != 2 || got[0].Key.Entity != "gone2" || got[1].Key.Entity != "stays" {
					t.Errorf("%s: %s %s usage by resource:\n%s", when, r, w, render(got))
				}
			}
		}
	}
	check("after DeleteEntity")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, clk)
	check("after restart")
	// Usage comes back only with new usage.
	in := usageInc(usageKey("gone", "api", store.Hourly, h), "a", "9", 1, nil)
	if err := s.AddUsage(ctx, "tenant-id", []store.UsageIncrement{in}); err != nil {
		t.Fatal(err)
	}
	if got := listAll(t, s, "tenant-id", store.UsageQuery{Entity: "gone", Window: store.Hourly, From: h, To: h + 1}); len(got) != 1 || got[0].Events != 1 || len(got[0].Consumed) != 0 {
		t.Errorf("usage of a re-used entity id: %s", render(got))
	}

	if err := s.SetNamespaceDeleted(ctx, "tenant", time.UnixMilli(t0)); err != nil {
		t.Fatal(err)
	}
	deleted := 0
	if err := s.PurgeNamespace(ctx, "tenant", func(n int) { deleted = n }); err != nil {
		t.Fatal(err)
	}
	// 2 entities, 4 audit events (3 creations, a deletion), 9 snapshots
	// (8 of the 2 remaining entities, 1 of the re-used id).
	if want := 2 + 4 + 9; deleted != want {
		t.Errorf("PurgeNamespace deleted %d items, want %d", deleted, want)
	}
	if got := listAll(t, s, "tenant-id", store.UsageQuery{Resource: "api", Window: store.Hourly, From: h, To: h + 1}); len(got) != 0 {
		t.Errorf("purged namespace's usage listed: %s", render(got))
	}
}

// Input a usage key cannot hold is refused with a validation error, and a
// call with one bad increment writes none of its good ones.
func TestUsageBadInputIsRefused(t *testing.T) {
	ctx := t.Context()
	s := open(t, tempFile(t))
	h := store.Hourly.Start(t0)
	good := usageInc(usageKey("e", "api", store.Hourly, h), "a", "1", 1, map[string]int64{"rpm": 1000})
	huge := strings.Repeat("x", 40_000)
	for name, bad := range map[string]store.UsageKey{
		"bad window":       usageKey("e", "api", "week", h),
		"unaligned start":  usageKey("e", "api", store.Hourly, h+1),
		"empty entity":     usageKey("", "api", store.Hourly, h),
		"empty resource":   usageKey("e", "", store.Hourly, h),
		"huge entity":      usageKey(huge, "api", store.Hourly, h),
		"# in an entity":   usageKey("e#1", "api", store.Hourly, h),
		"# in a resource":  usageKey("e", "api#1", store.Hourly, h),
		"daily, unaligned": usageKey("e", "api", store.Daily, h+hourMS),
	} {
		in := good
		in.Key = bad
		var ve *model.ValidationError
		if err := s.AddUsage(ctx, "ns", []store.UsageIncrement{good, in}); !errors.As(err, &ve) || !errors.Is(err, model.ErrInvalid) {
			t.Errorf("AddUsage with %s = %v, want a *ValidationError", name, err)
		}
	}
	if err := s.AddUsage(ctx, "", []store.UsageIncrement{good}); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("AddUsage in namespace \"\" = %v, want a validation error", err)
	}
	if got := listAll(t, s, "ns", store.UsageQuery{Entity: "e", Window: store.Hourly, From: h, To: h + 1}); len(got) != 0 {
		t.Errorf("refused calls wrote %s", render(got))
	}
	if _, err := s.ListUsage(ctx, "", store.UsageQuery{Entity: "e", Window: store.Hourly, From: h, To: h + 1}); err != nil {
		t.Errorf("ListUsage in namespace \"\" = %v, want nothing", err)
	}
}

// Usage calls on a closed store fail with ErrClosed.
func TestUsageClosedStore(t *testing.T) {
	s, err := embedded.Open(tempFile(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	h := store.Hourly.Start(t0)
	if err := s.AddUsage(t.Context(), "ns", []store.UsageIncrement{usageInc(usageKey("e", "api", store.Hourly, h), "a", "1", 1, nil)}); !errors.Is(err, embedded.ErrClosed) {
		t.Errorf("AddUsage after Close = %v, want ErrClosed", err)
	}
	if _, err := s.ListUsage(t.Context(), "ns", store.UsageQuery{Entity: "e", Window: store.Hourly, From: h, To: h + 1}); !errors.Is(err, embedded.ErrClosed) {
		t.Errorf("ListUsage after Close = %v, want ErrClosed", err)
	}
}

// The range scans list exactly what the memory backend's filter-and-sort
// lists, page by page and cursor by cursor, for random snapshots (negative
// window starts, names that are prefixes of each other, expiries) and
// random queries: bounds, resources, Now, page sizes and cursors.
func TestUsageListsAsMemory(t *testing.T) {
	ctx := t.Context()
	// Time 0: no expiry passes, so neither store deletes anything the
	// other keeps.
	emb := open(t, tempFile(t), embedded.WithClock(clock.NewFake(time.UnixMilli(0))))
	mem := memory.New(memory.WithClock(clock.NewFake(time.UnixMilli(0))))
	rng := rand.New(rand.NewPCG(1, 2))
	entities := []string{"a", "ab", "a.b", "b", "a-1"}
	resources := []string{"api", "api2", "ap", "x/y", "api.v2"}
	windows := []store.Window{store.Hourly, store.Daily}
	starts := func(w store.Window) []int64 {
		d := w.Duration().Milliseconds()
		var out []int64
		for i := int64(-3); i <= 3; i++ {
			out = append(out, i*d, w.Start(t0)+i*d)
		}
		return out
	}
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	seqs := map[string]int{}
	for range 200 {
		var batch []store.UsageIncrement
		for range 1 + rng.IntN(5) {
			w := windows[rng.IntN(2)]
			ss := starts(w)
			src := pick([]string{"s1", "s2", "s3"})
			seqs[src] += rng.IntN(3) - 1 // replays and repeats too
			in := usageInc(usageKey(pick(entities), pick(resources), w, ss[rng.IntN(len(ss))]), src, fmt.Sprintf("%04d", seqs[src]+100),
				int64(rng.IntN(2)), map[string]int64{pick([]string{"rpm", "tpm"}): int64(rng.IntN(5000) - 1000)})
			in.Expires = []int64{0, 1000, 5000, t0}[rng.IntN(4)]
			batch = append(batch, in)
		}
		for _, s := range []store.UsageStore{emb, mem} {
			if err := s.AddUsage(ctx, "ns", batch); err != nil {
				t.Fatal(err)
			}
		}
	}
	bounds := func(w store.Window) []int64 {
		ss := starts(w)
		return append(ss, -1<<62, 1<<62, ss[2]+1, ss[9]-1, 0)
	}
	for i := range 3000 {
		w := windows[rng.IntN(2)]
		bs := bounds(w)
		q := store.UsageQuery{Window: w, From: bs[rng.IntN(len(bs))], To: bs[rng.IntN(len(bs))],
			Limit: rng.IntN(8), Now: []int64{0, 999, 1000, 4000, t0}[rng.IntN(5)]}
		if rng.IntN(2) == 0 {
			q.Entity = pick(entities)
			if rng.IntN(2) == 0 {
				q.Resource = pick(resources)
			}
		} else {
			q.Resource = pick(resources)
		}
		if rng.IntN(4) == 0 { // a cursor of a snapshot that may not exist
			k := usageKey(pick(entities), pick(resources), w, bs[rng.IntN(len(bs))])
			q.After = q.UsageCursor(k)
		}
		for page := 0; ; page++ {
			want, werr := mem.ListUsage(ctx, "ns", q)
			got, gerr := emb.ListUsage(ctx, "ns", q)
			if werr != nil || gerr != nil {
				t.Fatalf("query %d %+v: memory %v, embedded %v", i, q, werr, gerr)
			}
			if len(want) != len(got) || len(want) > 0 && !reflect.DeepEqual(got, want) {
				t.Fatalf("query %d %+v, page %d:\nembedded:\n%s\nmemory:\n%s", i, q, page, render(got), render(want))
			}
			if q.Limit == 0 || len(got) < q.Limit {
				break
			}
			q.After = got[len(got)-1].Cursor
		}
	}
}
