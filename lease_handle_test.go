package tollgate_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// wantClosed checks that le has ended: every method but Entity, Resource,
// Degraded and Cause reports it closed, and those keep what it was
// acquired for.
func wantClosed(t *testing.T, ctx context.Context, le *tollgate.Lease, entity string) {
	t.Helper()
	if err := le.Adjust(ctx, tollgate.Consume{"rpm": 1}); !errors.Is(err, tollgate.ErrLeaseClosed) {
		t.Errorf("%s: Adjust of an ended lease: %v, want ErrLeaseClosed", entity, err)
	}
	if err := le.Commit(ctx); !errors.Is(err, tollgate.ErrLeaseClosed) {
		t.Errorf("%s: Commit of an ended lease: %v, want ErrLeaseClosed", entity, err)
	}
	if err := le.Rollback(ctx); !errors.Is(err, tollgate.ErrLeaseClosed) {
		t.Errorf("%s: Rollback of an ended lease: %v, want ErrLeaseClosed", entity, err)
	}
	if c, s := le.Consumed(), le.Statuses(); c != nil || s != nil {
		t.Errorf("%s: ended lease reports Consumed %v, Statuses %v; want nil", entity, c, s)
	}
	if le.Entity() != entity || le.Resource() != "api" || le.Degraded() || le.Cause() != nil {
		t.Errorf("ended lease: Entity/Resource %q/%q, Degraded %v, Cause %v; want %q/api, false, nil",
			le.Entity(), le.Resource(), le.Degraded(), le.Cause(), entity)
	}
}

// Lease handles are allocated in batches, each handed out once: over many
// batches every handle is distinct, an ended handle keeps answering closed
// while the state it pointed to serves later leases, and acting on it
// never touches those leases.
func TestLeaseHandlesNeverAlias(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	const n = 100 // many batches of handles
	seen := make(map[*tollgate.Lease]bool)
	var ended []*tollgate.Lease
	var endedFor []string
	for i := range n {
		entity := "k" + strconv.Itoa(i)
		le := mustAcquire(t, lim, entity, "api", tollgate.Consume{"rpm": 1}, rpm100)
		if seen[le] {
			t.Fatalf("lease %d: handle %p was handed out before", i, le)
		}
		seen[le] = true
		// End every lease, alternately by Commit and Rollback, so that
		// each acquire reuses recycled state.
		var err error
		if i%2 == 0 {
			err = le.Commit(ctx)
		} else {
			err = le.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		ended, endedFor = append(ended, le), append(endedFor, entity)
	}
	// A live lease, on recycled state, next to every ended handle.
	live := mustAcquire(t, lim, "live", "api", tollgate.Consume{"rpm": 10}, rpm100)
	for i, le := range ended {
		wantClosed(t, ctx, le, endedFor[i])
	}
	// The stale Rollbacks above refunded nothing: the live lease's debit
	// stands, and the live lease still works.
	if got := availableOf(t, lim, "live", "api", "rpm", rpm100); got != 90 {
		t.Errorf("live lease's bucket = %d, want 90: a stale handle touched it", got)
	}
	if err := live.Adjust(ctx, tollgate.Consume{"rpm": 5}); err != nil {
		t.Fatal(err)
	}
	if err := live.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := availableOf(t, lim, "live", "api", "rpm", rpm100); got != 85 {
		t.Errorf("live lease's bucket after commit = %d, want 85", got)
	}
	wantClosed(t, ctx, live, "live")
	// Committed leases consumed 1 each, rolled back ones nothing.
	for i := range 2 {
		want := int64(99)
		if i%2 == 1 {
			want = 100
		}
		if got := availableOf(t, lim, endedFor[i], "api", "rpm", rpm100); got != want {
			t.Errorf("%s = %d, want %d", endedFor[i], got, want)
		}
	}
}

// Goroutines acquiring and ending leases at once, each keeping its ended
// handles and checking them again later: no handle ever shows another
// goroutine's lease. Run with -race, this also checks that handles of one
// batch, filled by different goroutines, share no memory.
func TestLeaseHandlesConcurrent(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	huge := tollgate.WithLimits(tollgate.PerMinute("rpm", 1_000_000_000))
	const workers, rounds, keep = 4, 300, 20
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			entity := "w" + strconv.Itoa(w)
			var old []*tollgate.Lease
			for r := range rounds {
				le, err := lim.Acquire(ctx, entity, "api", tollgate.Consume{"rpm": 1}, huge)
				if err != nil {
					t.Error(err)
					return
				}
				if le.Entity() != entity {
					t.Errorf("new lease of %s reports entity %s", entity, le.Entity())
				}
				if r%3 == 0 {
					if err := le.Adjust(ctx, tollgate.Consume{"rpm": 1}); err != nil {
						t.Error(err)
					}
				}
				if err := le.Commit(ctx); err != nil {
					t.Error(err)
				}
				old = append(old, le)
				if len(old) > keep {
					old = old[1:]
				}
				for _, o := range old {
					if err := o.Adjust(ctx, tollgate.Consume{"rpm": 1}); !errors.Is(err, tollgate.ErrLeaseClosed) || o.Entity() != entity {
						t.Errorf("%s: an ended lease answered Adjust with %v and entity %s", entity, err, o.Entity())
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for w := range workers {
		// rounds debits of 1, plus 1 more every third round.
		want := int64(1_000_000_000 - rounds - (rounds+2)/3)
		if got := availableOf(t, lim, "w"+strconv.Itoa(w), "api", "rpm", huge); got != want {
			t.Errorf("w%d = %d, want %d", w, got, want)
		}
	}
}

// failingDeltas is a memory store whose ApplyDeltas fails from its n-th
// call on, to end a lease halfway through a cascade.
type failingDeltas struct {
	*memory.Store
	mu    sync.Mutex
	calls int
	n     int
}

var errDeltas = errors.New("injected ApplyDeltas failure")

func (f *failingDeltas) ApplyDeltas(ctx context.Context, ns string, deltas []store.Delta) error {
	f.mu.Lock()
	f.calls++
	fail := f.n > 0 && f.calls >= f.n
	f.mu.Unlock()
	if fail {
		return errDeltas
	}
	return f.Store.ApplyDeltas(ctx, ns, deltas)
}

// A Rollback that refunded the first bucket of a cascade and then failed
// leaves the lease open; a Commit then puts the refunded debit back
// (what it wants differs from what was written), even though the lease has
// neither adjustments nor concurrency limits, which alone would make a
// Commit write nothing.
func TestLeaseCommitAfterPartialRollback(t *testing.T) {
	ctx := context.Background()
	fs := &failingDeltas{Store: memory.New()}
	lim, adm, _ := newPair(t, fs)
	mustCreate(t, adm, tollgate.Entity{ID: "org"})
	mustCreate(t, adm, tollgate.Entity{ID: "key", ParentID: "org", Cascade: true})
	le := mustAcquire(t, lim, "key", "api", tollgate.Consume{"rpm": 10}, rpm100)
	fs.mu.Lock()
	fs.n = 2 // the refund of key succeeds, that of org fails
	fs.mu.Unlock()
	if err := le.Rollback(ctx); !errors.Is(err, errDeltas) || !errors.Is(err, model.ErrUnavailable) {
		t.Fatalf("Rollback: %v, want ErrUnavailable wrapping the injected error", err)
	}
	if got := availableOf(t, lim, "key", "api", "rpm", rpm100); got != 100 {
		t.Errorf("key after the partial rollback = %d, want 100 (refunded)", got)
	}
	if got := availableOf(t, lim, "org", "api", "rpm", rpm100); got != 90 {
		t.Errorf("org after the partial rollback = %d, want 90 (refund failed)", got)
	}
	fs.mu.Lock()
	fs.n = 0
	fs.mu.Unlock()
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"key", "org"} {
		if got := availableOf(t, lim, id, "api", "rpm", rpm100); got != 90 {
			t.Errorf("%s after Commit = %d, want 90: committed once, neither refunded nor charged twice", id, got)
		}
	}
	wantClosed(t, ctx, le, "key")
}

// A lease on rate limits only, committed without adjustments, writes
// nothing: its debit was written when it was granted.
func TestLeaseCommitWritesNothingWithoutAdjustments(t *testing.T) {
	ctx := context.Background()
	lim, adm, fs, _ := newFaultPair(t)
	mustCreate(t, adm, tollgate.Entity{ID: "org"})
	mustCreate(t, adm, tollgate.Entity{ID: "key", ParentID: "org", Cascade: true})
	for _, entity := range []string{"solo", "key"} {
		le := mustAcquire(t, lim, entity, "api", tollgate.Consume{"rpm": 1}, rpm100)
		fs.resetCounts()
		if err := le.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if n := fs.count(mApplyDeltas); n != 0 {
			t.Errorf("%s: Commit wrote %d times, want 0", entity, n)
		}
	}
	// With a concurrency limit the lease is durable, and Commit returns
	// its token in one EndLease that deletes its record.
	slots := tollgate.WithLimits(tollgate.PerMinute("rpm", 100), tollgate.ConcurrencyLimit("inflight", 1))
	le := mustAcquire(t, lim, "solo", "api", tollgate.Consume{"rpm": 1, "inflight": 1}, slots)
	fs.resetCounts()
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n, e := fs.count(mApplyDeltas), fs.count(mEndLease); n != 0 || e != 1 {
		t.Errorf("Commit of a lease holding a concurrency token: %d ApplyDeltas, %d EndLease; want 0 and 1", n, e)
	}
	if got := availableOf(t, lim, "solo", "api", "inflight", slots); got != 1 {
		t.Errorf("inflight after Commit = %d, want 1 (returned)", got)
	}
}

// Handles share their entity and resource (a key kept by the config
// cache's entry of the entity): leases alternating between entities and
// resources, ended or live, each keep answering their own pair, and a
// hot pair's acquires allocate nothing for it.
func TestLeaseHandlesKeepTheirPair(t *testing.T) {
	ctx := context.Background()
	lim, err := tollgate.New(memory.New())
	if err != nil {
		t.Fatal(err)
	}
	opt := tollgate.WithLimits(tollgate.PerSecond("rps", 1_000_000))
	pairs := []struct{ entity, resource string }{{"a", "api"}, {"a", "llm"}, {"b", "api"}, {"a", "api"}, {"b", "llm"}}
	type held struct {
		le               *tollgate.Lease
		entity, resource string
	}
	var all []held
	for i := range 200 {
		p := pairs[i%len(pairs)]
		le, err := lim.Acquire(ctx, p.entity, p.resource, tollgate.Consume{"rps": 1}, opt)
		if err != nil {
			t.Fatal(err)
		}
		if i%3 != 0 { // some stay live
			if err := le.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, held{le, p.entity, p.resource})
	}
	for i, h := range all {
		if h.le.Entity() != h.entity || h.le.Resource() != h.resource {
			t.Errorf("lease %d: %s/%s, want %s/%s", i, h.le.Entity(), h.le.Resource(), h.entity, h.resource)
		}
	}
	if raceEnabled {
		return // the race detector allocates on its own
	}
	one := tollgate.Consume{"rps": 1}
	allocs := testing.AllocsPerRun(1000, func() {
		le, err := lim.Acquire(ctx, "hot", "api", one, opt)
		if err != nil {
			t.Fatal(err)
		}
		if err := le.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0.25 { // a batch of handles now and then, nothing per lease
		t.Errorf("a hot pair's acquire+commit: %v allocations, want at most 0.25", allocs)
	}
}

// TestRecycledStateForgetsCallLimits checks that a lease state recycled
// after a call with WithLimits (whose slice it keeps, cut to length 0)
// plans the next call by that call's options alone: without WithLimits
// the stored configuration (none here: the limit is unknown), with
// another WithLimits that one, with the same hoisted option again its
// limits.
func TestRecycledStateForgetsCallLimits(t *testing.T) {
	ctx := context.Background()
	lim, err := tollgate.New(memory.New())
	if err != nil {
		t.Fatal(err)
	}
	one := tollgate.Consume{"rps": 1}
	wide := tollgate.WithLimits(tollgate.PerSecond("rps", 1_000_000))
	narrow := tollgate.WithLimits(tollgate.RateLimit("rps", 1, time.Hour))
	steps := []struct {
		name, entity string
		opts         []tollgate.AcquireOption
		granted      bool
	}{
		{"hoisted option", "e", []tollgate.AcquireOption{wide}, true},
		{"no option", "e", nil, false},
		{"hoisted option again", "e", []tollgate.AcquireOption{wide}, true},
		{"another option, first", "n", []tollgate.AcquireOption{narrow}, true},
		{"another option, spent", "n", []tollgate.AcquireOption{narrow}, false},
		{"the first again", "e", []tollgate.AcquireOption{wide}, true},
		{"the other, still spent", "n", []tollgate.AcquireOption{narrow}, false},
		{"no option again", "e", nil, false},
	}
	for round := range 3 { // the same state, recycled, most likely
		for _, s := range steps {
			le, err := lim.Acquire(ctx, s.entity, "api"+strconv.Itoa(round), one, s.opts...)
			if got := err == nil; got != s.granted {
				t.Fatalf("round %d, %s: err %v, want granted %v", round, s.name, err, s.granted)
			}
			if err == nil {
				if err := le.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}
