// Package waitq serves callers waiting on the same bucket(s) in deadline
// order, with one poller per bucket set instead of one sleeping loop per
// caller (the deadline queue of issue 15; the Kinesis producer's queue in
// the reference material works alike).
//
// A caller that is refused joins its line, ordered by deadline (callers
// without one after every caller with one, in arrival order). Only the
// line's head tries the store: when it is granted, the next head tries at
// once; when it is refused, the line sleeps as the refusal says (Next).
// Every caller behind the head is served no earlier than the head, so a
// caller whose deadline falls before the earliest time a try can succeed
// (refill is exact) cannot be met: it is told at once (ErrDeadline), not
// after sleeping in vain. A caller whose context ends leaves its line. So N
// callers waiting on a bucket cost about one store call per grant, not N
// calls per retry.
//
// A refusal by a slot (a concurrency or reserved limit) waits for a holder
// to give it back, at a time no clock foretells: the line looks again now
// and then (Next.After), and a holder in this process that gives a slot
// back wakes the lines waiting for it at once (Wake).
//
// The queue is generic over what a grant is (a library lease, a client
// lease) and how to try: the library's Wait and the Go client's use it.
package waitq

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
)

// ErrDeadline is matched by the error of a caller whose deadline falls
// before the next time its line can try: waiting could not help. The error
// also matches the last refusal, whatever it is (a *RateLimitExceeded).
var ErrDeadline = model.ErrWaitDeadline

// Try makes one attempt for a caller. A refusal that waiting may cure is
// (zero, next with After > 0, the refusal). Any other error (After 0) ends
// the caller's wait with that error. A grant is (v, next, nil), where
// next.After is how long the same request would now have to wait (0: not
// at all, or not known): the line sleeps that long before its next head
// tries, rather than spend a call on a refusal it can foresee.
type Try[T any] func(ctx context.Context) (v T, next Next, err error)

// Next is what a try tells its line about the next one.
type Next struct {
	// After is how long the line sleeps before its next try.
	After time.Duration
	// Least is how long no try can succeed (refill is exact): a caller
	// whose deadline falls before it is refused at once. At most After;
	// 0 when what the refusal waits for may come back at any time (a
	// slot), so that callers stay in line until their deadline.
	Least time.Duration
	// Wake names the keys whose Wake ends the line's sleep: what the
	// refusal waits for.
	Wake []string
}

// Key is the key of a line, and of a Wake, for a bucket of entity and
// resource.
func Key(entity, resource string) string { return entity + "\x00" + resource }

// lastTry is how long before the head's deadline a line sleeping on a slot
// tries once more, rather than sleep past it: a slot may have come back.
const lastTry = 50 * time.Millisecond

// Queue holds the lines of callers waiting, one per key (a bucket set:
// entity and resource). It is safe for concurrent use.
type Queue[T any] struct {
	clock clock.Clock
	// release gives back a grant nobody took (its caller left meanwhile).
	release func(T)

	mu    sync.Mutex
	lines map[string]*line[T]
	seq   uint64
	// watches lists, per wake key, the lines that a Wake of it wakes.
	watches map[string][]*line[T]

	// callers counts the callers in Wait: while there are none, no Wake
	// is needed (Waiting). wakes counts the Wakes, so that a try can tell
	// whether one came while it ran, before its line watched the key.
	callers atomic.Int64
	wakes   atomic.Uint64
}

// New returns a queue timing its waits on c, giving orphaned grants to
// release.
func New[T any](c clock.Clock, release func(T)) *Queue[T] {
	return &Queue[T]{clock: c, release: release, lines: map[string]*line[T]{}, watches: map[string][]*line[T]{}}
}

// Waiting reports whether a caller is in Wait: whether a Wake may be
// needed. It is one atomic load, for the paths that give a slot back.
func (q *Queue[T]) Waiting() bool { return q.callers.Load() > 0 }

// Wake tells the lines waiting for key (Next.Wake) that what they wait for
// came back: a sleeping line tries again at once, a trying one as soon as
// its try returns, and a caller about to join one tries again first.
func (q *Queue[T]) Wake(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.wakes.Add(1)
	for _, l := range q.watches[key] {
		select {
		case l.wake <- struct{}{}:
		default: // woken already
		}
	}
}

// line is the callers waiting on one key, and its poller's state.
type line[T any] struct {
	waiters waiters[T]
	// least is the earliest time a try can succeed, while the poller
	// sleeps (zero: it is trying, or about to).
	least time.Time
	// refusal is the last refusal the line had, nil before any.
	refusal error
	// watching lists the wake keys the line is in q.watches under; wake
	// receives their Wakes.
	watching []string
	wake     chan struct{}
}

// waiter is one caller in a line.
type waiter[T any] struct {
	ctx      context.Context
	deadline time.Time // zero: none
	seq      uint64
	try      Try[T]
	done     chan result[T] // buffered: the poller never blocks on it
	line     *line[T]
	index    int // in the line's heap; -1 once out of it
}

type result[T any] struct {
	v   T
	err error
}

// before orders waiters: earlier deadline first, callers without a
// deadline after, ties in arrival order.
func (w *waiter[T]) before(o *waiter[T]) bool {
	switch {
	case w.deadline.IsZero() != o.deadline.IsZero():
		return !w.deadline.IsZero()
	case !w.deadline.Equal(o.deadline):
		return w.deadline.Before(o.deadline)
	}
	return w.seq < o.seq
}

// Wait returns a grant for the caller of key, trying at once when nobody
// waits on key and otherwise joining its line; it waits until granted, its
// deadline cannot be met (ErrDeadline), try fails otherwise, or ctx ends.
// A caller whose deadline passes in line gets an error matching
// ErrDeadline, the line's last refusal and ctx.Err().
func (q *Queue[T]) Wait(ctx context.Context, key string, try Try[T]) (T, error) {
	q.callers.Add(1)
	defer q.callers.Add(-1)
	q.mu.Lock()
	busy := q.lines[key] != nil
	q.mu.Unlock()
	var first Next
	var refusal error
	seen := q.wakes.Load()
	if !busy {
		// Nobody waits: the common case tries without the queue.
		v, next, err := try(ctx)
		if err == nil || next.After <= 0 {
			return v, err // a grant's hint is for the next caller: there is none
		}
		if d, ok := ctx.Deadline(); ok && unmeetable(d, min(next.Least, next.After)) {
			return v, fmt.Errorf("%w: %w", ErrDeadline, err)
		}
		first, refusal = next, err
	}
	w := &waiter[T]{ctx: ctx, try: try, done: make(chan result[T], 1)}
	w.deadline, _ = ctx.Deadline()
	if err := q.join(key, w, first, refusal, seen); err != nil {
		var zero T
		return zero, err
	}
	select {
	case r := <-w.done:
		return r.v, r.err
	case <-ctx.Done():
		if refusal, ok := q.leave(w); ok {
			var zero T
			if refusal != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return zero, fmt.Errorf("%w: %w (%w)", ErrDeadline, refusal, ctx.Err())
			}
			return zero, ctx.Err()
		}
		r := <-w.done // served meanwhile: its answer stands
		return r.v, r.err
	}
}

// join puts w in key's line, starting the line's poller if it has none
// (first: the refusal the caller just had, which a Wake since seen may
// have made stale). A deadline before the sleeping line's earliest success
// is refused at once.
func (q *Queue[T]) join(key string, w *waiter[T], first Next, refusal error, seen uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	w.seq = q.seq
	l := q.lines[key]
	if l == nil {
		l = &line[T]{wake: make(chan struct{}, 1), refusal: refusal}
		q.lines[key] = l
		sleep := first.After
		if q.watch(l, first.Wake) && q.wakes.Load() != seen {
			sleep = 0 // a slot came back while the caller tried
		}
		if sleep > 0 {
			l.least = q.clock.Now().Add(min(first.Least, sleep))
		}
		if first.Least < sleep {
			sleep = lastTryBefore(w.deadline, sleep) // w is the head
		}
		go q.poll(key, l, sleep)
	}
	if wait := l.least.Sub(q.clock.Now()); !l.least.IsZero() && unmeetable(w.deadline, wait) {
		return fmt.Errorf("%w: the line of %s cannot succeed within %v", ErrDeadline, key, wait)
	}
	w.line = l
	heap.Push(&l.waiters, w)
	return nil
}

// watch puts l in q.watches under every key of keys it is not under yet,
// and reports whether there was any; the caller holds q.mu.
func (q *Queue[T]) watch(l *line[T], keys []string) bool {
	added := false
	for _, k := range keys {
		if slices.Contains(l.watching, k) {
			continue
		}
		l.watching = append(l.watching, k)
		q.watches[k] = append(q.watches[k], l)
		added = true
	}
	return added
}

// unwatch takes l, which is ending, out of q.watches; the caller holds
// q.mu.
func (q *Queue[T]) unwatch(l *line[T]) {
	for _, k := range l.watching {
		ls := slices.DeleteFunc(q.watches[k], func(o *line[T]) bool { return o == l })
		if len(ls) == 0 {
			delete(q.watches, k)
		} else {
			q.watches[k] = ls
		}
	}
}

// leave takes w out of its line, and returns the line's last refusal;
// false if the poller took it first (its answer is on its way).
func (q *Queue[T]) leave(w *waiter[T]) (error, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.index < 0 {
		return nil, false
	}
	heap.Remove(&w.line.waiters, w.index)
	return w.line.refusal, true
}

// poll serves key's line until it is empty, sleeping first for a refusal
// its first caller just had.
func (q *Queue[T]) poll(key string, l *line[T], first time.Duration) {
	q.sleep(l, first)
	for {
		q.mu.Lock()
		if len(l.waiters) == 0 {
			delete(q.lines, key)
			q.unwatch(l)
			q.mu.Unlock()
			return
		}
		head := l.waiters[0]
		l.least = time.Time{}
		q.mu.Unlock()

		// A Wake from now on is after the try's look at the store.
		select {
		case <-l.wake:
		default:
		}
		seen := q.wakes.Load()
		v, next, err := head.try(head.ctx)

		q.mu.Lock()
		if head.index < 0 { // its caller left while it tried
			q.mu.Unlock()
			if err == nil && q.release != nil {
				q.release(v)
			}
			continue
		}
		if err == nil || next.After <= 0 {
			heap.Remove(&l.waiters, head.index)
			head.done <- result[T]{v, err}
		}
		if next.After <= 0 {
			q.mu.Unlock()
			continue
		}
		if err != nil {
			l.refusal = err
		}
		sleep := next.After
		if q.watch(l, next.Wake) && q.wakes.Load() != seen {
			sleep = 0 // a slot came back while the line tried, under a key it did not watch yet
		}
		now := q.clock.Now()
		l.least = now.Add(min(next.Least, sleep))
		q.refuseUnmeetable(l, err)
		if next.Least < sleep && len(l.waiters) > 0 {
			sleep = lastTryBefore(l.waiters[0].deadline, sleep)
		}
		q.mu.Unlock()
		q.sleep(l, sleep)
	}
}

// sleep waits d on the queue's clock, or until a Wake of a key l watches.
func (q *Queue[T]) sleep(l *line[T], d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-q.clock.After(d):
	case <-l.wake:
	}
}

// lastTryBefore shortens sleep, a look for a slot, so that a head whose
// deadline (zero: none) falls before its end tries once more lastTry
// before it, rather than end its wait without a look: the slot may have
// come back meanwhile.
func lastTryBefore(deadline time.Time, sleep time.Duration) time.Duration {
	if deadline.IsZero() {
		return sleep
	}
	if left := time.Until(deadline) - lastTry; left > 0 && left < sleep {
		return left
	}
	return sleep
}

// refuseUnmeetable tells every waiter whose deadline falls before the
// line's earliest success that waiting cannot help, with the refusal that
// set it (nil after a grant's hint); the caller holds q.mu.
func (q *Queue[T]) refuseUnmeetable(l *line[T], refusal error) {
	err := fmt.Errorf("%w", ErrDeadline)
	if refusal != nil {
		err = fmt.Errorf("%w: %w", ErrDeadline, refusal)
	}
	wait := l.least.Sub(q.clock.Now())
	for len(l.waiters) > 0 {
		// The earliest deadline is the head's (callers without one come
		// last): when it can be met, every later one can.
		w := l.waiters[0]
		if !unmeetable(w.deadline, wait) {
			return
		}
		heap.Pop(&l.waiters)
		var zero T
		w.done <- result[T]{zero, err}
	}
}

// waiters is a heap of waiters by before.
type waiters[T any] []*waiter[T]

func (h waiters[T]) Len() int           { return len(h) }
func (h waiters[T]) Less(i, j int) bool { return h[i].before(h[j]) }
func (h waiters[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *waiters[T]) Push(x any) {
	w := x.(*waiter[T])
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waiters[T]) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.index = -1
	return w
}

// unmeetable reports whether a caller's deadline (zero: none) comes before
// wait from now. Deadlines are contexts', on the wall clock; waits
// are on the queue's clock, the same one outside tests.
func unmeetable(deadline time.Time, wait time.Duration) bool {
	return !deadline.IsZero() && time.Until(deadline) < wait
}

// Refused returns the Next of a refusal: ex's Backoff, and the keys of the
// buckets whose exceeded concurrency or reserved limits it waits for.
func Refused(ex *model.RateLimitExceeded) Next {
	sleep, least := ex.Backoff()
	n := Next{After: sleep, Least: least}
	for _, s := range ex.Statuses {
		if s.Denies() && (s.Kind == model.Concurrency || s.Kind == model.Reserved) {
			if k := Key(s.Entity, s.Resource); !slices.Contains(n.Wake, k) {
				n.Wake = append(n.Wake, k)
			}
		}
	}
	return n
}
