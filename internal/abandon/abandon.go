// Package abandon runs the looks for the leases of acquires of unknown
// outcome (docs/semantics.md 8), for the library's limiter and the Go
// client alike: each abandonment looks at once, then again after each of
// Delays until a look finds the lease ended, in the background, at most
// Max at once. What a look does (a read and a rollback through the store,
// or a rollback through the server) is its user's.
package abandon

import (
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
)

// Delays are the waits before each look after the first (made at once):
// 1, 5 and 30 s after the acquire failed, as a write may land after its
// caller gave up on it (a request held by a stalled server or the
// network).
var Delays = []time.Duration{time.Second, 4 * time.Second, 25 * time.Second}

// Max bounds the abandonments under way at once: during an outage every
// acquire fails, and the looks must not pile up.
const Max = 64

// Looks runs abandonments. Its methods are safe for concurrent use.
type Looks struct {
	slots  chan struct{}
	clk    clock.Clock
	report func(model.Abandoned)
}

// New returns Looks that wait on clk and call report (unless nil) once
// per abandonment, when it ends: on the abandonment's goroutine, or, for
// one dropped (Max under way), on a goroutine of its own.
func New(clk clock.Clock, report func(model.Abandoned)) *Looks {
	return &Looks{slots: make(chan struct{}, Max), clk: clk, report: report}
}

// Start abandons ab's lease (its LeaseID, Entity and Resource set): look
// looks once, and says how; a look that does not find the lease ended is
// made again after each of Delays. Start returns at once, the abandonment
// counted in Busy.
func (l *Looks) Start(ab model.Abandoned, look func() (model.AbandonOutcome, error)) {
	select {
	case l.slots <- struct{}{}:
	default:
		ab.Outcome = model.AbandonDropped
		if l.report != nil {
			go l.report(ab)
		}
		return
	}
	go func() {
		defer func() { <-l.slots }()
		ab.Outcome, ab.Err = look()
		for _, d := range Delays {
			if ab.Outcome == model.AbandonEnded {
				break
			}
			<-l.clk.After(d)
			ab.Outcome, ab.Err = look()
		}
		if l.report != nil {
			l.report(ab)
		}
	}()
}

// Busy returns how many abandonments are under way.
func (l *Looks) Busy() int { return len(l.slots) }
