package tollgate

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// DefaultRefreshInterval is how often a process reads the change
// generation of a store it shares with other processes (see ChangeWatch),
// unless WithRefreshInterval says otherwise: a change made anywhere is in
// force everywhere within about this long.
const DefaultRefreshInterval = time.Second

// maxRefreshTimeout bounds one read of the generation (and half the
// refresh interval, if less): a store that does not answer must not hold
// up for long the call that happened to be due to read it.
const maxRefreshTimeout = 500 * time.Millisecond

// A ChangeWatch follows a store's change generation (store.Changes) for
// the limiters and servers of one process, so that a change of limits,
// entities, keys or namespaces made by any process sharing the store is
// in force in this one within the refresh interval, at the cost of one
// small read per interval whatever the number of limiters sharing the
// watch (a server shares one among its namespaces). A store whose
// generation is local (memory, embedded) is read on every call instead,
// which costs no I/O: a change is in force at once.
//
// The first call that finds the generation due reads it, calls meanwhile
// use the last value: a process idle for a while reads it on its first
// call, before answering it. After a failed read the next ones run in the
// background, so that no call waits on a store that is not answering; a
// failed read keeps the last value, and caches then fall back on their TTL
// (WithCacheTTL).
type ChangeWatch struct {
	src      store.Changes
	local    bool
	interval time.Duration
	// now is the wall clock in Unix nanoseconds: polling is about the
	// store's cost in real time, whatever clock the limiters use.
	now func() unixNano

	gen     atomic.Uint64
	due     atomic.Int64 // a unixNano: when to read the generation again
	reading atomic.Bool
	failed  atomic.Bool // the last read failed
}

// NewChangeWatch returns a watch of s's change generation, read at most
// once per interval (positive) when other processes share s.
func NewChangeWatch(s store.Store, interval time.Duration) (*ChangeWatch, error) {
	if s == nil {
		return nil, model.Invalid("store", "nil", "a store is required")
	}
	if interval <= 0 {
		return nil, model.Invalid("refresh_interval", interval.String(), "must be positive")
	}
	return &ChangeWatch{src: s, local: s.LocalGeneration(), interval: interval, now: wallNow}, nil
}

func wallNow() unixNano { return unixNano(time.Now().UnixNano()) }

// Generation returns the store's change generation as of at most the
// refresh interval ago (now, for a local store). Only its moving means
// anything: compare it with the value a cache was filled under.
func (w *ChangeWatch) Generation(ctx context.Context) uint64 {
	if w.local {
		if g, err := w.src.Generation(ctx); err == nil {
			return g
		}
		return w.gen.Load()
	}
	now := w.now()
	if now < unixNano(w.due.Load()) || !w.reading.CompareAndSwap(false, true) {
		return w.gen.Load()
	}
	if w.failed.Load() {
		go w.refresh(context.WithoutCancel(ctx))
		return w.gen.Load()
	}
	w.refresh(ctx)
	return w.gen.Load()
}

// refresh reads the generation, the caller having won w.reading, which
// it clears.
func (w *ChangeWatch) refresh(ctx context.Context) {
	defer w.reading.Store(false)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(maxRefreshTimeout, w.interval/2))
	defer cancel()
	g, err := w.src.Generation(rctx)
	if err == nil {
		w.gen.Store(g)
	}
	w.failed.Store(err != nil)
	w.due.Store(int64(w.now().add(w.interval)))
}

// failing reports whether the last read of the generation failed: the
// store did not answer within the last refresh interval or so (a local
// store's never fails).
func (w *ChangeWatch) failing() bool { return w.failed.Load() }

// known returns the generation as known without polling: read now for
// a local store, the last value read otherwise.
func (w *ChangeWatch) known(ctx context.Context) uint64 {
	if w.local {
		return w.Generation(ctx)
	}
	return w.gen.Load()
}

// observeChanges drops what the limiter caches when the store's generation has
// moved since it last looked.
func (l *Limiter) observeChanges(ctx context.Context) {
	g := l.changes.Generation(ctx)
	if seen := l.seenGen.Load(); g != seen && l.seenGen.CompareAndSwap(seen, g) {
		l.InvalidateCache()
	}
}
