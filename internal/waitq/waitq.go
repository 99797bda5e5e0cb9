// Package waitq serves callers waiting on the same bucket(s) in deadline
// order, with one poller per bucket set instead of one sleeping loop per
// caller (the deadline queue of issue 15; the Kinesis producer's queue in
// the reference material works alike).
//
// A caller that is refused joins its line, ordered by deadline (callers
// without one after every caller with one, in arrival order). Only the
// line's head tries the store: when it is granted, the next head tries at
// once; when it is refused, the line sleeps exactly the refusal's
// retry-after. Every caller behind the head is served no earlier than the
// head, so a caller whose deadline falls before the head's next try cannot
// be met: it is told at once (ErrDeadline), not after sleeping in vain. A
// caller whose context ends leaves its line. So N callers waiting on a
// bucket cost about one store call per grant, not N calls per retry.
//
// The queue is generic over what a grant is (a library lease, a client
// lease) and how to try: the library's Wait and the Go client's use it.
package waitq

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
)

// ErrDeadline is matched by the error of a caller whose deadline falls
// before the next time its line can try: waiting could not help. The error
// also matches the last refusal, whatever it is (a *RateLimitExceeded).
var ErrDeadline = model.ErrWaitDeadline

// Try makes one attempt for a caller. A refusal that waiting may cure is
// (zero, retryAfter > 0, the refusal). Any other error (retryAfter 0) ends
// the caller's wait with that error. A grant is (v, next, nil), where next
// is how long the same request would now have to wait (0: not at all, or
// not known): the line sleeps that long before its next head tries,
// rather than spend a call on a refusal it can foresee.
type Try[T any] func(ctx context.Context) (v T, retryAfter time.Duration, err error)

// Queue holds the lines of callers waiting, one per key (a bucket set:
// entity and resource). It is safe for concurrent use.
type Queue[T any] struct {
	clock clock.Clock
	// release gives back a grant nobody took (its caller left meanwhile).
	release func(T)

	mu    sync.Mutex
	lines map[string]*line[T]
	seq   uint64
}

// New returns a queue timing its waits on c, giving orphaned grants to
// release.
func New[T any](c clock.Clock, release func(T)) *Queue[T] {
	return &Queue[T]{clock: c, release: release, lines: map[string]*line[T]{}}
}

// line is the callers waiting on one key, and its poller's state.
type line[T any] struct {
	waiters waiters[T]
	// next is when the poller tries again, while it sleeps (zero: it is
	// trying, or about to).
	next time.Time
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
func (q *Queue[T]) Wait(ctx context.Context, key string, try Try[T]) (T, error) {
	q.mu.Lock()
	busy := q.lines[key] != nil
	q.mu.Unlock()
	var retry time.Duration
	if !busy {
		// Nobody waits: the common case tries without the queue.
		v, r, err := try(ctx)
		if err == nil || r <= 0 {
			return v, err // a grant's hint is for the next caller: there is none
		}
		if d, ok := ctx.Deadline(); ok && unmeetable(d, r) {
			return v, fmt.Errorf("%w: %w", ErrDeadline, err)
		}
		retry = r
	}
	w := &waiter[T]{ctx: ctx, try: try, done: make(chan result[T], 1)}
	w.deadline, _ = ctx.Deadline()
	if err := q.join(key, w, retry); err != nil {
		var zero T
		return zero, err
	}
	select {
	case r := <-w.done:
		return r.v, r.err
	case <-ctx.Done():
		if q.leave(w) {
			var zero T
			return zero, ctx.Err()
		}
		r := <-w.done // served meanwhile: its answer stands
		return r.v, r.err
	}
}

// join puts w in key's line, starting the line's poller if it has none
// (first waiting retry: the refusal the caller just had). A deadline before
// the sleeping line's next try is refused at once.
func (q *Queue[T]) join(key string, w *waiter[T], retry time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	w.seq = q.seq
	l := q.lines[key]
	if l == nil {
		l = &line[T]{}
		if retry > 0 {
			l.next = q.clock.Now().Add(retry)
		}
		q.lines[key] = l
		go q.poll(key, l, retry)
	}
	if wait := l.next.Sub(q.clock.Now()); !l.next.IsZero() && unmeetable(w.deadline, wait) {
		return fmt.Errorf("%w: the line of %s tries again in %v", ErrDeadline, key, wait)
	}
	w.line = l
	heap.Push(&l.waiters, w)
	return nil
}

// leave takes w out of its line; false if the poller took it first (its
// answer is on its way).
func (q *Queue[T]) leave(w *waiter[T]) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.index < 0 {
		return false
	}
	heap.Remove(&w.line.waiters, w.index)
	return true
}

// poll serves key's line until it is empty, sleeping first for a refusal
// its first caller just had.
func (q *Queue[T]) poll(key string, l *line[T], first time.Duration) {
	if first > 0 {
		<-q.clock.After(first)
	}
	for {
		q.mu.Lock()
		if len(l.waiters) == 0 {
			delete(q.lines, key)
			q.mu.Unlock()
			return
		}
		head := l.waiters[0]
		l.next = time.Time{}
		q.mu.Unlock()

		v, retry, err := head.try(head.ctx)

		q.mu.Lock()
		if head.index < 0 { // its caller left while it tried
			q.mu.Unlock()
			if err == nil && q.release != nil {
				q.release(v)
			}
			continue
		}
		if err == nil || retry <= 0 {
			heap.Remove(&l.waiters, head.index)
			head.done <- result[T]{v, err}
		}
		if retry <= 0 {
			q.mu.Unlock()
			continue
		}
		l.next = q.clock.Now().Add(retry)
		q.refuseUnmeetable(l, err)
		q.mu.Unlock()
		<-q.clock.After(retry)
	}
}

// refuseUnmeetable tells every waiter whose deadline falls before the
// line's next try that waiting cannot help, with the refusal that set the
// try's time (nil after a grant's hint); the caller holds q.mu.
func (q *Queue[T]) refuseUnmeetable(l *line[T], refusal error) {
	err := fmt.Errorf("%w", ErrDeadline)
	if refusal != nil {
		err = fmt.Errorf("%w: %w", ErrDeadline, refusal)
	}
	wait := l.next.Sub(q.clock.Now())
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
// a try wait from now. Deadlines are contexts', on the wall clock; waits
// are on the queue's clock, the same one outside tests.
func unmeetable(deadline time.Time, wait time.Duration) bool {
	return !deadline.IsZero() && time.Until(deadline) < wait
}
