package tollgate_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/calendar"
	"github.com/tollgate-rl/tollgate/internal/cputime"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// BenchmarkLimiter measures Acquire+Commit on the memory backend. Each group
// (serial, parallel) starts with the baseline, golang.org/x/time/rate's
// Allow on one limiter that never runs dry, so `make bench` can print ratios
// from the same run (internal/benchratio).
func BenchmarkLimiter(b *testing.B) {
	ctx := context.Background()
	const huge = 1 << 40 // tokens per second: the benchmarks never run dry
	oneLimit := tollgate.WithLimits(tollgate.PerSecond("rps", huge))
	threeLimits := tollgate.WithLimits(tollgate.PerSecond("rps", huge), tollgate.PerSecond("tps", huge),
		tollgate.ConcurrencyLimit("inflight", huge))
	// A calendar quota costs what a rate limit does, but for finding
	// its window in the zone's calendar.
	quota := tollgate.WithLimits(tollgate.CalendarQuota("rps", huge, calendar.Window{Unit: calendar.Month, Zone: "Europe/Berlin"}))
	one := tollgate.Consume{"rps": 1}
	three := tollgate.Consume{"rps": 1, "tps": 100, "inflight": 1}

	storedConfig := func(adm *tollgate.Admin) {
		cfg := tollgate.Config{Limits: []tollgate.Limit{tollgate.PerSecond("rps", huge)}}
		if err := adm.SetLimits(ctx, tollgate.SystemScope(), cfg); err != nil {
			b.Fatal(err)
		}
	}
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	cases := []struct {
		name    string
		consume tollgate.Consume
		opt     tollgate.AcquireOption
		manyKey bool
		setup   func(*tollgate.Admin)
		lim     []tollgate.Option
		// refused, if set, is an acquire refused before the run (a key
		// the deny cache then remembers).
		refused func(*tollgate.Limiter)
	}{
		{name: "1limit-hotkey", consume: one, opt: oneLimit},
		{name: "3limits-hotkey", consume: three, opt: threeLimits},
		{name: "1limit-manykeys", consume: one, opt: oneLimit, manyKey: true},
		{name: "1quota-hotkey", consume: one, opt: quota},
		// The deny cache on, and nothing refused: what it costs a grant.
		{name: "1limit-hotkey-denycache", consume: one, opt: oneLimit, lim: []tollgate.Option{tollgate.WithDenyCache(tollgate.DefaultDenyCacheMaxAge)}},
		// ... and remembering another key's refusal: every grant looks.
		{name: "1limit-hotkey-denycache-busy", consume: one, opt: oneLimit, lim: []tollgate.Option{tollgate.WithDenyCache(time.Hour)},
			refused: func(lim *tollgate.Limiter) {
				spent := tollgate.WithLimits(tollgate.RateLimit("rph", 1, time.Hour))
				_, _ = lim.AcquireAndCommit(ctx, "abuser", "llm", tollgate.Consume{"rph": 1}, spent)
				if _, err := lim.Acquire(ctx, "abuser", "llm", tollgate.Consume{"rph": 1}, spent); !errors.Is(err, tollgate.ErrRateLimited) {
					b.Fatalf("Acquire: %v, want a refusal", err)
				}
			}},
		{name: "3limits-manykeys", consume: three, opt: threeLimits, manyKey: true},
		{name: "1limit-stored-config", consume: one, setup: storedConfig},
		{name: "1limit-stored-manykeys", consume: one, manyKey: true, setup: storedConfig},
		{name: "1limit-cascade3", consume: one, setup: func(adm *tollgate.Admin) {
			cfg := tollgate.Config{Limits: []tollgate.Limit{tollgate.PerSecond("rps", huge)}}
			if err := adm.SetLimits(ctx, tollgate.SystemScope(), cfg); err != nil {
				b.Fatal(err)
			}
			for _, e := range []tollgate.Entity{{ID: "org"}, {ID: "project", ParentID: "org", Cascade: true}, {ID: "key-0", ParentID: "project", Cascade: true}} {
				if _, err := adm.CreateEntity(ctx, e); err != nil {
					b.Fatal(err)
				}
			}
		}},
	}

	for _, mode := range []string{"serial", "parallel"} {
		b.Run(mode, func(b *testing.B) {
			b.Run("rate.Allow", func(b *testing.B) {
				rl := rate.NewLimiter(huge, huge)
				run(b, mode, func(int) {
					if !rl.Allow() {
						b.Fatal("x/time/rate denied")
					}
				})
			})
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) {
					st := memory.New()
					lim, err := tollgate.New(st, c.lim...)
					if err != nil {
						b.Fatal(err)
					}
					if c.refused != nil {
						c.refused(lim)
					}
					if c.setup != nil {
						adm, err := tollgate.NewAdmin(st) // the memory store's changes are seen at once
						if err != nil {
							b.Fatal(err)
						}
						c.setup(adm)
					}
					var opts []tollgate.AcquireOption
					if c.opt != nil {
						opts = append(opts, c.opt)
					}
					run(b, mode, func(i int) {
						key := "key-0"
						if c.manyKey {
							key = keys[i%len(keys)]
						}
						lease, err := lim.Acquire(ctx, key, "llm", c.consume, opts...)
						if err != nil {
							b.Fatal(err)
						}
						if err := lease.Commit(ctx); err != nil {
							b.Fatal(err)
						}
					})
				})
			}
		})
	}
}

// BenchmarkRefusalFlood measures refused acquires of one exhausted key on
// the memory backend (a limit of one token an hour, spent): the store's
// refusal, and the deny cache's (WithDenyCache, max age 1 s, on the wall
// clock: the store is asked again once a second). The baseline is a
// refused rate.Allow.
func BenchmarkRefusalFlood(b *testing.B) {
	ctx := context.Background()
	limits := tollgate.WithLimits(tollgate.RateLimit("rph", 1, time.Hour))
	one := tollgate.Consume{"rph": 1}
	for _, mode := range []string{"serial", "parallel"} {
		b.Run(mode, func(b *testing.B) {
			b.Run("rate.Allow", func(b *testing.B) {
				rl := rate.NewLimiter(rate.Every(time.Hour), 1)
				rl.Allow()
				run(b, mode, func(int) {
					if rl.Allow() {
						b.Fatal("x/time/rate granted")
					}
				})
			})
			for _, c := range []struct {
				name string
				opts []tollgate.Option
			}{
				{"store", nil},
				{"denycache", []tollgate.Option{tollgate.WithDenyCache(tollgate.DefaultDenyCacheMaxAge)}},
			} {
				b.Run(c.name, func(b *testing.B) {
					lim, err := tollgate.New(memory.New(), c.opts...)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := lim.AcquireAndCommit(ctx, "abuser", "llm", one, limits); err != nil {
						b.Fatal(err)
					}
					run(b, mode, func(int) {
						if _, err := lim.Acquire(ctx, "abuser", "llm", one, limits); !errors.Is(err, tollgate.ErrRateLimited) {
							b.Fatalf("Acquire: %v, want a refusal", err)
						}
					})
				})
			}
		})
	}
}

// run calls op b.N times, serially or from GOMAXPROCS goroutines, passing a
// per-call index, and reports the process's CPU time per call (cpu-ns/op)
// beside the wall time.
func run(b *testing.B, mode string, op func(i int)) {
	b.ReportAllocs()
	defer cputime.ReportPerOp(b, cputime.Process())
	if mode == "serial" {
		i := 0
		for b.Loop() {
			op(i)
			i++
		}
		return
	}
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1) * 7919)
		for pb.Next() {
			op(i)
			i++
		}
	})
}
