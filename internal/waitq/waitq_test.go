package waitq

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
)

// bucket is a fake store: one token per period, capacity 1, on a fake
// clock; it counts the tries.
type bucket struct {
	clk    *clock.Fake
	period time.Duration
	mu     sync.Mutex
	next   time.Time // when the next token is there
	calls  atomic.Int64
	grants []int // the values granted, in the order of the grants
}

var errRefused = errors.New("refused")

// try grants one token (v) or refuses with the exact wait; a grant hints
// at the wait of the next request.
func (b *bucket) try(v int) Try[int] {
	return func(context.Context) (int, Next, error) {
		b.calls.Add(1)
		b.mu.Lock()
		defer b.mu.Unlock()
		now := b.clk.Now()
		if now.Before(b.next) {
			return 0, exact(b.next.Sub(now)), errRefused
		}
		b.next = now.Add(b.period)
		b.grants = append(b.grants, v)
		return v, exact(b.period), nil
	}
}

// exact is the Next of a refill: no try before d can succeed.
func exact(d time.Duration) Next { return Next{After: d, Least: d} }

// future is a fake clock a day ahead of the wall clock: deadlines set on it
// are a day away on the wall clock, which contexts and the queue read.
func future() *clock.Fake { return clock.NewFake(time.Now().Add(24 * time.Hour).Truncate(time.Second)) }

// waiting returns how many callers wait in key's line.
func (q *Queue[T]) waiting(key string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if l := q.lines[key]; l != nil {
		return len(l.waiters)
	}
	return 0
}

// drive advances clk to each wake-up of the queue's poller until done.
func drive(clk *clock.Fake, done <-chan struct{}) {
	for clk.BlockUntilWaiters(1, done) {
		if next, ok := clk.NextDeadline(); ok {
			clk.Set(next)
		}
	}
}

// 200 callers with shuffled deadlines on a bucket of one token per 10 ms
// are granted in deadline order, with about one try per grant.
func TestDeadlineOrderAndCalls(t *testing.T) {
	const n = 200
	clk := future()
	b := &bucket{clk: clk, period: 10 * time.Millisecond, next: clk.Now().Add(10 * time.Millisecond)}
	q := New[int](clk, nil)
	deadlines := make([]time.Duration, n)
	for i := range deadlines {
		deadlines[i] = time.Duration(100+i) * 10 * time.Millisecond // all meetable: 10 ms apart, the first after 1 s
	}
	rand.Shuffle(n, func(i, j int) { deadlines[i], deadlines[j] = deadlines[j], deadlines[i] })
	start := clk.Now()
	var wg sync.WaitGroup
	for i := range n {
		ctx, cancel := context.WithDeadline(context.Background(), start.Add(deadlines[i])) // wall clock: far ahead
		defer cancel()
		wg.Go(func() {
			if v, err := q.Wait(ctx, "k", b.try(i)); err != nil || v != i {
				t.Errorf("caller %d: %d, %v", i, v, err)
			}
		})
		if i == 0 {
			for q.waiting("k") == 0 { // the first caller tried, was refused, and waits
				time.Sleep(time.Millisecond)
			}
		}
	}
	for q.waiting("k") < n { // every caller in line before the clock moves
		time.Sleep(time.Millisecond)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	drive(clk, done)
	order := make([]time.Duration, len(b.grants))
	for i, v := range b.grants {
		order[i] = deadlines[v]
	}
	if !slices.IsSorted(order) || len(order) != n {
		t.Errorf("%d grants, in deadline order: %v", len(order), slices.IsSorted(order))
	}
	if calls := b.calls.Load(); calls > n+2 {
		t.Errorf("%d tries for %d grants, want about one each", calls, n)
	}
	t.Logf("%d grants, %d tries", n, b.calls.Load())
}

// A caller whose deadline falls before the line's next try is told at
// once; a caller whose context ends leaves the line; callers without a
// deadline come after those with one, in arrival order.
func TestUnmeetableCancelledAndFIFO(t *testing.T) {
	clk := future()
	b := &bucket{clk: clk, period: 100 * time.Millisecond, next: clk.Now().Add(100 * time.Millisecond)}
	q := New[int](clk, nil)
	results := make(chan int, 10)
	wait := func(ctx context.Context, v int) {
		got, err := q.Wait(ctx, "k", b.try(v))
		if err == nil {
			results <- got
		}
	}
	go wait(context.Background(), 1) // no deadline: after those with one
	for q.waiting("k") < 1 {
		time.Sleep(time.Millisecond)
	}
	soon, cancelSoon := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelSoon()
	if _, err := q.Wait(soon, "k", b.try(9)); !errors.Is(err, ErrDeadline) {
		t.Fatalf("a deadline before the next try: %v, want ErrDeadline at once", err)
	}
	go wait(context.Background(), 2) // no deadline, after 1
	later, cancelLater := context.WithTimeout(context.Background(), time.Hour)
	defer cancelLater()
	go wait(later, 3) // a deadline: first
	gone, leave := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() { _, err := q.Wait(gone, "k", b.try(8)); left <- err }()
	for q.waiting("k") < 4 {
		time.Sleep(time.Millisecond)
	}
	leave()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled caller: %v, want context.Canceled", err)
	}
	done := make(chan struct{})
	go func() {
		for range 3 {
			<-results
		}
		close(done)
	}()
	drive(clk, done)
	if got := b.grants; !slices.Equal(got, []int{3, 1, 2}) {
		t.Errorf("grants %v, want [3 1 2]: the deadline first, then arrival order", got)
	}
}

// A grant whose caller left while it was being made is given back.
func TestOrphanedGrantReleased(t *testing.T) {
	clk := future()
	var released atomic.Int64
	q := New[int](clk, func(v int) { released.Add(int64(v)) })
	blocked := make(chan struct{})
	unblock := make(chan struct{})
	first := true
	try := func(context.Context) (int, Next, error) {
		if first { // the caller's own try: refused, so it joins the line
			first = false
			return 0, exact(time.Millisecond), errRefused
		}
		close(blocked)
		<-unblock
		return 7, Next{}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := q.Wait(ctx, "k", try); errc <- err }()
	for q.waiting("k") < 1 {
		time.Sleep(time.Millisecond)
	}
	clk.BlockUntilWaiters(1, nil)
	clk.Advance(time.Millisecond)
	<-blocked // the poller is trying for the caller
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	close(unblock)
	for released.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if released.Load() != 7 {
		t.Errorf("released %d, want the orphaned grant 7", released.Load())
	}
}

// slotTry refuses as a full slot does (a look every hour, woken by key
// "s") until free is set, then grants v; it counts the tries.
type slotTry struct {
	free  atomic.Bool
	calls atomic.Int64
	// during, if set, runs within the next try, after its look at the
	// slot: a release that the try cannot have seen.
	during func()
}

func (s *slotTry) try(v int) Try[int] {
	return func(context.Context) (int, Next, error) {
		s.calls.Add(1)
		free := s.free.Load()
		if f := s.during; f != nil {
			s.during = nil
			f()
		}
		if free {
			return v, Next{}, nil
		}
		return 0, Next{After: time.Hour, Wake: []string{"s"}}, errRefused
	}
}

// A Wake of the key a refusal named ends the line's sleep at once.
func TestWakeEndsTheSleep(t *testing.T) {
	clk := future()
	q := New[int](clk, nil)
	s := &slotTry{}
	got := make(chan error, 1)
	go func() { _, err := q.Wait(context.Background(), "k", s.try(1)); got <- err }()
	clk.BlockUntilWaiters(1, nil) // asleep for an hour
	q.Wake("other")               // another key: nothing
	s.free.Store(true)
	q.Wake("s")
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(10 * time.Second): // a hang: the clock does not move
		t.Fatal("Wake did not end the sleep")
	}
	if n := s.calls.Load(); n != 2 {
		t.Errorf("%d tries, want 2", n)
	}
}

// A Wake while the caller's first try runs, before its line watches the
// key, is not lost: the line tries again at once.
func TestWakeDuringTheFirstTry(t *testing.T) {
	clk := future()
	q := New[int](clk, nil)
	s := &slotTry{}
	s.during = func() { s.free.Store(true); q.Wake("s") }
	if _, err := q.Wait(context.Background(), "k", s.try(1)); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if n := s.calls.Load(); n != 2 {
		t.Errorf("%d tries, want 2", n)
	}
}

// A caller waiting for a slot is not refused for a deadline before the
// line's next look (a release may wake it sooner); when its deadline
// passes, its error says so and carries the refusal.
func TestSlotWaiterStaysUntilItsDeadline(t *testing.T) {
	clk := future()
	q := New[int](clk, nil)
	s := &slotTry{}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := q.Wait(ctx, "k", s.try(1))
	if !errors.Is(err, ErrDeadline) || !errors.Is(err, errRefused) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want ErrDeadline, the refusal and DeadlineExceeded", err)
	}
	if ctx.Err() == nil {
		t.Error("refused before the deadline")
	}
}

func TestLastTryBeforeTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline time.Duration // from now; 0: none
		sleep    time.Duration
		min, max time.Duration
	}{
		{"no deadline", 0, time.Second, time.Second, time.Second},
		{"after the look", time.Hour, time.Second, time.Second, time.Second},
		{"before the look", 500 * time.Millisecond, time.Second, 300 * time.Millisecond, 450 * time.Millisecond},
		{"too close to try again", 10 * time.Millisecond, time.Second, time.Second, time.Second},
	} {
		var d time.Time
		if tc.deadline > 0 {
			d = time.Now().Add(tc.deadline)
		}
		if got := lastTryBefore(d, tc.sleep); got < tc.min || got > tc.max {
			t.Errorf("%s: %v, want %v to %v", tc.name, got, tc.min, tc.max)
		}
	}
}

// A caller waiting for a slot, whose deadline falls before the line's next
// look, gets a last try just before it: the slot may have come back.
func TestSlotWaiterTriesOnceMoreBeforeItsDeadline(t *testing.T) {
	q := New[int](clock.Real{}, nil)
	s := &slotTry{}
	s.during = func() {
		// After the first look: the slot comes back, unannounced (another
		// process released it), so only a look finds it.
		s.free.Store(true)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if v, err := q.Wait(ctx, "k", s.try(1)); err != nil || v != 1 {
		t.Fatalf("Wait = %d, %v; want the grant of the last try", v, err)
	}
	if n := s.calls.Load(); n != 2 {
		t.Errorf("%d tries, want 2", n)
	}
}
