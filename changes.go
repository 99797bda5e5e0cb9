package tollgate

import (
	"context"
	"sync"
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
// The limiters and admins sharing a watch also draw the ids of their audit
// events from it, so that the events one process writes sort in the order
// it wrote them, whichever of them wrote each.
//
// The first call that finds the generation due reads it, calls meanwhile
// use the last value: a process idle for a while reads it on its first
// call, before answering it. After a failed read the next ones run in the
// background, so that no call waits on a store that is not answering; a
// failed read keeps the last value, and caches then fall back on their TTL
// (WithCacheTTL).
type ChangeWatch struct {
	src      store.Changes
	isLocal  bool
	interval time.Duration
	// now is the wall clock in Unix nanoseconds: polling is about the
	// store's cost in real time, whatever clock the limiters use.
	now func() unixNano

	gen     atomic.Uint64
	due     atomic.Int64 // a unixNano: when to read the generation again
	reading atomic.Bool
	failed  atomic.Bool // the last read failed

	// local counts the changes Admins of this process reported (changed);
	// it is added to the store's generation, so that the limiters
	// following the watch see them at their next call, whatever the
	// refresh interval.
	local atomic.Uint64
	// modes holds, by namespace name, the *modeNote of the unavailable
	// mode an Admin of this process stored last; noteSeq numbers them.
	modes   sync.Map
	noteSeq atomic.Uint64

	eventIDs eventIDs

	// resets counts the buckets Admins of this process reset: the deny
	// caches of the limiters following the watch forget what they
	// remember when it moves (see refusesFromMemory).
	resets atomic.Uint64
}

// modeNote is an unavailable mode an Admin stored at a namespace's system
// scope, numbered so that a limiter adopts each once.
type modeNote struct {
	mode model.OnUnavailable
	seq  uint64
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
	return &ChangeWatch{src: s, isLocal: s.LocalGeneration(), interval: interval, now: wallNow}, nil
}

func wallNow() unixNano { return unixNano(time.Now().UnixNano()) }

// Generation returns the store's change generation as of at most the
// refresh interval ago (now, for a local store). Only its moving means
// anything: compare it with the value a cache was filled under.
func (w *ChangeWatch) Generation(ctx context.Context) uint64 {
	if w.isLocal {
		if g, err := w.src.Generation(ctx); err == nil {
			return g + w.local.Load()
		}
		return w.gen.Load() + w.local.Load()
	}
	now := w.now()
	if now < unixNano(w.due.Load()) || !w.reading.CompareAndSwap(false, true) {
		return w.gen.Load() + w.local.Load()
	}
	if now < unixNano(w.due.Load()) {
		// Another caller refreshed between this one's look at due and its
		// win of reading (refresh moves due before it lets go of reading).
		w.reading.Store(false)
		return w.gen.Load() + w.local.Load()
	}
	if w.failed.Load() {
		go w.refresh(context.WithoutCancel(ctx))
	} else {
		w.refresh(ctx)
	}
	return w.gen.Load() + w.local.Load()
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
	if w.isLocal {
		return w.Generation(ctx)
	}
	return w.gen.Load() + w.local.Load()
}

// changed is how an Admin of this process tells the limiters following
// the watch of a change it made in namespace ns: they drop what they
// cache at their next call. mode, unless nil, is the unavailable mode the
// change left at the namespace's system scope, which they adopt as if
// they had read it, so that it holds even if the store fails before they
// read it. The note is written before the count moves, so that a limiter
// that sees the change finds it.
func (w *ChangeWatch) changed(ns string, mode *model.OnUnavailable) {
	if mode != nil {
		w.modes.Store(ns, &modeNote{mode: *mode, seq: w.noteSeq.Add(1)})
	}
	w.local.Add(1)
}

// forgetMode drops the note of namespace ns, which is gone.
func (w *ChangeWatch) forgetMode(ns string) { w.modes.Delete(ns) }

// modeOf returns the last note of namespace ns, or nil.
func (w *ChangeWatch) modeOf(ns string) *modeNote {
	n, _ := w.modes.Load(ns)
	note, _ := n.(*modeNote)
	return note
}

// observeChanges drops what the limiter caches when the store's generation has
// moved since it last looked.
func (l *Limiter) observeChanges(ctx context.Context) {
	g := l.changes.Generation(ctx)
	if seen := l.seenGen.Load(); g != seen && l.seenGen.CompareAndSwap(seen, g) {
		l.invalidate()
		if n := l.changes.modeOf(l.ns); n != nil && l.modeSeq.Swap(n.seq) != n.seq {
			l.fail.set(n.mode)
		}
	}
}
