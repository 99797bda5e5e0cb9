package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func fired(ch <-chan time.Time) (time.Time, bool) {
	select {
	case t := <-ch:
		return t, true
	default:
		return time.Time{}, false
	}
}

func TestFakeAfterFiresWhenDue(t *testing.T) {
	f := NewFake(t0)
	a := f.After(2 * time.Second)
	b := f.After(time.Second)
	if f.Waiters() != 2 {
		t.Fatalf("Waiters = %d, want 2", f.Waiters())
	}
	if next, ok := f.NextDeadline(); !ok || !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("NextDeadline = %v, %v; want t0+1s", next, ok)
	}
	f.Advance(999 * time.Millisecond)
	if _, ok := fired(b); ok {
		t.Fatal("1s timer fired after 999ms")
	}
	f.Advance(time.Millisecond)
	if at, ok := fired(b); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("1s timer: fired %v at %v", ok, at)
	}
	if _, ok := fired(a); ok {
		t.Fatal("2s timer fired after 1s")
	}
	f.Set(t0.Add(time.Hour))
	if _, ok := fired(a); !ok {
		t.Fatal("2s timer did not fire after Set past it")
	}
	if f.Waiters() != 0 {
		t.Fatalf("Waiters = %d after all fired", f.Waiters())
	}
	if _, ok := f.NextDeadline(); ok {
		t.Fatal("NextDeadline reported a timer when none is pending")
	}
}

func TestFakeAfterNonPositiveFiresAtOnce(t *testing.T) {
	f := NewFake(t0)
	for _, d := range []time.Duration{0, -time.Second} {
		if at, ok := fired(f.After(d)); !ok || !at.Equal(t0) {
			t.Errorf("After(%v): fired %v at %v, want at once at t0", d, ok, at)
		}
	}
	if f.Waiters() != 0 {
		t.Errorf("Waiters = %d, want 0", f.Waiters())
	}
}

func TestFakeSetBackwards(t *testing.T) {
	f := NewFake(t0)
	ch := f.After(time.Second)
	f.Set(t0.Add(-time.Hour))
	if !f.Now().Equal(t0.Add(-time.Hour)) {
		t.Fatalf("Now = %v", f.Now())
	}
	if _, ok := fired(ch); ok {
		t.Fatal("timer fired when the clock moved backwards")
	}
}

func TestFakeBlockUntilWaiters(t *testing.T) {
	f := NewFake(t0)
	got := make(chan bool)
	go func() { got <- f.BlockUntilWaiters(2, nil) }()
	f.After(time.Second)
	select {
	case <-got:
		t.Fatal("returned with one waiter, want two")
	default:
	}
	f.After(time.Second)
	if !<-got {
		t.Fatal("BlockUntilWaiters returned false")
	}
	done := make(chan struct{})
	close(done)
	if f.BlockUntilWaiters(5, done) {
		t.Fatal("BlockUntilWaiters(5) returned true with a closed done and two waiters")
	}
}

func TestReal(t *testing.T) {
	var c Clock = Real{}
	before := time.Now()
	if now := c.Now(); now.Before(before) {
		t.Fatalf("Real.Now %v before time.Now %v", now, before)
	}
	if _, ok := <-c.After(0); !ok {
		t.Fatal("Real.After(0) channel closed")
	}
}

// Sleep returns once the clock has moved d on, or with the context's error
// once the context ends, whichever comes first.
func TestSleep(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	done := make(chan error, 1)
	go func() { done <- Sleep(context.Background(), f, time.Second) }()
	f.BlockUntilWaiters(1, nil)
	f.Advance(999 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Sleep returned %v before its second had passed", err)
	default:
	}
	f.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("Sleep = %v, want nil", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- Sleep(ctx, f, time.Hour) }()
	f.BlockUntilWaiters(1, nil)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep after cancel = %v, want context.Canceled", err)
	}
}
