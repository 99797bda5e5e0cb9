package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/clock"
)

var slotLimits = client.WithLimits(tollgate.ConcurrencyLimit("slots", 1), tollgate.PerMinute("rpm", 10))

// slotEnv is a server and a client sleeping on a fake clock of its own.
func slotEnv(t *testing.T) (*env, *clock.Fake, *client.Client) {
	t.Helper()
	e := newEnv(t)
	cliClk := clock.NewFake(epoch)
	return e, cliClk, e.client(t, client.WithClock(cliClk))
}

// within fails the test unless done is closed within 10 s.
func within(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("%s never happened", what)
	}
}

// A call longer than the lease's TTL keeps its slot: the lease is extended
// every half TTL (WithLeaseTTL's, else the one granted) while fn runs.
func TestClientWithSlotExtendsWhileRunning(t *testing.T) {
	cases := []struct {
		name string
		opts []client.AcquireOption
		half time.Duration
	}{
		{"WithLeaseTTL", []client.AcquireOption{slotLimits, client.WithLeaseTTL(10 * time.Second)}, 5 * time.Second},
		{"the server's default", []client.AcquireOption{slotLimits}, 150 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, cliClk, c := slotEnv(t)
			ctx := context.Background()
			err := c.WithSlot(ctx, "job", "emr", tollgate.Consume{"slots": 1, "rpm": 1}, 0, func(fctx context.Context) error {
				for range 3 { // three halves: one and a half TTLs
					blockUntilAsleep(t, cliClk) // the extender waits for the next half
					if at, _ := cliClk.NextDeadline(); at.Sub(cliClk.Now()) != tc.half {
						t.Errorf("extends after %v, want %v", at.Sub(cliClk.Now()), tc.half)
					}
					e.clk.Advance(tc.half)
					cliClk.Advance(tc.half)
					blockUntilAsleep(t, cliClk) // it has extended, and waits again
				}
				if fctx.Err() != nil {
					t.Errorf("fn's context ended: %v", context.Cause(fctx))
				}
				if got := available(t, c, "job", "emr", slotLimits)["slots"]; got != 0 {
					t.Errorf("free slots while running = %d, want 0", got)
				}
				return nil
			}, tc.opts...)
			// The commit finds the lease: it outlived its first TTL.
			must(t, "WithSlot", err)
			if got := available(t, c, "job", "emr", slotLimits)["slots"]; got != 1 {
				t.Errorf("free slots after = %d, want 1", got)
			}
		})
	}
}

// A lease the server no longer knows cancels fn's context with ErrSlotLost.
func TestClientWithSlotLost(t *testing.T) {
	e, cliClk, c := slotEnv(t)
	ctx := context.Background()
	err := c.WithSlot(ctx, "job", "emr", tollgate.Consume{"slots": 1}, 0, func(fctx context.Context) error {
		blockUntilAsleep(t, cliClk)
		e.clk.Advance(11 * time.Second) // the lease expired on the server
		cliClk.Advance(5 * time.Second) // and the extension finds it gone
		within(t, fctx.Done(), "the cancellation of fn's context")
		if cause := context.Cause(fctx); !errors.Is(cause, tollgate.ErrSlotLost) {
			t.Errorf("cause %v, want ErrSlotLost", cause)
		}
		return context.Cause(fctx)
	}, slotLimits, client.WithLeaseTTL(10*time.Second))
	if !errors.Is(err, tollgate.ErrSlotLost) {
		t.Errorf("WithSlot = %v, want ErrSlotLost", err)
	}
}

// fn's error or panic rolls the lease back (the rate consumption too); its
// success commits.
func TestClientWithSlotEnds(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name    string
		fn      func(context.Context) error
		wantErr error
		wantRPM int64
	}{
		{"nil commits", func(context.Context) error { return nil }, nil, 9},
		{"an error rolls back", func(context.Context) error { return boom }, boom, 10},
		{"a panic rolls back", func(context.Context) error { panic(boom) }, boom, 10},
	}
	_, _, c := slotEnv(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			entity := "job-" + tc.name[:1]
			err := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = r.(error)
					}
				}()
				return c.WithSlot(context.Background(), entity, "emr", tollgate.Consume{"slots": 1, "rpm": 1}, 0, tc.fn, slotLimits)
			}()
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("WithSlot = %v, want %v", err, tc.wantErr)
			}
			if got := available(t, c, entity, "emr", slotLimits); got["slots"] != 1 || got["rpm"] != tc.wantRPM {
				t.Errorf("after: %v, want slots 1 rpm %d", got, tc.wantRPM)
			}
		})
	}
}

// Without a wait, a slot held elsewhere is a denial and fn does not run;
// with one, WithSlot sleeps on the client's clock until the slot is free.
func TestClientWithSlotWaits(t *testing.T) {
	_, cliClk, c := slotEnv(t)
	ctx := context.Background()
	holder, err := c.Acquire(ctx, "job", "emr", tollgate.Consume{"slots": 1}, slotLimits)
	must(t, "Acquire", err)
	ran := false
	err = c.WithSlot(ctx, "job", "emr", tollgate.Consume{"slots": 1}, 0, func(context.Context) error { ran = true; return nil }, slotLimits)
	var rl *tollgate.RateLimitExceeded
	if !errors.As(err, &rl) || ran {
		t.Fatalf("WithSlot without a wait = %v (ran %v), want a denial", err, ran)
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		err = c.WithSlot(ctx, "job", "emr", tollgate.Consume{"slots": 1}, time.Hour, func(context.Context) error { ran = true; return nil }, slotLimits)
	}()
	blockUntilAsleep(t, cliClk)
	must(t, "Commit", holder.Commit(ctx))
	cliClk.Advance(time.Second) // past the denial's retry-after
	within(t, done, "WithSlot's return")
	if err != nil || !ran {
		t.Errorf("WithSlot with a wait = %v (ran %v)", err, ran)
	}
}
