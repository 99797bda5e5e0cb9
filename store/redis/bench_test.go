package redis_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/internal/cputime"
	"github.com/tollgate-rl/tollgate/internal/measure"
	"github.com/tollgate-rl/tollgate/store/redis"
)

// BenchmarkRedis measures the backend where users call it: Acquire and
// Commit through a tollgate.Limiter on the test binary's redis-server, in
// the cases users live in, each in alternation with its baseline measured
// in the same run: one EVALSHA of a trivial script (one HINCRBY on one
// key). It reports the case's median latency (p50-us), the baseline's
// (base-p50-us), their ratio (x-paired), and the Redis commands each
// acquire sent, counted at the client (calls/acquire).
//
// Latency cases, one goroutine:
//   - idle-entities: 1,000 keys of 10/s in turn, the clock moving a second
//     per acquire: every bucket is full again when its key comes back;
//   - busy-bucket: one key of 10,000/min, the clock moving 1 ms per
//     acquire: below capacity, drained faster than it fills;
//   - generous-limit: one key of 1,000,000/s on the wall clock;
//   - cascade-idle: 100 keys cascading into one organisation, the clock
//     moving a second per acquire;
//   - cascade-busy: one key cascading into its organisation, both of
//     10,000/min, the clock moving 1 ms per acquire;
//   - concurrency-slot: one key with a concurrency slot: a durable lease,
//     whose acquire and commit are one script each.
//
// Throughput (hot/...): one key of 1,000,000/s acquired and committed
// from 1, 8 and 32 goroutines on the wall clock, in rounds alternating
// with raw EVALSHAs at the same concurrency (acquires/s, base-calls/s and
// x-raw: the acquire rate over the raw rate; the acquires of one bucket
// share calls, so it can exceed 1), with the CPU time of this process
// (cpu-us/acquire, cpu-us/raw) and of the redis-server (INFO cpu:
// srv-us/acquire, srv-us/raw) per acquire and per raw call.
// TOLLGATE_BENCH_INFLIGHT sets the calls a lane may have in flight, to
// measure other bounds than the Store's.
func BenchmarkRedis(b *testing.B) {
	if serverURL == "" {
		b.Skip("no redis-server")
	}
	raw := newRawCall(b)
	srv := newServerCPU(b)
	for range 2000 {
		raw()
	}
	for _, c := range latencyCases() {
		b.Run("latency/"+c.name, func(b *testing.B) {
			env := newBenchEnv(b, c.fake)
			op := c.setup(b, env)
			env.calls.Store(0)
			env.acquires.Store(0)
			measure.Paired(b, raw, op)
			b.ReportMetric(float64(env.calls.Load())/float64(env.acquires.Load()), "calls/acquire")
		})
	}
	for _, g := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("hot/goroutines-%d", g), func(b *testing.B) {
			env := newBenchEnv(b, false)
			rps := tollgate.Consume{"rps": 1}
			limits := tollgate.WithLimits(tollgate.PerSecond("rps", 1_000_000))
			key := fmt.Sprintf("hot-%d-%d", g, time.Now().UnixNano())
			env.acquire(key, rps, limits)
			env.calls.Store(0)
			env.acquires.Store(0)
			var acq, base, acqCPU, baseCPU, acqSrv, baseSrv time.Duration
			var nAcq, nBase int64
			for b.Loop() {
				c0, s0 := cputime.Process(), srv()
				base += parallel(g, 20, func() { raw() })
				c1, s1 := cputime.Process(), srv()
				nBase += int64(g * 20)
				acq += parallel(g, 20, func() { env.acquire(key, rps, limits) })
				c2, s2 := cputime.Process(), srv()
				nAcq += int64(g * 20)
				baseCPU, acqCPU, baseSrv, acqSrv = baseCPU+c1-c0, acqCPU+c2-c1, baseSrv+s1-s0, acqSrv+s2-s1
			}
			b.ReportMetric(float64(nAcq)/acq.Seconds(), "acquires/s")
			b.ReportMetric(float64(nBase)/base.Seconds(), "base-calls/s")
			b.ReportMetric((float64(nAcq)/acq.Seconds())/(float64(nBase)/base.Seconds()), "x-raw")
			b.ReportMetric(float64(env.calls.Load())/float64(env.acquires.Load()), "calls/acquire")
			us := func(d time.Duration, n int64) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(n) }
			b.ReportMetric(us(acqCPU, nAcq), "cpu-us/acquire")
			b.ReportMetric(us(acqSrv, nAcq), "srv-us/acquire")
			b.ReportMetric(us(baseCPU, nBase), "cpu-us/raw")
			b.ReportMetric(us(baseSrv, nBase), "srv-us/raw")
		})
	}
}

// newServerCPU returns a function that reads the redis-server's CPU time
// so far (INFO cpu: user and system, to the microsecond).
func newServerCPU(b *testing.B) func() time.Duration {
	c := rawClient(b, serverURL)
	return func() time.Duration {
		info, err := c.Do(context.Background(), c.B().Info().Section("cpu").Build()).ToString()
		if err != nil {
			b.Fatal(err)
		}
		var sum float64
		for _, line := range strings.Split(info, "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			if k == "used_cpu_sys" || k == "used_cpu_user" {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				sum += f
			}
		}
		return time.Duration(sum * 1e9)
	}
}

// parallel runs op n times in each of g goroutines and returns how long
// they took together.
func parallel(g, n int, op func()) time.Duration {
	var wg sync.WaitGroup
	start := time.Now()
	for range g {
		wg.Go(func() {
			for range n {
				op()
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

type latencyCase struct {
	name  string
	fake  bool
	setup func(b *testing.B, env *benchEnv) func()
}

func latencyCases() []latencyCase {
	ctx := context.Background()
	per := func(env *benchEnv, step time.Duration, key func(i int) string, consume tollgate.Consume, opts ...tollgate.AcquireOption) func() {
		i := 0
		return func() {
			if env.clk != nil {
				env.clk.Advance(step)
			}
			env.acquire(key(i), consume, opts...)
			i++
		}
	}
	rps, rpm := tollgate.Consume{"rps": 1}, tollgate.Consume{"rpm": 1}
	cascade := func(b *testing.B, env *benchEnv, prefix string, n int, limit tollgate.Limit) {
		if err := env.adm.SetLimits(ctx, tollgate.ResourceScope("api"), tollgate.Config{Limits: []tollgate.Limit{limit}}); err != nil {
			b.Fatal(err)
		}
		if _, err := env.adm.CreateEntity(ctx, tollgate.Entity{ID: prefix + "org"}); err != nil {
			b.Fatal(err)
		}
		for i := range n {
			if _, err := env.adm.CreateEntity(ctx, tollgate.Entity{ID: prefix + strconv.Itoa(i), ParentID: prefix + "org", Cascade: true}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return []latencyCase{
		{"idle-entities", true, func(b *testing.B, env *benchEnv) func() {
			return warm(1000, per(env, time.Second, func(i int) string { return "idle-" + strconv.Itoa(i%1000) }, rps, tollgate.WithLimits(tollgate.PerSecond("rps", 10))))
		}},
		{"busy-bucket", true, func(b *testing.B, env *benchEnv) func() {
			return per(env, time.Millisecond, func(int) string { return "busy" }, rpm, tollgate.WithLimits(tollgate.PerMinute("rpm", 10_000)))
		}},
		{"generous-limit", false, func(b *testing.B, env *benchEnv) func() {
			return per(env, 0, func(int) string { return "generous" }, rps, tollgate.WithLimits(tollgate.PerSecond("rps", 1_000_000)))
		}},
		{"cascade-idle", true, func(b *testing.B, env *benchEnv) func() {
			cascade(b, env, "ci", 100, tollgate.PerSecond("rps", 10))
			return warm(100, per(env, time.Second, func(i int) string { return "ci" + strconv.Itoa(i%100) }, rps))
		}},
		{"cascade-busy", true, func(b *testing.B, env *benchEnv) func() {
			cascade(b, env, "cb", 1, tollgate.PerMinute("rpm", 10_000))
			return per(env, time.Millisecond, func(int) string { return "cb0" }, rpm)
		}},
		{"concurrency-slot", true, func(b *testing.B, env *benchEnv) func() {
			return per(env, time.Millisecond, func(int) string { return "slot" }, tollgate.Consume{"slots": 1, "rpm": 1},
				tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", 1), tollgate.PerMinute("rpm", 10_000)))
		}},
	}
}

// warm runs op n times, so that the limiter's caches know every entity
// of a case before the commands are counted.
func warm(n int, op func()) func() {
	for range n {
		op()
	}
	return op
}

// benchEnv is a Limiter and an Admin on a store whose client counts the
// commands it sends.
type benchEnv struct {
	lim      *tollgate.Limiter
	adm      *tollgate.Admin
	clk      *clock.Fake // nil: the wall clock
	calls    atomic.Int64
	acquires atomic.Int64
}

func newBenchEnv(b *testing.B, fake bool) *benchEnv {
	b.Helper()
	env := &benchEnv{}
	co, err := redis.ClientOption(serverURL)
	if err != nil {
		b.Fatal(err)
	}
	c, err := rueidis.NewClient(co)
	if err != nil {
		b.Fatal(err)
	}
	s, err := redis.New(countingClient{c, &env.calls})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	if n, err := strconv.Atoi(os.Getenv("TOLLGATE_BENCH_INFLIGHT")); err == nil {
		redis.SetMaxInFlight(s, n) // to measure other bounds
	}
	opts := []tollgate.Option{tollgate.WithNamespace(fmt.Sprintf("bench-%d", time.Now().UnixNano()))}
	if fake {
		env.clk = clock.NewFake(time.Now())
		opts = append(opts, tollgate.WithClock(env.clk))
	}
	root, err := tollgate.NewAdmin(s)
	if err != nil {
		b.Fatal(err)
	}
	w, err := tollgate.NewChangeWatch(s, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	opts = append(opts, tollgate.WithChangeWatch(w), tollgate.WithCacheTTL(24*time.Hour))
	if env.adm, err = tollgate.NewAdmin(s, opts...); err != nil {
		b.Fatal(err)
	}
	if _, err := root.RegisterNamespace(context.Background(), env.adm.Namespace()); err != nil {
		b.Fatal(err)
	}
	if env.lim, err = tollgate.New(s, opts...); err != nil {
		b.Fatal(err)
	}
	return env
}

// acquire acquires consume of entity's "api" and commits it; a refusal
// is fine (busy cases), an error is not.
func (env *benchEnv) acquire(entity string, consume tollgate.Consume, opts ...tollgate.AcquireOption) {
	ctx := context.Background()
	env.acquires.Add(1)
	lease, err := env.lim.Acquire(ctx, entity, "api", consume, opts...)
	var denied *tollgate.RateLimitExceeded
	switch {
	case errors.As(err, &denied):
		return
	case err != nil:
		panic(err)
	}
	if err := lease.Commit(ctx); err != nil {
		panic(err)
	}
}

// countingClient counts the commands a Store sends.
type countingClient struct {
	rueidis.Client
	n *atomic.Int64
}

func (c countingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.Do(ctx, cmd)
}

func (c countingClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.n.Add(int64(len(cmds)))
	return c.Client.DoMulti(ctx, cmds...)
}

// newRawCall returns one EVALSHA of a trivial script on one key.
func newRawCall(b *testing.B) func() {
	c := rawClient(b, serverURL)
	script := rueidis.NewLuaScript("return redis.call('HINCRBY', KEYS[1], 'n', 1)")
	key := fmt.Sprintf("raw-%d", time.Now().UnixNano())
	return func() {
		if err := script.Exec(context.Background(), c, []string{key}, nil).Error(); err != nil {
			panic(err)
		}
	}
}
