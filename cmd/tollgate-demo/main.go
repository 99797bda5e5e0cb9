// Command tollgate-demo simulates an LLM gateway on the in-memory backend:
// three API keys of one organisation call a model under per-key and
// organisation-wide limits. Time is simulated, so the run takes a moment and
// prints the same story every time: grants, denials with their retry-after,
// debt from under-estimated token counts, and its repayment by refill.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store/memory"
)

const model = "openai/gpt-4o"

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	start := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	st := memory.New()
	adm, err := tollgate.NewAdmin(st, tollgate.WithClock(clk))
	if err != nil {
		return err
	}
	if err := setup(ctx, adm); err != nil {
		return err
	}
	lim, err := tollgate.New(st, tollgate.WithClock(clk))
	if err != nil {
		return err
	}

	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"key-alice", "key-bob", "key-carol"}
	fmt.Fprintln(out, "time       key        estimate  outcome")
	for step := 0; step < 24; step++ {
		clk.Advance(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		key := keys[rng.IntN(len(keys))]
		estimate := int64(300 + rng.IntN(700))
		at := clk.Now().Sub(start).Round(time.Millisecond)

		consume := tollgate.Consume{"rpm": 1, "tpm": estimate}
		lease, err := lim.Acquire(ctx, key, model, consume)
		var denied *tollgate.RateLimitExceeded
		if errors.As(err, &denied) {
			p := denied.Primary()
			fmt.Fprintf(out, "%-10v %-10s %8d  DENIED by %s of %s: %d available, retry after %v\n",
				at, key, estimate, p.Limit, p.Entity, p.Available, denied.RetryAfter)
			// Sleep exactly the retry-after (simulated) and try again: the
			// retry-after is exact, so the second attempt succeeds.
			clk.Advance(denied.RetryAfter)
			at = clk.Now().Sub(start).Round(time.Millisecond)
			lease, err = lim.Acquire(ctx, key, model, consume)
		}
		if err != nil {
			return err
		}
		// The model answered; the real token count differs from the estimate.
		used := estimate/2 + int64(rng.IntN(int(estimate)*2))
		if err := lease.Adjust(ctx, tollgate.Consume{"tpm": used - estimate}); err != nil {
			return err
		}
		if err := lease.Commit(ctx); err != nil {
			return err
		}
		tpm := tpmOf(ctx, lim, key)
		note := ""
		if tpm < 0 {
			note = "  (in debt: repaid by refill)"
		}
		fmt.Fprintf(out, "%-10v %-10s %8d  granted, used %d; %s has %d tpm left%s\n", at, key, estimate, used, key, tpm, note)
	}

	fmt.Fprintln(out, "\nidle for 30s: refill repays debts")
	clk.Advance(30 * time.Second)
	for _, key := range keys {
		fmt.Fprintf(out, "  %-10s tpm available: %d\n", key, tpmOf(ctx, lim, key))
	}
	return nil
}

// setup stores the limits: every key gets 20 requests and 4,000 tokens a
// minute; the organisation shares 9,000 tokens a minute among its keys.
func setup(ctx context.Context, adm *tollgate.Admin) error {
	perKey, err := tollgate.ParseLimits([]string{"rpm:20", "tpm:4000"})
	if err != nil {
		return err
	}
	if err := adm.SetLimits(ctx, tollgate.ResourceScope(model), tollgate.Config{Limits: perKey}); err != nil {
		return err
	}
	if _, err := adm.CreateEntity(ctx, tollgate.Entity{ID: "org-acme", Name: "Acme"}); err != nil {
		return err
	}
	org := tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 1000), tollgate.PerMinute("tpm", 9000)}}
	if err := adm.SetLimits(ctx, tollgate.EntityScope("org-acme", model), org); err != nil {
		return err
	}
	for _, key := range []string{"key-alice", "key-bob", "key-carol"} {
		if _, err := adm.CreateEntity(ctx, tollgate.Entity{ID: key, ParentID: "org-acme", Cascade: true}); err != nil {
			return err
		}
	}
	return nil
}

func tpmOf(ctx context.Context, lim *tollgate.Limiter, key string) int64 {
	statuses, err := lim.Available(ctx, key, model)
	if err != nil {
		return 0
	}
	for _, s := range statuses {
		if s.Entity == key && s.Limit == "tpm" {
			return s.Available
		}
	}
	return 0
}
