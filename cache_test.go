package tollgate_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// withSystemLimits returns a limiter over a memory store whose system
// config holds one rate limit, so that every entity's limits are resolved
// through the config cache.
func withSystemLimits(t testing.TB, opts ...tollgate.Option) (*tollgate.Limiter, func(time.Duration)) {
	t.Helper()
	lim, adm, clk := newPair(t, memory.New(), opts...)
	cfg := tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 100)}}
	if err := adm.SetLimits(context.Background(), tollgate.SystemScope(), cfg); err != nil {
		t.Fatal(err)
	}
	return lim, clk.Advance
}

// peekEntities looks up the limits of entities key-from .. key-(to-1), one
// resolution and one (unknown) entity each, writing nothing. It may run
// on a goroutine of its own: it reports the first failure with Errorf.
func peekEntities(t testing.TB, lim *tollgate.Limiter, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := lim.Available(context.Background(), "key-"+strconv.Itoa(i), "api"); err != nil {
			t.Errorf("Available(key-%d): %v", i, err)
			return
		}
	}
}

func TestNewRejectsBadCacheSize(t *testing.T) {
	for _, n := range []int{0, -1} {
		_, err := tollgate.New(memory.New(), tollgate.WithCacheSize(n))
		wantValidation(t, err, "cache_size")
	}
	for _, n := range []int{1, 3, 64, 1000} {
		if _, err := tollgate.New(memory.New(), tollgate.WithCacheSize(n)); err != nil {
			t.Errorf("WithCacheSize(%d): %v", n, err)
		}
	}
}

// A million distinct entities, each a resolution and an entity in the
// cache, looked up from several goroutines, never make it hold more than
// its size. (A tenth as many under the race detector, ten times slower.)
func TestCacheStaysWithinItsSize(t *testing.T) {
	const size, step, workers = 1000, 50_000, 4
	entities := 1_000_000
	if raceEnabled {
		entities /= 10
	}
	lim, _ := withSystemLimits(t, tollgate.WithCacheSize(size))
	for from := 0; from < entities; from += step {
		var wg sync.WaitGroup
		for w := range workers {
			part := step / workers
			wg.Go(func() { peekEntities(t, lim, from+w*part, from+(w+1)*part) })
		}
		wg.Wait()
		if n := lim.Stats().Cache.Entries; n > size || n < size/2 {
			t.Fatalf("after %d entities the cache holds %d entries, want at most %d (and at least half)", from+step, n, size)
		}
	}
	if st := lim.Stats().Cache; st.Misses < uint64(2*entities) {
		t.Errorf("%d misses for %d new entities, want at least two each", st.Misses, entities)
	}
}

// With the default size, the cache fills to DefaultCacheSize and no further.
func TestCacheDefaultSize(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("drives 300,000 entities")
	}
	lim, _ := withSystemLimits(t)
	peekEntities(t, lim, 0, 3*tollgate.DefaultCacheSize)
	if n := lim.Stats().Cache.Entries; n > tollgate.DefaultCacheSize || n < tollgate.DefaultCacheSize/2 {
		t.Errorf("the cache holds %d entries, want at most %d (and at least half)", n, tollgate.DefaultCacheSize)
	}
}

// Once entries have expired, a full shard drops them all when it needs
// room, rather than one at random per insert.
func TestCacheDropsExpiredEntries(t *testing.T) {
	const size = 1000
	lim, advance := withSystemLimits(t, tollgate.WithCacheSize(size))
	peekEntities(t, lim, 0, 5*size) // every shard full
	full := lim.Stats().Cache.Entries
	advance(tollgate.DefaultCacheTTL + time.Second)
	const fresh = 300 // 600 inserts: each of the 64 shards gets some
	peekEntities(t, lim, 5*size, 5*size+fresh)
	if n := lim.Stats().Cache.Entries; n > 2*fresh+size/10 {
		t.Errorf("after the TTL and %d new entities the cache holds %d entries (%d before), want the expired ones gone", fresh, n, full)
	}
}

// Entries evicted to make room are resolved again, and to the same limits.
func TestCacheEvictedEntriesResolveAgain(t *testing.T) {
	ctx := context.Background()
	lim, adm, _ := newPair(t, memory.New(), tollgate.WithCacheSize(16))
	const entities = 100
	for i := range entities {
		id := "key-" + strconv.Itoa(i)
		if _, err := adm.CreateEntity(ctx, tollgate.Entity{ID: id}); err != nil {
			t.Fatal(err)
		}
		cfg := tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", int64(i+1))}}
		if err := adm.SetLimits(ctx, tollgate.EntityScope(id, "api"), cfg); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		for i := range entities {
			st, err := lim.Available(ctx, "key-"+strconv.Itoa(i), "api")
			if err != nil {
				t.Fatal(err)
			}
			if len(st) != 1 || st[0].Capacity != int64(i+1) || st[0].Entity != "key-"+strconv.Itoa(i) {
				t.Fatalf("round %d: key-%d's statuses %+v, want one of capacity %d", round, i, st, i+1)
			}
		}
		if n := lim.Stats().Cache.Entries; n > 16 {
			t.Fatalf("round %d: %d entries, more than the size 16", round, n)
		}
	}
}

// TestRememberedEntitySeesChanges checks that the entities a recycled
// lease state remembers from the config cache (one goroutine's acquires
// reuse one state) give way to a change the limiter observes: an entity
// created, then made to cascade, then moved to another parent, is
// debited as it is after each change, at the next acquire.
func TestRememberedEntitySeesChanges(t *testing.T) {
	ctx := context.Background()
	lim, adm, _ := newPair(t, memory.New())
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 100))
	one := tollgate.Consume{"rpm": 1}
	levels := func() []string {
		t.Helper()
		le, err := lim.Acquire(ctx, "key", "api", one, limits)
		if err != nil {
			t.Fatal(err)
		}
		defer le.Commit(ctx)
		if le.Entity() != "key" {
			t.Errorf("Entity() = %q, want key", le.Entity())
		}
		var out []string
		for _, s := range le.Statuses() {
			out = append(out, s.Entity)
		}
		return out
	}
	want := func(step string, ids ...string) {
		t.Helper()
		for range 3 { // the state's memory, warm
			if got := levels(); !slices.Equal(got, ids) {
				t.Fatalf("%s: debited %v, want %v", step, got, ids)
			}
		}
	}
	want("unknown entity", "key")
	mustCreate(t, adm, tollgate.Entity{ID: "org-a"})
	mustCreate(t, adm, tollgate.Entity{ID: "org-b"})
	mustCreate(t, adm, tollgate.Entity{ID: "key", ParentID: "org-a"})
	want("created, not cascading", "key")
	if _, err := adm.UpdateEntity(ctx, tollgate.Entity{ID: "key", ParentID: "org-a", Cascade: true}); err != nil {
		t.Fatal(err)
	}
	want("cascading", "key", "org-a")
	if _, err := adm.UpdateEntity(ctx, tollgate.Entity{ID: "key", ParentID: "org-b", Cascade: true}); err != nil {
		t.Fatal(err)
	}
	want("moved", "key", "org-b")
}

// TestRememberedLimitsSeeChanges is TestRememberedEntitySeesChanges for
// stored limits: a warm state's remembered resolution gives way to a
// change of the resource's limits at the next acquire.
func TestRememberedLimitsSeeChanges(t *testing.T) {
	ctx := context.Background()
	lim, adm, _ := newPair(t, memory.New())
	for _, capacity := range []int64{100, 7, 300} {
		cfg := tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", capacity)}}
		if err := adm.SetLimits(ctx, tollgate.ResourceScope("api"), cfg); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			le, err := lim.Acquire(ctx, "key", "api", tollgate.Consume{"rpm": 1})
			if err != nil {
				t.Fatal(err)
			}
			if got := le.Statuses()[0].Capacity; got != capacity {
				t.Fatalf("capacity %d, want %d", got, capacity)
			}
			_ = le.Rollback(ctx)
		}
	}
}
