package storetest

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/store"
)

func concurrencyCases() []testCase {
	return []testCase{
		{"OneBucketFrozenClock", testConcOneBucketFrozen},
		{"OneBucketRandomAmounts", testConcOneBucketRandomAmounts},
		{"OneBucketAdvancingClock", testConcOneBucketAdvancing},
		{"ContractCascadeAtomicity", testConcContractCascade},
	}
}

const (
	// Workers is how many goroutines a concurrency case runs at once.
	Workers = 32
	// watchdog turns a store that admits too little (so a test would wait
	// forever for demand to meet supply) into a failure: it is how long a
	// run may go without a single grant while grants are owed. It is the
	// only use of the wall clock in the suite and bounds no behaviour under
	// test. It bounds progress, not the whole run: a networked store under
	// the race detector on a loaded machine takes a minute or more for a
	// run, and only a store that stops catching up fails.
	watchdog = 60 * time.Second
)

// NewRand returns a random source with a fresh seed, which it logs.
func NewRand(t *testing.T) *rand.Rand {
	seed := rand.Uint64()
	t.Logf("random seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15))
}

// Parallel starts n goroutines running fn(i) and waits for them.
func Parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { fn(i) })
	}
	wg.Wait()
}

// storeConsume is a goroutine-safe Consume that reports errors with t.Error.
func (e *Env) storeConsume(now int64, buckets ...store.BucketRequest) bool {
	ok, err := e.s.Consume(e.ctx, e.ns, request(now, buckets...))
	if err != nil {
		e.t.Errorf("Consume: %v", err)
		return false
	}
	return ok
}

// (a) Many goroutines on one bucket with a frozen clock admit exactly the
// capacity.
func testConcOneBucketFrozen(t *testing.T, e *Env) {
	const capacity, attempts = 500, 40 // 32*40 = 1280 attempts for 500 tokens
	k := Key("hot", "api")
	p := rate(capacity*1_000, 1_000, 60_000)
	var grants atomic.Int64
	Parallel(Workers, func(int) {
		for range attempts {
			if e.storeConsume(T0, breq(k, checked("rpm", p, 1_000))) {
				grants.Add(1)
			}
		}
	})
	if g := grants.Load(); g != capacity {
		t.Errorf("%d grants, want exactly %d", g, capacity)
	}
	e.WantTokensAt(k, "rpm", T0, 0)
}

// Random amounts over two limits of one bucket; a final drain with amount 1
// proves nothing was lost.
func testConcOneBucketRandomAmounts(t *testing.T, e *Env) {
	const capacity = 2_000 // tokens of tpm; rpm is large
	k := Key("hot", "api")
	ptpm := rate(capacity*1_000, 1, 60_000)
	prpm := conc(1_000_000_000)
	rnd := NewRand(t)
	seeds := make([]uint64, Workers)
	for i := range seeds {
		seeds[i] = rnd.Uint64()
	}
	var granted, requests atomic.Int64
	Parallel(Workers, func(i int) {
		r := rand.New(rand.NewPCG(seeds[i], uint64(i)))
		for range 25 {
			n := 1 + r.Int64N(9)
			if e.storeConsume(T0, breq(k, checked("tpm", ptpm, n*1_000), checked("rpm", prpm, 1_000))) {
				granted.Add(n)
				requests.Add(1)
			}
		}
		for e.storeConsume(T0, breq(k, checked("tpm", ptpm, 1_000), checked("rpm", prpm, 1_000))) {
			granted.Add(1)
			requests.Add(1)
		}
	})
	if g := granted.Load(); g != capacity {
		t.Errorf("%d tokens granted, want exactly %d", g, capacity)
	}
	e.WantTokensAt(k, "tpm", T0, 0)
	e.WantTokensAt(k, "rpm", T0, 1_000_000_000-requests.Load()*1_000)
}

// AdvancingRun hammers one bucket from many goroutines (try reports a grant)
// while this goroutine advances the fake clock in random small steps. Before
// each step it waits until the workers have consumed everything credited so
// far, so the bucket never reaches its capacity and no refill is clamped
// away; supply is then exactly capacity + floor(elapsed * rate), and the
// number of grants must equal it. It returns the total elapsed milliseconds.
func (e *Env) AdvancingRun(expected func(elapsed int64) int64, try func() (bool, error)) (grants, elapsed int64) {
	t := e.t
	rnd := NewRand(t)
	var n atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range Workers {
		wg.Go(func() {
			for !stop.Load() {
				ok, err := try()
				if err != nil {
					t.Errorf("worker: %v", err)
					return
				}
				if ok {
					n.Add(1)
				} else {
					runtime.Gosched()
				}
			}
		})
	}
	// A failed run stops the workers before counting: a grant in flight
	// would otherwise be in the bucket and not in the count.
	halt := func() (int64, int64) { stop.Store(true); wg.Wait(); return n.Load(), elapsed }

	waitDrained := func() bool {
		want := expected(elapsed)
		last, deadline := n.Load(), time.Now().Add(watchdog)
		for g := last; g < want; g = n.Load() {
			if g > last {
				last, deadline = g, time.Now().Add(watchdog)
			}
			if time.Now().After(deadline) {
				t.Errorf("after %d ms of fake time: %d grants, want %d, none for %v (the store admits too little)", elapsed, g, want, watchdog)
				return false
			}
			runtime.Gosched()
		}
		if g := n.Load(); g > want {
			t.Errorf("after %d ms of fake time: %d grants, want at most %d (over-admission)", elapsed, g, want)
			return false
		}
		return true
	}
	for range 120 {
		if !waitDrained() {
			return halt()
		}
		d := 1 + rnd.Int64N(23)
		e.Advance(d)
		elapsed += d
	}
	if !waitDrained() {
		return halt()
	}
	halt()
	// Final drain, alone: nothing is left.
	for {
		ok, err := try()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		n.Add(1)
	}
	return n.Load(), elapsed
}

// (b) As (a), with the clock advancing while the goroutines run. The rate
// is 7000 per minute (116.67 millitokens per ms), so nearly every step leaves
// a remainder that the store must carry.
func testConcOneBucketAdvancing(t *testing.T, e *Env) {
	k := Key("hot", "api")
	p := rate(50_000, 7_000_000, 60_000)
	expected := func(el int64) int64 { return (p.Capacity + el*p.Amount/p.Period) / 1_000 }
	grants, el := e.AdvancingRun(expected, func() (bool, error) {
		ok, err := e.s.Consume(e.ctx, e.ns, request(e.now(), breq(k, checked("rpm", p, 1_000))))
		return ok, err
	})
	if want := expected(el); grants != want {
		t.Errorf("%d grants in %d ms, want exactly %d = (50000 + floor(%d*7000000/60000))/1000", grants, el, want, el)
	}
	e.WantTokensAt(k, "rpm", T0+el, p.Capacity+el*p.Amount/p.Period-grants*1_000)
}

// (c) Cascade atomicity under contention: each request debits one of 8
// children and their parent, with the bucket order varying between requests
// (child first or parent first) to exercise the backend's locking; the
// children's grants add up to the parent's capacity exactly. (limitertest
// has the same through a limiter.)
func testConcContractCascade(t *testing.T, e *Env) {
	const children, capacity = 8, 400
	p := rate(capacity*1_000, 1, 60_000)
	parent := Key("parent", "api")
	var held [children]atomic.Int64
	rnd := NewRand(t)
	seeds := make([]uint64, Workers)
	for i := range seeds {
		seeds[i] = rnd.Uint64()
	}
	try := func(r *rand.Rand, n int64) bool {
		c := r.IntN(children)
		child := breq(Key("child-"+itoa(int64(c)), "api"), checked("tpm", p, n*1_000))
		par := breq(parent, checked("tpm", p, n*1_000))
		bs := []store.BucketRequest{child, par}
		if r.IntN(2) == 0 {
			bs[0], bs[1] = bs[1], bs[0]
		}
		if !e.storeConsume(T0, bs...) {
			return false
		}
		held[c].Add(n)
		return true
	}
	Parallel(Workers, func(i int) {
		r := rand.New(rand.NewPCG(seeds[i], 3))
		for range 20 {
			try(r, 1+r.Int64N(7))
		}
		for try(r, 1) {
		}
	})
	var sum int64
	for c := range children {
		h := held[c].Load()
		sum += h
		if h > 0 {
			e.WantTokensAt(Key("child-"+itoa(int64(c)), "api"), "tpm", T0, (capacity-h)*1_000)
		}
	}
	if sum != capacity {
		t.Errorf("children granted %d in total, want exactly %d", sum, capacity)
	}
	e.WantTokensAt(parent, "tpm", T0, 0)
}
