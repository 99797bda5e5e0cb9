package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// exercise is code written once against tollgate.Acquirer, run below on a
// Limiter (in process) and on a Client (through a server): the same names,
// arguments, options and typed errors.
func exercise[L tollgate.Held](t *testing.T, a tollgate.Acquirer[L]) {
	t.Helper()
	ctx := context.Background()
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 3), tollgate.PerMinute("tpm", 1000))

	err := a.Do(ctx, "key-1", "openai/gpt-4o", tollgate.Consume{"rpm": 1, "tpm": 100}, func(ctx context.Context, l L) error {
		if l.Entity() != "key-1" || l.Resource() != "openai/gpt-4o" {
			t.Errorf("lease of %s/%s", l.Entity(), l.Resource())
		}
		return l.Adjust(ctx, tollgate.Consume{"tpm": 400}) // the real cost: 500
	}, limits)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	g, err := a.AcquireAndCommit(ctx, "key-1", "openai/gpt-4o", tollgate.Consume{"rpm": 1}, limits)
	if err != nil || g.Consumed["rpm"] != 1 {
		t.Fatalf("AcquireAndCommit = %+v, %v", g, err)
	}
	le, err := a.Wait(ctx, "key-1", "openai/gpt-4o", tollgate.Consume{"rpm": 1}, limits)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if err := le.Rollback(ctx); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	sts, err := a.Available(ctx, "key-1", "openai/gpt-4o", limits)
	if err != nil || len(sts) != 2 {
		t.Fatalf("Available = %v, %v", sts, err)
	}
	for _, s := range sts {
		if want := map[string]int64{"rpm": 1, "tpm": 500}[s.Limit]; s.Available != want {
			t.Errorf("%s available %d, want %d", s.Limit, s.Available, want)
		}
	}
	if _, err := a.Acquire(ctx, "key-1", "openai/gpt-4o", tollgate.Consume{"rpm": 2}, limits); !errors.Is(err, tollgate.ErrRateLimited) {
		t.Errorf("Acquire beyond the limit = %v, want ErrRateLimited", err)
	}
	var ve *tollgate.ValidationError
	if _, err := a.Acquire(ctx, "key-1", "openai/gpt-4o", tollgate.Consume{"rpm": 4}, limits); !errors.As(err, &ve) || ve.Field != "consume.rpm" {
		t.Errorf("Acquire above capacity = %v, want a ValidationError on consume.rpm", err)
	}
	wait, err := a.TimeUntilAvailable(ctx, "key-1", "openai/gpt-4o", tollgate.Consume{"rpm": 2}, limits)
	if err != nil || wait != 20*time.Second { // 1 token left, 1 more at 3 a minute
		t.Errorf("TimeUntilAvailable = %v, %v; want 20s", wait, err)
	}
}

func TestOneAPIOnLibraryAndClient(t *testing.T) {
	t.Run("library", func(t *testing.T) {
		lim, err := tollgate.New(memory.New(), tollgate.WithClock(clock.NewFake(epoch)))
		if err != nil {
			t.Fatal(err)
		}
		exercise[*tollgate.Lease](t, lim)
	})
	t.Run("client", func(t *testing.T) {
		exercise(t, newEnv(t).client(t))
	})
}
