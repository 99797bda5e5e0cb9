package tollgate

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// sharedStore is a memory store as a process sees a store shared with
// others (DynamoDB): its generation is polled, and moves when the test
// says another process changed something.
type sharedStore struct {
	*memory.Store
	gen   atomic.Uint64
	reads atomic.Int64
	fail  atomic.Bool
	// block, if not nil, holds every read until it is closed (a hung
	// store); set it before the read that should hang.
	block chan struct{}
}

func (s *sharedStore) Generation(context.Context) (uint64, error) {
	s.reads.Add(1)
	if s.block != nil {
		<-s.block
	}
	if s.fail.Load() {
		return 0, errors.New("store down")
	}
	return s.gen.Load(), nil
}

func (s *sharedStore) LocalGeneration() bool { return false }

// fakeNow is a settable wall clock for a ChangeWatch.
type fakeNow struct{ t atomic.Int64 }

func (f *fakeNow) now() unixNano           { return unixNano(f.t.Load()) }
func (f *fakeNow) advance(d time.Duration) { f.t.Add(int64(d)) }

func newSharedWatch(t *testing.T, interval time.Duration) (*sharedStore, *ChangeWatch, *fakeNow) {
	t.Helper()
	st := &sharedStore{Store: memory.New()}
	w, err := NewChangeWatch(st, interval)
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeNow{}
	clk.t.Store(1e18)
	w.now = clk.now
	return st, w, clk
}

// A shared store's generation is read at most once per interval, however
// many calls and limiters use the watch, and the first call after an idle
// period reads it before answering.
func TestChangeWatchReadsOncePerInterval(t *testing.T) {
	st, w, clk := newSharedWatch(t, time.Second)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				w.Generation(ctx)
			}
		}()
	}
	wg.Wait()
	if n := st.reads.Load(); n != 1 {
		t.Fatalf("8000 calls within one interval read the generation %d times, want 1", n)
	}
	st.gen.Store(7)
	clk.advance(999 * time.Millisecond)
	if g := w.Generation(ctx); g != 0 || st.reads.Load() != 1 {
		t.Errorf("before the interval: generation %d after %d reads, want 0 after 1", g, st.reads.Load())
	}
	clk.advance(time.Millisecond)
	if g := w.Generation(ctx); g != 7 || st.reads.Load() != 2 {
		t.Errorf("at the interval: generation %d after %d reads, want 7 after 2", g, st.reads.Load())
	}
	clk.advance(time.Hour) // idle: the next call reads first
	st.gen.Store(9)
	if g := w.Generation(ctx); g != 9 {
		t.Errorf("after an idle hour: generation %d, want 9 at once", g)
	}
}

// A failed read keeps the last generation and is not retried before the
// next interval: a store that is down costs one read per interval, not
// one per call. After a failure the next read runs in the background: no
// call waits on a store that is not answering.
func TestChangeWatchFailedReadKeepsLastValue(t *testing.T) {
	st, w, clk := newSharedWatch(t, time.Second)
	ctx := context.Background()
	st.gen.Store(3)
	if g := w.Generation(ctx); g != 3 {
		t.Fatalf("generation %d, want 3", g)
	}
	st.fail.Store(true)
	st.gen.Store(4)
	clk.advance(time.Second)
	for range 100 {
		if g := w.Generation(ctx); g != 3 {
			t.Fatalf("store down: generation %d, want the last one, 3", g)
		}
	}
	if n := st.reads.Load(); n != 2 {
		t.Errorf("reads = %d, want 2 (one failed, not retried within the interval)", n)
	}
	st.gen.Store(5)
	clk.advance(time.Second)
	st.block = make(chan struct{}) // the store hangs: the read must not hold up the call
	if g := w.Generation(ctx); g != 3 {
		t.Errorf("a read due after a failure: generation %d, want the last one, 3, at once", g)
	}
	st.fail.Store(false)
	close(st.block) // the store answers the read in the background
	for w.reading.Load() {
		runtime.Gosched() // waiting for the background read to end, not for a race
	}
	if g := w.Generation(ctx); g != 5 {
		t.Errorf("store back: generation %d, want 5", g)
	}
}

// Limiters sharing a watch over a shared store see a change made by
// another process once the generation moves and the interval has passed,
// long before their cache TTL, at one read per interval for all of them.
func TestLimitersFollowASharedStoresGeneration(t *testing.T) {
	st, w, clk := newSharedWatch(t, time.Second)
	ctx := context.Background()
	other, err := NewAdmin(st.Store) // another process: writes straight to the store
	if err != nil {
		t.Fatal(err)
	}
	var lims []*Limiter
	for range 3 {
		l, err := New(st, WithChangeWatch(w))
		if err != nil {
			t.Fatal(err)
		}
		lims = append(lims, l)
	}
	capacity := func(l *Limiter) int64 {
		t.Helper()
		sts, err := l.Available(ctx, "k", "api")
		if err != nil {
			t.Fatal(err)
		}
		return sts[0].Capacity
	}
	if err := other.SetLimits(ctx, ResourceScope("api"), Config{Limits: []Limit{PerMinute("rpm", 100)}}); err != nil {
		t.Fatal(err)
	}
	for _, l := range lims {
		if c := capacity(l); c != 100 {
			t.Fatalf("capacity %d, want 100", c)
		}
	}
	if err := other.SetLimits(ctx, ResourceScope("api"), Config{Limits: []Limit{PerMinute("rpm", 5)}}); err != nil {
		t.Fatal(err)
	}
	st.gen.Add(1) // the other process's change, as the shared store counts it
	for _, l := range lims {
		if c := capacity(l); c != 100 {
			t.Errorf("within the interval: capacity %d, want 100 (cached)", c)
		}
	}
	clk.advance(time.Second)
	for _, l := range lims {
		if c := capacity(l); c != 5 {
			t.Errorf("after the interval: capacity %d, want 5", c)
		}
	}
	if n := st.reads.Load(); n != 2 {
		t.Errorf("three limiters read the generation %d times in two intervals, want 2", n)
	}
}

// On a local store a change made through an admin that does not share the
// limiter's watch is in force at once all the same: there is nothing to
// poll.
func TestChangesOnALocalStoreAreInForceAtOnce(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	reg, err := NewAdmin(st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.RegisterNamespace(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	a, _ := New(st, WithNamespace("t"))
	b, _ := NewAdmin(st, WithNamespace("t"))
	if a.changes == b.changes {
		t.Fatal("the limiter and the admin share a watch: the test needs one each")
	}
	set := func(n int64) {
		if err := b.SetLimits(ctx, ResourceScope("api"), Config{Limits: []Limit{PerMinute("rpm", n)}}); err != nil {
			t.Fatal(err)
		}
	}
	set(100)
	for _, want := range []int64{100, 5, 7} {
		if want != 100 {
			set(want)
		}
		sts, err := a.Available(ctx, "k", "api")
		if err != nil || sts[0].Capacity != want {
			t.Fatalf("capacity %v (err %v), want %d at once", sts, err, want)
		}
	}
	if err := reg.DeleteNamespace(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Available(ctx, "k", "api"); !errors.Is(err, model.ErrNamespaceDeleted) {
		t.Errorf("after the namespace's deletion: err %v, want ErrNamespaceDeleted at once", err)
	}
}

// A lookup that read the store before a clear does not cache what it
// read: it may predate the change that cleared.
func TestCachePutAfterClearIsDropped(t *testing.T) {
	c := newCache(DefaultCacheTTL, DefaultCacheSize)
	k := store.BucketKey{Entity: "k", Resource: "api"}
	epoch := c.epoch.Load()
	c.clear() // a change observed while the lookup read the store
	c.putResolution(k, &resolution{found: true}, 1, epoch)
	c.putEntity(&entityEntry{entity: model.Entity{ID: "k"}}, 1, epoch)
	if c.resolution(k, 1) != nil || c.entity("k", 1) != nil {
		t.Fatal("an entry read before a clear was cached after it")
	}
	c.putResolution(k, &resolution{found: true}, 1, c.epoch.Load())
	if c.resolution(k, 1) == nil {
		t.Fatal("an entry read after the clear was not cached")
	}
}

// Over a store shared with other processes, an Admin's change is in force
// at the very next call of a limiter following the admin's change watch,
// with no read of the store's generation; a limiter with a watch of its
// own keeps what it cached until its refresh interval has passed, then
// reads the generation, which the change moved, and sees it.
func TestAdminChangesReachLimitersOnItsWatchAtOnce(t *testing.T) {
	ctx := context.Background()
	rpm := func(n int64) Config { return Config{Limits: []Limit{PerMinute("rpm", n)}} }
	cases := []struct {
		name   string
		setup  func(adm *Admin) error
		change func(adm *Admin) error
		// observe describes what a limiter sees of the change.
		observe       func(l *Limiter) string
		before, after string
	}{
		{
			name:   "SetLimits",
			change: func(adm *Admin) error { return adm.SetLimits(ctx, ResourceScope("api"), rpm(5)) },
			observe: func(l *Limiter) string {
				sts, err := l.Available(ctx, "k", "api")
				if err != nil {
					return err.Error()
				}
				return fmt.Sprint("capacity ", sts[0].Capacity)
			},
			before: "capacity 100", after: "capacity 5",
		},
		{
			name: "CreateEntity",
			setup: func(adm *Admin) error {
				if _, err := adm.CreateEntity(ctx, Entity{ID: "org"}); err != nil {
					return err
				}
				return adm.SetLimits(ctx, EntityScope("org", ""), rpm(7))
			},
			change: func(adm *Admin) error {
				_, err := adm.CreateEntity(ctx, Entity{ID: "k", ParentID: "org", Cascade: true})
				return err
			},
			observe: func(l *Limiter) string {
				sts, err := l.Available(ctx, "k", "api")
				if err != nil {
					return err.Error()
				}
				var entities []string
				for _, s := range sts {
					entities = append(entities, s.Entity)
				}
				return fmt.Sprint(entities)
			},
			before: "[k]", after: "[k org]",
		},
		{
			name:   "DeleteNamespace",
			change: func(adm *Admin) error { return adm.DeleteNamespace(ctx, "t") },
			observe: func(l *Limiter) string {
				_, err := l.Available(ctx, "k", "api")
				return fmt.Sprint("deleted ", errors.Is(err, model.ErrNamespaceDeleted))
			},
			before: "deleted false", after: "deleted true",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const interval = time.Second
			st, w, wall := newSharedWatch(t, interval)
			own, err := NewChangeWatch(st, interval)
			if err != nil {
				t.Fatal(err)
			}
			own.now = wall.now
			clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) // stands still: no TTL expires
			opts := []Option{WithNamespace("t"), WithClock(clk)}
			adm, err := NewAdmin(st, append(opts, WithChangeWatch(w))...)
			if err != nil {
				t.Fatal(err)
			}
			following, err := New(st, append(opts, WithChangeWatch(w))...)
			if err != nil {
				t.Fatal(err)
			}
			alone, err := New(st, append(opts, WithChangeWatch(own))...)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := adm.RegisterNamespace(ctx, "t"); err != nil {
				t.Fatal(err)
			}
			if err := adm.SetLimits(ctx, ResourceScope("api"), rpm(100)); err != nil {
				t.Fatal(err)
			}
			if c.setup != nil {
				if err := c.setup(adm); err != nil {
					t.Fatal(err)
				}
			}
			st.gen.Add(1) // the setup's writes, as the shared store counts them
			for name, l := range map[string]*Limiter{"following": following, "alone": alone} {
				if got := c.observe(l); got != c.before {
					t.Fatalf("%s, before the change: %s, want %s", name, got, c.before)
				}
			}

			if err := c.change(adm); err != nil {
				t.Fatal(err)
			}
			st.gen.Add(1) // the change, as the shared store counts it
			reads := st.reads.Load()
			if got := c.observe(following); got != c.after {
				t.Errorf("limiter on the admin's watch, at its next call: %s, want %s", got, c.after)
			}
			if n := st.reads.Load(); n != reads {
				t.Errorf("the limiter on the admin's watch read the generation %d times to see the change, want 0", n-reads)
			}
			wall.advance(interval - time.Nanosecond)
			if got := c.observe(alone); got != c.before {
				t.Errorf("limiter on its own watch, within its refresh interval: %s, want %s (cached)", got, c.before)
			}
			wall.advance(time.Nanosecond)
			if got := c.observe(alone); got != c.after {
				t.Errorf("limiter on its own watch, after its refresh interval: %s, want %s", got, c.after)
			}
		})
	}
}
