package client_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/clock"
)

// waitEnv is a server whose one-a-minute limit for key-1 is spent, and a
// client sleeping on a fake clock of its own (the server's reaper has
// timers on the server's clock, so sharing one would blur the count).
func waitEnv(t *testing.T) (*env, *clock.Fake, *client.Client, client.AcquireOption) {
	t.Helper()
	e := newEnv(t)
	cliClk := clock.NewFake(epoch)
	c := e.client(t, client.WithClock(cliClk))
	limits := client.WithLimits(tollgate.PerMinute("rpm", 1))
	_, err := c.AcquireAndCommit(context.Background(), "key-1", "gpt", tollgate.Consume{"rpm": 1}, limits)
	must(t, "AcquireAndCommit", err)
	return e, cliClk, c, limits
}

// blockUntilAsleep waits (10s at most) until something sleeps on clk.
func blockUntilAsleep(t *testing.T, clk *clock.Fake) {
	t.Helper()
	stop := make(chan struct{})
	timer := time.AfterFunc(10*time.Second, func() { close(stop) })
	defer timer.Stop()
	if !clk.BlockUntilWaiters(1, stop) {
		t.Fatal("Wait never slept")
	}
}

type result struct {
	le  *client.Lease
	err error
}

func TestWaitSleepsRetryAfter(t *testing.T) {
	e, cliClk, c, limits := waitEnv(t)
	ctx := context.Background()
	done := make(chan result, 1)
	go func() {
		le, err := c.Wait(ctx, "key-1", "gpt", tollgate.Consume{"rpm": 1}, limits)
		done <- result{le, err}
	}()

	blockUntilAsleep(t, cliClk)
	if at, _ := cliClk.NextDeadline(); at.Sub(cliClk.Now()) != time.Minute {
		t.Errorf("Wait sleeps %v, want the 1m RetryAfter", at.Sub(cliClk.Now()))
	}
	select {
	case r := <-done:
		t.Fatalf("Wait returned before the clock moved: %v", r.err)
	default:
	}
	e.clk.Advance(time.Minute)  // the server refills first,
	cliClk.Advance(time.Minute) // then the client wakes and retries
	r := <-done
	must(t, "Wait", r.err)
	must(t, "Commit", r.le.Commit(ctx))
}

func TestWaitGivesUpBeforeAMissedDeadline(t *testing.T) {
	_, cliClk, c, limits := waitEnv(t)
	// A deadline before the 1m RetryAfter, yet far enough off that a slow
	// machine's calls fit in it. Had Wait slept, it would sleep on
	// the fake clock, which never moves here: the call would end with the
	// context's error, not the denial.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Wait(ctx, "key-1", "gpt", tollgate.Consume{"rpm": 1}, limits)
	var ex *tollgate.RateLimitExceeded
	if !errors.As(err, &ex) || ex.RetryAfter != time.Minute {
		t.Fatalf("err = %v, want the denial with RetryAfter 1m", err)
	}
	if n := cliClk.Waiters(); n != 0 {
		t.Errorf("%d sleepers, want none", n)
	}
}

func TestWaitStopsWhenCancelled(t *testing.T) {
	_, cliClk, c, limits := waitEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Wait(ctx, "key-1", "gpt", tollgate.Consume{"rpm": 1}, limits)
		done <- err
	}()
	blockUntilAsleep(t, cliClk)
	cancel()
	wantErr(t, "Wait cancelled while asleep", <-done, context.Canceled)
}

func TestWaitReturnsOtherErrorsAtOnce(t *testing.T) {
	_, cliClk, c, limits := waitEnv(t)
	// More than the capacity: no wait could satisfy it.
	_, err := c.Wait(context.Background(), "key-1", "gpt", tollgate.Consume{"rpm": 2}, limits)
	wantErr(t, "Wait beyond capacity", err, tollgate.ErrInvalid)
	if n := cliClk.Waiters(); n != 0 {
		t.Errorf("%d sleepers, want none", n)
	}
}

// countingTransport counts the acquires a client sends.
type countingTransport struct {
	acquires atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/v1/acquire" {
		c.acquires.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// fullSlot is a server with a concurrency limit of one slot for key-1,
// and a client on a fake clock of its own whose acquires are counted; the
// slot is held by a lease (of another client, or of this one if own),
// whose expiry, the server's default TTL, is minutes away.
func fullSlot(t *testing.T, own bool) (c *client.Client, held *client.Lease, clk *clock.Fake, count *countingTransport, slots client.AcquireOption) {
	t.Helper()
	e := newEnv(t)
	clk = clock.NewFake(epoch)
	count = &countingTransport{}
	c = e.client(t, client.WithClock(clk), client.WithHTTPClient(&http.Client{Transport: count}))
	holder := e.client(t)
	if own {
		holder = c
	}
	slots = client.WithLimits(tollgate.ConcurrencyLimit("slots", 1))
	held, err := holder.Acquire(context.Background(), "key-1", "jobs", tollgate.Consume{"slots": 1}, slots)
	must(t, "Acquire", err)
	count.acquires.Store(0)
	return c, held, clk, count, slots
}

// A waiter on a slot that stays full for N seconds sends about N acquires:
// one a second, not one per 100 ms hint.
func TestWaitOnSlotPollsAboutOnceASecond(t *testing.T) {
	const n = 20
	c, _, clk, count, slots := fullSlot(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() {
		le, err := c.Wait(ctx, "key-1", "jobs", tollgate.Consume{"slots": 1}, slots)
		done <- result{le, err}
	}()
	end := clk.Now().Add(n * time.Second)
	for {
		blockUntilAsleep(t, clk)
		next, _ := clk.NextDeadline()
		if next.After(end) {
			break
		}
		clk.Set(next)
	}
	cancel()
	if r := <-done; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", r.err)
	}
	if got := count.acquires.Load(); got < n || got > n+1 {
		t.Errorf("%d acquires in %d s on a full slot, want about one a second", got, n)
	}
}

// A lease of the same client that gives the slot back wakes its waiter at
// once: granted without the clock moving.
func TestWaitOnSlotWokenByOwnRelease(t *testing.T) {
	ctx := context.Background()
	c, held, clk, count, slots := fullSlot(t, true)
	done := make(chan result, 1)
	go func() {
		le, err := c.Wait(ctx, "key-1", "jobs", tollgate.Consume{"slots": 1}, slots)
		done <- result{le, err}
	}()
	blockUntilAsleep(t, clk)
	must(t, "Commit", held.Commit(ctx))
	select {
	case r := <-done:
		must(t, "Wait", r.err)
		must(t, "Commit", r.le.Commit(ctx))
	case <-time.After(10 * time.Second): // a hang: the clock does not move
		t.Fatal("the release did not wake the waiter")
	}
	if got := count.acquires.Load(); got != 2 {
		t.Errorf("%d acquires, want 2: refused, then granted once woken", got)
	}
}
