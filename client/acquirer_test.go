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

	// A vendor's 429 empties the limit until its retry-after.
	le, err = a.Acquire(ctx, "key-4", "openai/gpt-4o", tollgate.Consume{"rpm": 1}, limits)
	must(t, "Acquire", err)
	must(t, "Lease.Penalize", le.Penalize(ctx, epoch.Add(time.Minute), "vendor 429", []string{"rpm"}, tollgate.WithPrincipal("alice")))
	must(t, "Commit", le.Commit(ctx))
	if _, err := a.Acquire(ctx, "key-4", "openai/gpt-4o", tollgate.Consume{"rpm": 1}, limits); !errors.Is(err, tollgate.ErrRateLimited) {
		t.Errorf("Acquire while penalized = %v, want ErrRateLimited", err)
	}

	// A durable lease, taken up again by its id.
	held, err := a.Acquire(ctx, "key-2", "api", tollgate.Consume{"rpm": 1}, limits, tollgate.WithDurableLease())
	must(t, "Acquire durable", err)
	again, err := a.ResumeLease(ctx, held.ID())
	if err != nil || again.ID() != held.ID() || again.Entity() != "key-2" || again.Consumed()["rpm"] != 1 {
		t.Fatalf("ResumeLease = %v, %v; want key-2's lease, 1 rpm consumed", again, err)
	}
	must(t, "Commit the resumed lease", again.Commit(ctx))
	if _, err := a.ResumeLease(ctx, held.ID()); !errors.Is(err, tollgate.ErrLeaseClosed) {
		t.Errorf("ResumeLease of a committed lease = %v, want ErrLeaseClosed", err)
	}

	// A slot held while fn runs, given back after.
	slot := tollgate.WithLimits(tollgate.ConcurrencyLimit("inflight", 1))
	ran := false
	err = a.WithSlot(ctx, "key-3", "db", tollgate.Consume{"inflight": 1}, time.Second, func(ctx context.Context) error {
		ran = true
		_, err := a.Acquire(ctx, "key-3", "db", tollgate.Consume{"inflight": 1}, slot)
		wantErr(t, "a second slot while one is held", err, tollgate.ErrRateLimited)
		return nil
	}, slot)
	if err != nil || !ran {
		t.Errorf("WithSlot = %v, ran %v", err, ran)
	}

	// A resource id reserved until released.
	seats := tollgate.WithLimits(tollgate.ReservedLimit("seats", 1))
	rg, err := a.Reserve(ctx, "team-a", "sandbox", "sbx-1", nil, seats)
	if err != nil || !rg.New || rg.ID != "sbx-1" || rg.Entity != "team-a" || rg.Consumed["seats"] != 1 {
		t.Fatalf("Reserve = %+v, %v; want a new reservation of one seat", rg, err)
	}
	if rg, err := a.Reserve(ctx, "team-a", "sandbox", "sbx-1", nil, seats); err != nil || rg.New {
		t.Errorf("Reserve again = %+v, %v; want the same reservation, not new", rg, err)
	}
	_, err = a.Reserve(ctx, "team-b", "sandbox", "sbx-1", nil, seats)
	wantErr(t, "Reserve of an id another holds", err, tollgate.ErrReservationConflict)
	_, err = a.Reserve(ctx, "team-a", "sandbox", "sbx-2", nil, seats)
	wantErr(t, "Reserve beyond the seats", err, tollgate.ErrRateLimited)
	must(t, "Release", a.Release(ctx, "sbx-1"))
	wantErr(t, "Release again", a.Release(ctx, "sbx-1"), tollgate.ErrLeaseNotFound)
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
