package tollgate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// An LLM gateway asks for one request and an estimate of the tokens, then
// reports the real cost when the call is done.
func ExampleLimiter_Acquire() {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)) // the examples' time stands still
	lim, _ := tollgate.New(memory.New(), tollgate.WithClock(clk))
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 100), tollgate.PerMinute("tpm", 1000))

	lease, err := lim.Acquire(ctx, "key-1", "gpt-4o", tollgate.Consume{"rpm": 1, "tpm": 600}, limits)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("granted:", lease.Consumed())

	// A second call wants more tokens than are left.
	_, err = lim.Acquire(ctx, "key-1", "gpt-4o", tollgate.Consume{"rpm": 1, "tpm": 600}, limits)
	var denied *tollgate.RateLimitExceeded
	if errors.As(err, &denied) {
		p := denied.Primary()
		fmt.Printf("denied by %s: %d available, retry after %v\n", p.Limit, p.Available, denied.RetryAfter)
	}

	// The first call really used 1,500 tokens: more than the bucket holds.
	lease.Adjust(ctx, tollgate.Consume{"tpm": 1500 - 600})
	lease.Commit(ctx)
	sts, _ := lim.Available(ctx, "key-1", "gpt-4o", limits)
	for _, s := range sts {
		fmt.Printf("%s: %d of %d\n", s.Limit, s.Available, s.Capacity)
	}
	// Output:
	// granted: map[rpm:1 tpm:600]
	// denied by tpm: 400 available, retry after 12s
	// rpm: 99 of 100
	// tpm: -500 of 1000
}

// Do commits when the function succeeds and gives everything back when it
// fails (or panics).
func ExampleLimiter_Do() {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	lim, _ := tollgate.New(memory.New(), tollgate.WithClock(clk))
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 10))
	call := func(fail bool) {
		err := lim.Do(ctx, "key-1", "search", tollgate.Consume{"rpm": 1}, func(ctx context.Context, lease *tollgate.Lease) error {
			if fail {
				return errors.New("upstream failed")
			}
			return nil
		}, limits)
		sts, _ := lim.Available(ctx, "key-1", "search", limits)
		fmt.Printf("err=%v, rpm left: %d\n", err, sts[0].Available)
	}
	call(true)
	call(false)
	// Output:
	// err=upstream failed, rpm left: 10
	// err=<nil>, rpm left: 9
}

// Wait sleeps exactly the retry-after a denial reports, then tries again.
func ExampleLimiter_Wait() {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	lim, _ := tollgate.New(memory.New(), tollgate.WithClock(clk))
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 60))
	lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 60}, limits) // use up the minute

	// A real clock moves by itself; this fake one moves once Wait sleeps.
	go func() {
		clk.BlockUntilWaiters(1, nil)
		wake, _ := clk.NextDeadline()
		clk.Set(wake)
	}()
	start := clk.Now()
	lease, err := lim.Wait(ctx, "key-1", "api", tollgate.Consume{"rpm": 1}, limits)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("granted after", clk.Now().Sub(start))
	lease.Commit(ctx)
	// Output:
	// granted after 1s
}

// An API key cascades to its project and organisation: every acquire debits
// all three, all or nothing, each under its own stored limits.
func Example_cascade() {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	st := memory.New()
	lim, _ := tollgate.New(st, tollgate.WithClock(clk))
	adm, _ := tollgate.NewAdmin(st, tollgate.WithClock(clk))
	adm.CreateEntity(ctx, tollgate.Entity{ID: "org-1"})
	adm.CreateEntity(ctx, tollgate.Entity{ID: "proj-1", ParentID: "org-1", Cascade: true})
	adm.CreateEntity(ctx, tollgate.Entity{ID: "key-1", ParentID: "proj-1", Cascade: true})
	rpm := func(n int64) tollgate.Config {
		return tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", n)}}
	}
	adm.SetLimits(ctx, tollgate.ResourceScope("api"), rpm(100))   // every entity
	adm.SetLimits(ctx, tollgate.EntityScope("org-1", ""), rpm(2)) // the organisation

	for i := 1; i <= 3; i++ {
		lease, err := lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1})
		var denied *tollgate.RateLimitExceeded
		switch {
		case errors.As(err, &denied):
			v := denied.Violations()[0]
			fmt.Printf("call %d: denied by %s (%d of %d left), retry after %v\n", i, v.Entity, v.Available, v.Capacity, denied.RetryAfter)
		case err != nil:
			fmt.Println(err)
		default:
			levels := 0
			for _, s := range lease.Statuses() {
				if s.Limit == "rpm" && s.Requested > 0 {
					levels++
				}
			}
			fmt.Printf("call %d: granted, consumed %v, debited at %d levels\n", i, lease.Consumed()["rpm"], levels)
			lease.Commit(ctx)
		}
	}
	// Output:
	// call 1: granted, consumed 1, debited at 3 levels
	// call 2: granted, consumed 1, debited at 3 levels
	// call 3: denied by org-1 (0 of 2 left), retry after 30s
}

func ExampleParseLimit() {
	for _, text := range []string{"rpm:100", "tpm:10000:15000", "rps:50/sec", "rpm:100/5min", "inflight:10/concurrent", "rpm:lots"} {
		l, err := tollgate.ParseLimit(text)
		switch {
		case err != nil:
			fmt.Println(err)
		case l.Kind == tollgate.Concurrency:
			fmt.Printf("%s: at most %d in flight\n", l.Name, l.Capacity)
		default:
			fmt.Printf("%s: %d per %v, burst %d\n", l.Name, l.RefillAmount, l.RefillPeriod, l.Capacity)
		}
	}
	// Output:
	// rpm: 100 per 1m0s, burst 100
	// tpm: 10000 per 1m0s, burst 15000
	// rps: 50 per 1s, burst 50
	// rpm: 100 per 5m0s, burst 100
	// inflight: at most 10 in flight
	// invalid limit "rpm:lots": rate "lots" is not a whole number
}

// Stored limits are resolved most specific first: entity+resource, entity
// default, resource, system. An Admin stores them, a Limiter over the same
// store enforces them.
func ExampleAdmin_SetLimits() {
	ctx := context.Background()
	st := memory.New()
	adm, _ := tollgate.NewAdmin(st)
	lim, _ := tollgate.New(st)
	adm.CreateEntity(ctx, tollgate.Entity{ID: "org-1"})
	rpm := func(n int64) tollgate.Config {
		return tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", n)}}
	}
	adm.SetLimits(ctx, tollgate.SystemScope(), rpm(10))
	adm.SetLimits(ctx, tollgate.ResourceScope("gpt-4o"), rpm(20))
	adm.SetLimits(ctx, tollgate.EntityScope("org-1", ""), rpm(30))
	adm.SetLimits(ctx, tollgate.EntityScope("org-1", "gpt-4o"), rpm(40))

	for _, q := range [][2]string{{"org-1", "gpt-4o"}, {"org-1", "claude"}, {"org-2", "gpt-4o"}, {"org-2", "claude"}} {
		sts, _ := lim.Available(ctx, q[0], q[1])
		fmt.Printf("%s %s: rpm %d\n", q[0], q[1], sts[0].Capacity)
	}
	// Output:
	// org-1 gpt-4o: rpm 40
	// org-1 claude: rpm 30
	// org-2 gpt-4o: rpm 20
	// org-2 claude: rpm 10
}
