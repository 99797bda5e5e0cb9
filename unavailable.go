package tollgate

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tollgate-rl/tollgate/model"
)

// What the limiter does when the store cannot answer (docs/semantics.md,
// section 8): which store errors mean that (storeErr), which unavailable
// mode is in effect (failMode), and what a failed acquire then returns
// (Limiter.failed).

// failMode is the unavailable mode of the stored system config as last
// seen, which holds while the store is down, and when to read it again.
type failMode struct {
	ttl     time.Duration // how long a reading holds; 0: read it every time
	stored  atomic.Pointer[model.OnUnavailable]
	expires atomic.Int64 // a unixNano: when to read the stored mode again
	// degraded counts the degraded leases granted.
	degraded atomic.Uint64
}

// resolve returns the mode of a call: its own (call), else the stored one
// last seen, else Block.
func (f *failMode) resolve(call model.OnUnavailable) model.OnUnavailable {
	if call != "" {
		return call
	}
	if m := f.stored.Load(); m != nil && *m != "" {
		return *m
	}
	return model.Block
}

// set remembers m as the stored mode ("" for none).
func (f *failMode) set(m model.OnUnavailable) {
	if cur := f.stored.Load(); cur == nil || *cur != m {
		f.stored.Store(&m)
	}
}

// note remembers the mode of sys, the system config read at now (nil if
// there is none), until the TTL has passed.
func (f *failMode) note(sys *model.Config, now unixNano) {
	mode := model.OnUnavailable("")
	if sys != nil {
		mode = sys.OnUnavailable
	}
	f.set(mode)
	f.expires.Store(int64(now.add(f.ttl)))
}

// stale reports whether the stored mode should be read again at now (with
// a TTL of 0, at once after a reading: it expires when it is made).
func (f *failMode) stale(now unixNano) bool { return unixNano(f.expires.Load()) <= now }

// expire makes the stored mode stale, so that it is read again.
func (f *failMode) expire() { f.expires.Store(0) }

// modeRetry is how long the unavailable mode last seen holds, without
// asking the store again, after the store failed to answer for it.
const modeRetry = time.Second

// refreshSystemMode reads the system config when the remembered unavailable
// mode is stale. Acquires with explicit limits never resolve stored limits,
// so without this they would never learn the stored mode.
//
// It does not ask a store that is not answering: one whose change
// generation could not be read last time (the change watch), or that
// failed this read less than modeRetry ago. The mode last seen holds
// meanwhile (docs/semantics.md 8). So a call that meets a stalled store
// waits for it once, on its own request, not again for the mode: with the
// generation read that falls to one call a second, at most twice the
// store's call timeout.
func (l *Limiter) refreshSystemMode(ctx context.Context, ns string, now unixNano) {
	if !l.fail.stale(now) || l.changes.failing() {
		return
	}
	cfgs, err := l.store.GetConfigs(ctx, ns, []model.Scope{{}})
	if err != nil {
		l.fail.expires.Store(int64(now.add(modeRetry)))
		return
	}
	l.fail.note(cfgs[0], now)
}

// failed decides what a failed acquire returns: a degraded lease in Allow
// mode when the store is unavailable, the error otherwise.
func (l *Limiter) failed(ctx context.Context, ns, entity, resource string, mode model.OnUnavailable, err error, now unixNano) (*Lease, error) {
	if !errors.Is(err, model.ErrUnavailable) {
		return nil, err
	}
	if mode == "" && ns != "" {
		l.refreshSystemMode(ctx, ns, now)
	}
	if l.fail.resolve(mode) != model.Allow {
		return nil, err
	}
	l.fail.degraded.Add(1)
	l.noteDegraded(resource)
	// State of its own, never recycled, so that the handle keeps its cause.
	d := &leaseData{lim: l, cause: err}
	d.handles = []Lease{{key: &leaseKey{d: d, ent: &model.Entity{ID: entity}, resource: resource}}}
	return &d.handles[0], nil
}

// storeErr turns a store error into the error a caller sees: domain errors
// (model.ErrDomain) keep their identity, wrapped with the subject unless
// they are validation errors; errors after the caller's context ended pass
// through; anything else (including a store's own timeout) becomes an
// *UnavailableError. A store's own deadline (a call timeout, an HTTP
// client's) keeps its text but not its context error: with the caller's
// context alive, a cause matching context.DeadlineExceeded would read as
// the caller's own deadline to code that tests for it before
// ErrUnavailable.
func storeErr(ctx context.Context, op, subject string, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return err
	case errors.Is(err, model.ErrInvalid):
		return err
	case errors.Is(err, model.ErrDomain):
		return fmt.Errorf("%s %s: %w", op, subject, err)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		err = errors.New(err.Error())
	}
	return &model.UnavailableError{Op: op, Err: err}
}

// UnavailableMode returns the unavailable mode of the stored system
// config as the limiter knows it (read again once its cache TTL has
// passed), or Block when none is stored: the mode a call that names none
// gets. A server asks it before letting a caller ask for a looser one.
func (l *Limiter) UnavailableMode(ctx context.Context) model.OnUnavailable {
	now := nanoOf(l.clock.Now())
	if ns, err := l.namespaceID(ctx, now); err == nil {
		l.refreshSystemMode(ctx, ns, now)
	}
	return l.fail.resolve("")
}
