package tollgate

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	other, err := New(st.Store) // another process: writes straight to the store
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
	if err := other.SetConfig(ctx, ResourceScope("api"), Config{Limits: []Limit{PerMinute("rpm", 100)}}); err != nil {
		t.Fatal(err)
	}
	for _, l := range lims {
		if c := capacity(l); c != 100 {
			t.Fatalf("capacity %d, want 100", c)
		}
	}
	if err := other.SetConfig(ctx, ResourceScope("api"), Config{Limits: []Limit{PerMinute("rpm", 5)}}); err != nil {
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

// On a local store a change made through another limiter, or a registry,
// is in force at once: there is nothing to poll.
func TestChangesOnALocalStoreAreInForceAtOnce(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	reg, err := NewRegistry(st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Register(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	a, _ := New(st, WithNamespace("t"))
	b, _ := New(st, WithNamespace("t"))
	set := func(n int64) {
		if err := b.SetConfig(ctx, ResourceScope("api"), Config{Limits: []Limit{PerMinute("rpm", n)}}); err != nil {
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
	if err := reg.Delete(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Available(ctx, "k", "api"); !errors.Is(err, model.ErrNamespaceDeleted) {
		t.Errorf("after the namespace's deletion: err %v, want ErrNamespaceDeleted at once", err)
	}
}

// A lookup that read the store before a clear does not cache what it
// read: it may predate the change that cleared.
func TestCachePutAfterClearIsDropped(t *testing.T) {
	c := newCache()
	c.init()
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
