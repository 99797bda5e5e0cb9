package redis_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/redis"
)

// overlapClient holds the first acquire call it sees, once armed, until a
// second is in flight beside it, so that a lane's calls are known to
// overlap; it records the most acquire calls it saw in flight at once.
type overlapClient struct {
	rueidis.Client
	armed    atomic.Bool
	inFlight atomic.Int64
	peak     atomic.Int64
	second   chan struct{} // closed when two are in flight
	once     sync.Once
	timedOut atomic.Bool
	repeats  atomic.Int64 // groups of requests sent as repeats of the one before
}

func (c *overlapClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if cmd.Commands()[0] != "FCALL" || !c.armed.Load() {
		return c.Client.Do(ctx, cmd)
	}
	for _, arg := range cmd.Commands() {
		if arg == "-1" { // nothing else is negative
			c.repeats.Add(1)
		}
	}
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	if n >= 2 {
		c.once.Do(func() { close(c.second) })
	}
	select {
	case <-c.second:
	case <-time.After(10 * time.Second): // a failure, not a wait for a race
		c.timedOut.Store(true)
		c.once.Do(func() { close(c.second) })
	}
	return c.Client.Do(ctx, cmd)
}

// TestPipelinedLanesAreExact runs many goroutines on buckets of small
// limits, with a lane's calls forced to overlap (up to 4 in flight, the
// first held until a second is sent), at one instant so nothing refills:
// the grants must be exactly the capacity, each deciding on a balance of
// its own (the Observed balances of the grants are capacity, capacity −
// 1, ... 1, each once: no two requests decided on one state, whatever the
// order the batches ran in), every refusal must see less than it asks,
// and each goroutine's own requests, made one after the other, must be
// decided in that order (the balances of its grants strictly decreasing).
// The one-bucket case is one lane: its calls in flight are that lane's.
func TestPipelinedLanesAreExact(t *testing.T) {
	if serverURL == "" {
		t.Skip("no redis-server")
	}
	for _, tc := range []struct {
		name    string
		keys    int   // first buckets, each its own lane
		org     bool  // cascading into one organisation of the capacity
		tokens  int64 // the capacity that bounds the grants
		mixed   bool  // odd workers take 2 tokens: batches of unlike requests
		period  int64 // of the bounding limit: 10^13 ms makes its numbers wide
		workers int
		each    int
	}{
		{"one-bucket", 1, false, 100, false, 3_600_000, 32, 12},
		{"one-bucket-mixed", 1, false, 100, true, 3_600_000, 32, 12},
		{"one-bucket-wide", 1, false, 100, false, 1e13, 32, 12},
		{"cascade", 4, true, 100, false, 3_600_000, 32, 12},
		{"cascade-mixed", 4, true, 100, true, 3_600_000, 32, 12},
		{"cascade-wide", 4, true, 100, false, 1e13, 32, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &overlapClient{Client: rawClient(t, serverURL), second: make(chan struct{})}
			s, err := redis.New(c)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			redis.SetMaxInFlight(s, 4)
			ctx := context.Background()
			ns := fmt.Sprintf("lanes-%s-%d", tc.name, time.Now().UnixNano())
			now := time.Now().UnixMilli()
			capacity := tc.tokens * bucket.MilliPerToken
			small := bucket.Params{Capacity: capacity, Amount: capacity, Period: tc.period}
			large := bucket.Params{Capacity: 1000 * capacity, Amount: capacity, Period: 3_600_000}
			// every grant also debits an unchecked limit (as a shadow
			// limit is), which must end exactly that much lower
			unchecked := bucket.Params{Capacity: 1000 * capacity, Amount: capacity, Period: 3_600_000}
			amount := func(w int) int64 {
				if tc.mixed && w%2 == 1 {
					return 2 * bucket.MilliPerToken
				}
				return bucket.MilliPerToken
			}
			request := func(w int) *store.ConsumeRequest {
				key := store.BucketKey{Entity: fmt.Sprintf("k%d", w%tc.keys), Resource: "api"}
				first := store.BucketRequest{Key: key, Limits: []store.LimitRequest{{Name: "rps", Params: small, Check: true, Amount: amount(w)},
					{Name: "all", Params: unchecked, Amount: amount(w)}}}
				req := &store.ConsumeRequest{Now: now, Buckets: []store.BucketRequest{first}}
				if tc.org {
					req.Buckets[0].Limits[0].Params = large
					req.Buckets = append(req.Buckets, store.BucketRequest{Key: store.BucketKey{Entity: "org", Resource: "api"},
						Limits: []store.LimitRequest{{Name: "rps", Params: small, Check: true, Amount: amount(w)}}})
				}
				return req
			}
			// The library loaded, and the buckets made, before the calls
			// are held: an acquire of nothing.
			for w := range tc.keys {
				req := request(w)
				for i := range req.Buckets {
					for j := range req.Buckets[i].Limits {
						req.Buckets[i].Limits[j].Amount = 0
					}
				}
				if _, err := s.Consume(ctx, ns, req); err != nil {
					t.Fatal(err)
				}
			}
			c.armed.Store(true)
			seen := make([][][2]int64, tc.workers) // the Observed balance and amount of each worker's grants
			var granted atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, tc.workers)
			for w := range tc.workers {
				wg.Go(func() {
					req := request(w) // recycled, as the limiter does
					last := int64(1 << 62)
					for range tc.each {
						for i := range req.Buckets {
							req.Buckets[i].Limits[0].Observed = bucket.State{}
						}
						ok, err := s.Consume(ctx, ns, req)
						if err != nil {
							errs <- err
							return
						}
						tokens := req.Buckets[len(req.Buckets)-1].Limits[0].Observed.Tokens
						if tokens > last || ok && tokens == last {
							errs <- fmt.Errorf("worker %d: decided on %d tokens after %d: out of its order", w, tokens, last)
							return
						}
						last = tokens
						if !ok {
							if tokens >= amount(w) {
								errs <- fmt.Errorf("worker %d: refused with %d millitokens observed", w, tokens)
							}
							continue
						}
						granted.Add(1)
						seen[w] = append(seen[w], [2]int64{tokens, amount(w)})
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if c.timedOut.Load() {
				t.Fatal("no second call of a lane was in flight beside the first")
			}
			if p := c.peak.Load(); p < 2 {
				t.Fatalf("at most %d call in flight: the lanes were not pipelined", p)
			}
			if c.repeats.Load() == 0 && !tc.mixed {
				t.Fatal("no request was sent in a group of repeats")
			}
			// One serial order of the grants: sorted by the balance each
			// saw, each took its amount from the balance the one before
			// left, from the full capacity down; and demand exceeded it, so
			// less than 2 tokens are left.
			var all [][2]int64
			for _, s := range seen {
				all = append(all, s...)
			}
			slices.SortFunc(all, func(x, y [2]int64) int { return cmp.Compare(y[0], x[0]) })
			balance := capacity
			for i, g := range all {
				if g[0] != balance {
					t.Fatalf("grant %d (sorted by balance) saw %d millitokens, want %d: two decided on one state, or tokens lost", i, g[0], balance)
				}
				balance -= g[1]
			}
			if balance < 0 || balance >= 2*bucket.MilliPerToken {
				t.Fatalf("%d millitokens left of %d after %d grants", balance, capacity, len(all))
			}
			// The unchecked limits lost exactly what their keys' grants took.
			c.armed.Store(false)
			took := make(map[int]int64)
			for w, s := range seen {
				for _, g := range s {
					took[w%tc.keys] += g[1]
				}
			}
			for key := range tc.keys {
				req := request(key)
				for i := range req.Buckets {
					for j := range req.Buckets[i].Limits {
						req.Buckets[i].Limits[j].Amount = 0
					}
				}
				if _, err := s.Consume(ctx, ns, req); err != nil {
					t.Fatal(err)
				}
				if got, want := req.Buckets[0].Limits[1].Observed.Tokens, unchecked.Capacity-took[key]; got != want {
					t.Errorf("key %d: its unchecked limit holds %d millitokens, want %d", key, got, want)
				}
			}
			t.Logf("%d grants, at most %d calls in flight, %d groups of repeats", granted.Load(), c.peak.Load(), c.repeats.Load())
		})
	}
}

// TestLaneCallersGivingUp runs many goroutines on one bucket, each with a
// deadline of a few hundred microseconds, recycling its request after
// every answer as the limiter does, also after giving up: the batches must
// never touch a request whose caller took it back (the race detector
// sees it if they do), and the bucket must never lend more than it has,
// every grant a caller saw among the debits it holds.
func TestLaneCallersGivingUp(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	ns := fmt.Sprintf("giving-up-%d", time.Now().UnixNano())
	now := time.Now().UnixMilli()
	const tokens = 300
	p := bucket.Params{Capacity: tokens * bucket.MilliPerToken, Amount: tokens * bucket.MilliPerToken, Period: 3_600_000}
	request := func() *store.ConsumeRequest {
		return &store.ConsumeRequest{Now: now, Buckets: []store.BucketRequest{{Key: store.BucketKey{Entity: "k", Resource: "api"},
			Limits: []store.LimitRequest{{Name: "rps", Params: p, Check: true, Amount: bucket.MilliPerToken}}}}}
	}
	var granted, gaveUp atomic.Int64
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			req := request()
			for i := range 40 {
				cctx, cancel := context.WithTimeout(ctx, time.Duration(50+(w*7+i*13)%400)*time.Microsecond)
				ok, err := s.Consume(cctx, ns, req)
				cancel()
				switch {
				case err != nil && cctx.Err() != nil:
					gaveUp.Add(1)
				case err != nil:
					t.Error(err)
					return
				case ok:
					granted.Add(1)
				}
				// recycled: the next request is written over this one
				req.Now = now
				req.Buckets[0].Limits[0].Observed = bucket.State{}
			}
		})
	}
	wg.Wait()
	req := request()
	req.Buckets[0].Limits[0].Amount = 0
	if _, err := s.Consume(ctx, ns, req); err != nil {
		t.Fatal(err)
	}
	left := req.Buckets[0].Limits[0].Observed.Tokens
	debited := p.Capacity - left
	if left < 0 || debited < granted.Load()*bucket.MilliPerToken {
		t.Fatalf("%d millitokens left of %d, %d grants seen", left, p.Capacity, granted.Load())
	}
	t.Logf("%d grants seen, %d gave up, %d tokens debited", granted.Load(), gaveUp.Load(), debited/bucket.MilliPerToken)
}
