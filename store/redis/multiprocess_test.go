package redis_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/internal/measure"
	"github.com/tollgate-rl/tollgate/store/redis"
)

// The multi-process tests start this test binary again as worker
// processes (TestMain sees mpWorkerEnv), each acquiring from many
// goroutines with the wall clock, as separate machines would, on the test
// binary's redis-server.
const (
	mpWorkerEnv  = "TOLLGATE_MP_WORKER" // the scenario: "bucket", "cascade" or "slots"
	mpURLEnv     = "TOLLGATE_MP_URL"
	mpEntityEnv  = "TOLLGATE_MP_ENTITY"
	mpNSEnv      = "TOLLGATE_MP_NAMESPACE"
	mpStartEnv   = "TOLLGATE_MP_START" // Unix ms at which every worker starts
	mpDuration   = 3 * time.Second
	mpProcesses  = 3
	mpGoroutines = 16
)

// The scenarios' limits, below what the workers ask for on a shared
// 2-core machine, so that demand exceeds supply: one bucket of 400/s; keys
// of 300/s cascading to an organisation of 500/s; 5 concurrency slots.
var (
	mpBucketLimit = tollgate.PerSecond("rps", 400)
	mpKeyLimit    = tollgate.PerSecond("rps", 300)
	mpOrgLimit    = tollgate.PerSecond("rps", 500)
	mpSlots       = tollgate.ConcurrencyLimit("slots", 5)
)

// mpResult is what a worker reports on stdout.
type mpResult struct {
	measure.Tally
	MaxHeld  int64 `json:"max_held"` // "slots": the most holders seen at once
	Overheld int64 `json:"overheld"` // "slots": holders seen beyond the limit
}

func runWorker() int {
	res := work(os.Getenv(mpWorkerEnv))
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

func work(scenario string) mpResult {
	ctx := context.Background()
	url := os.Getenv(mpURLEnv)
	s, err := redis.Open(ctx, url)
	if err != nil {
		return mpResult{Tally: measure.Failed(err)}
	}
	defer s.Close()
	entity, opts := "hot", []tollgate.AcquireOption{tollgate.WithLimits(mpBucketLimit)}
	consume := tollgate.Consume{"rps": 1}
	switch scenario {
	case "cascade":
		entity, opts = os.Getenv(mpEntityEnv), nil // stored limits
	case "slots":
		entity, opts, consume = "pool", []tollgate.AcquireOption{tollgate.WithLimits(mpSlots)}, tollgate.Consume{"slots": 1}
	}
	// A plain client counts the holders of a slot: incremented after a
	// grant, decremented before the release, so the count never exceeds
	// the true number of holders.
	co, _ := redis.ClientOption(url)
	counter, err := rueidis.NewClient(co)
	if err != nil {
		return mpResult{Tally: measure.Failed(err)}
	}
	defer counter.Close()
	holders := "mp-holders-" + os.Getenv(mpStartEnv)
	clocks := make([]*measure.SpanClock, mpGoroutines)
	lims := make([]*tollgate.Limiter, mpGoroutines)
	for i := range lims {
		clocks[i] = &measure.SpanClock{}
		if lims[i], err = tollgate.New(s, tollgate.WithClock(clocks[i]), tollgate.WithNamespace(os.Getenv(mpNSEnv))); err != nil {
			return mpResult{Tally: measure.Failed(err)}
		}
		// Warm up (namespace, connections, caches) without consuming.
		if _, err := lims[i].Available(ctx, entity, "api", opts...); err != nil {
			return mpResult{Tally: measure.Failed(err)}
		}
	}
	start, _ := strconv.ParseInt(os.Getenv(mpStartEnv), 10, 64)
	time.Sleep(time.Until(time.UnixMilli(start)))
	stop := time.UnixMilli(start).Add(mpDuration)
	var grants, denied, errs, maxHeld, overheld atomic.Int64
	var firstErr atomic.Value
	var first, last atomic.Int64
	first.Store(1 << 62)
	var wg sync.WaitGroup
	for i := range mpGoroutines {
		lim, clk := lims[i], clocks[i]
		if scenario == "slots" {
			// One limiter for the process: a slot given back wakes its
			// waiters at once.
			lim = lims[0]
		}
		wg.Go(func() {
			for time.Now().Before(stop) {
				clk.Reset()
				lease, err := acquire(ctx, lim, scenario, entity, consume, opts)
				switch {
				case err == nil:
					lo, hi := clk.Span()
					grants.Add(1)
					if scenario == "slots" {
						n, _ := counter.Do(ctx, counter.B().Incr().Key(holders).Build()).AsInt64()
						for m := maxHeld.Load(); n > m && !maxHeld.CompareAndSwap(m, n); m = maxHeld.Load() {
						}
						if n > mpSlots.Capacity {
							overheld.Add(1)
						}
						time.Sleep(time.Millisecond)
						counter.Do(ctx, counter.B().Decr().Key(holders).Build())
					}
					if err := lease.Commit(ctx); err != nil && errs.Add(1) == 1 {
						firstErr.Store("commit: " + err.Error())
					}
					for f := first.Load(); lo < f && !first.CompareAndSwap(f, lo); f = first.Load() {
					}
					for l := last.Load(); hi > l && !last.CompareAndSwap(l, hi); l = last.Load() {
					}
				case errors.Is(err, tollgate.ErrRateLimited), errors.Is(err, context.DeadlineExceeded):
					denied.Add(1)
					// As a real client does, wait the refusal's
					// retry-after (at most 50 ms) instead of spinning:
					// demand still exceeds supply, without starving the
					// other tests of the CPU.
					var ex *tollgate.RateLimitExceeded
					if errors.As(err, &ex) {
						time.Sleep(min(ex.RetryAfter, 50*time.Millisecond))
					}
				default:
					if errs.Add(1) == 1 {
						firstErr.Store(err.Error())
					}
				}
			}
		})
	}
	wg.Wait()
	res := mpResult{Tally: measure.Tally{Grants: grants.Load(), Denied: denied.Load(), First: first.Load(), Last: last.Load(), Errors: errs.Load()},
		MaxHeld: maxHeld.Load(), Overheld: overheld.Load()}
	if e, ok := firstErr.Load().(string); ok {
		res.Error = e
	}
	return res
}

// acquire is one try of a worker: Acquire on a rate limit, Wait on the
// slots (a slot given back by a goroutine of the process wakes it).
func acquire(ctx context.Context, lim *tollgate.Limiter, scenario, entity string, consume tollgate.Consume, opts []tollgate.AcquireOption) (*tollgate.Lease, error) {
	if scenario != "slots" {
		return lim.Acquire(ctx, entity, "api", consume, opts...)
	}
	ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	return lim.Wait(ctx, entity, "api", consume, opts...)
}

// runWorkers starts one worker process per entity and collects their
// results.
func runWorkers(t *testing.T, scenario, ns string, entities []string) []mpResult {
	t.Helper()
	start := strconv.FormatInt(time.Now().Add(2*time.Second).UnixMilli(), 10)
	envs := make([][]string, len(entities))
	for i, entity := range entities {
		envs[i] = []string{mpWorkerEnv + "=" + scenario, mpURLEnv + "=" + serverURL,
			mpEntityEnv + "=" + entity, mpNSEnv + "=" + ns, mpStartEnv + "=" + start}
	}
	return measure.RunWorkers[mpResult](t, envs)
}

// newNamespace registers a fresh namespace for a multi-process test.
func newNamespace(t *testing.T, adm *tollgate.Admin) string {
	t.Helper()
	name := fmt.Sprintf("mp-%d", time.Now().UnixNano())
	if _, err := adm.RegisterNamespace(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return name
}

func newAdmin(t *testing.T, opts ...tollgate.Option) *tollgate.Admin {
	t.Helper()
	adm, err := tollgate.NewAdmin(newStore(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return adm
}

func TestMultiProcessOneBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test skipped in -short mode")
	}
	ns := newNamespace(t, newAdmin(t))
	results := runWorkers(t, "bucket", ns, []string{"hot", "hot", "hot"})
	what := fmt.Sprintf("%d processes x %d goroutines, one bucket of %s", mpProcesses, mpGoroutines, mpBucketLimit)
	measure.HoldsBound(t, what, mpBucketLimit, results, 0.6)
}

func TestMultiProcessCascade(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test skipped in -short mode")
	}
	ns := newNamespace(t, newAdmin(t))
	keys := []string{"key-0", "key-1", "key-2"}
	measure.SetUpCascade(t, newAdmin(t, tollgate.WithNamespace(ns)), keys, mpKeyLimit, mpOrgLimit)
	results := runWorkers(t, "cascade", ns, keys)
	what := fmt.Sprintf("%d processes x %d goroutines, 3 keys cascading to one org", mpProcesses, mpGoroutines)
	measure.HoldsCascade(t, what, keys, mpKeyLimit, mpOrgLimit, results, 0.6)
}

// 3 processes x 16 goroutines take and give back 5 concurrency slots: no
// more than 5 holders are ever seen at once, and every slot is back at the
// end or held by a lease record the reconciler will end.
func TestMultiProcessSlots(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test skipped in -short mode")
	}
	ctx := context.Background()
	ns := newNamespace(t, newAdmin(t))
	results := runWorkers(t, "slots", ns, []string{"a", "b", "c"})
	var grants, maxHeld, overheld int64
	for _, r := range results {
		grants += r.Grants
		maxHeld = max(maxHeld, r.MaxHeld)
		overheld += r.Overheld
	}
	t.Logf("%d processes x %d goroutines on %s: %d grants, at most %d holders seen", mpProcesses, mpGoroutines, mpSlots, grants, maxHeld)
	if overheld > 0 || maxHeld > mpSlots.Capacity {
		t.Errorf("over-admission: %d holders seen at once (%d times beyond %d)", maxHeld, overheld, mpSlots.Capacity)
	}
	if grants == 0 {
		t.Error("no grants")
	}
	lim, err := tollgate.New(newStore(t), tollgate.WithNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	sts, err := lim.Available(ctx, "pool", "api", tollgate.WithLimits(mpSlots))
	if err != nil || len(sts) != 1 {
		t.Fatalf("after the workers: %+v, %v", sts, err)
	}
	// Every slot is back, but those of leases whose grant a worker's
	// deadline cut off before it read the answer (the store granted,
	// the worker saw DeadlineExceeded): each is held by its open record,
	// which the reconciler ends at its expiry. None is held without one.
	open, _, err := newAdmin(t, tollgate.WithNamespace(ns)).Leases(ctx, "pool", "api", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if held := mpSlots.Capacity - sts[0].Available; held != int64(len(open)) {
		t.Errorf("after the workers: %d slots held, by %d open lease records; want each held slot's record", held, len(open))
	}
}
