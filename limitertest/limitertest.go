// Package limitertest is the behaviour users see through a
// tollgate.Limiter, run over any backend: whole tokens and time.Time,
// cascades, leases and reservations, stored limits (set through an Admin)
// and their resolution, namespaces, many goroutines on one limiter. Every
// backend runs it unchanged from its own tests, next to the store
// contract's suite (package store/storetest):
//
//	func TestLimiterConformance(t *testing.T) {
//		limitertest.Run(t, func(t *testing.T) store.Store { return mybackend.New(...) })
//	}
//
// It sits above the limiter and is test support only: backends' tests
// import it, the store contract's suite does not. Its cases check what the
// limiter wrote through the contract too, with storetest's Env; like
// storetest's, each case asks newStore for its own store, works in a fresh
// random namespace and runs on a fake clock.
package limitertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/storetest"
)

// testCase is one case of the suite.
type testCase struct {
	name string
	fn   func(t *testing.T, e *env)
}

// Run runs the limiter's suite against the backend that newStore makes.
// newStore is called once per case (and may return a store shared with other
// cases: every case uses its own random namespaces).
func Run(t *testing.T, newStore func(t *testing.T) store.Store, opts ...Option) {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	groups := []struct {
		name  string
		cases []testCase
	}{
		{"Limiter", limiterCases()},
		{"Cascade", cascadeCases()},
		{"Concurrency", concurrencyCases()},
		{"Namespaces", namespaceCases()},
	}
	for _, g := range groups {
		if o.groups != nil && !o.groups[g.name] {
			continue
		}
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					s := newStore(t)
					if s == nil {
						t.Fatal("newStore returned nil")
					}
					c.fn(t, newEnv(t, s, storetest.NewEnv(t, s)))
				})
			}
		})
	}
}

// Option narrows a Run.
type Option func(*options)

type options struct{ groups map[string]bool }

// Groups runs only the named groups of cases ("Limiter", "Cascade",
// "Concurrency", "Namespaces"): for running a second configuration of a
// backend without repeating its slowest cases. A backend's main run must
// run them all.
func Groups(names ...string) Option {
	return func(o *options) {
		o.groups = make(map[string]bool, len(names))
		for _, n := range names {
			o.groups[n] = true
		}
	}
}

// env is what a case works with: storetest's Env (a store, a fresh
// namespace in it, a fake clock at storetest.T0, and the contract-level
// reads that check what a limiter wrote), and its handles under the short
// names the cases use.
type env struct {
	*storetest.Env
	t   *testing.T
	ctx context.Context
	s   store.Store
	ns  string
	clk *clock.Fake
	// watch is the change watch of the case's process: its limiters and
	// its admin share it, so that a change made through the admin is in
	// force at the limiters' next call, over any backend.
	watch *tollgate.ChangeWatch
	adm   *tollgate.Admin
}

func newEnv(t *testing.T, s store.Store, se *storetest.Env) *env {
	w, err := tollgate.NewChangeWatch(s, tollgate.DefaultRefreshInterval)
	if err != nil {
		t.Fatalf("tollgate.NewChangeWatch: %v", err)
	}
	return &env{Env: se, t: t, ctx: t.Context(), s: s, ns: se.Namespace(), clk: se.Clock(), watch: w}
}

// limiter returns a Limiter over the case's store, namespace, clock and
// change watch.
func (e *env) limiter(opts ...tollgate.Option) *tollgate.Limiter {
	e.t.Helper()
	return e.limiterOver(e.s, append([]tollgate.Option{tollgate.WithChangeWatch(e.watch)}, opts...)...)
}

// limiterOver is a Limiter over s, which wraps the case's store, with a
// change watch of its own unless opts give one: another process's.
func (e *env) limiterOver(s store.Store, opts ...tollgate.Option) *tollgate.Limiter {
	e.t.Helper()
	e.RegisterNamespace()
	all := append([]tollgate.Option{tollgate.WithNamespace(e.ns), tollgate.WithClock(e.clk)}, opts...)
	lim, err := tollgate.New(s, all...)
	if err != nil {
		e.t.Fatalf("tollgate.New: %v", err)
	}
	return lim
}

// admin returns the Admin of the case's store, namespace, clock and
// change watch.
func (e *env) admin() *tollgate.Admin {
	e.t.Helper()
	if e.adm == nil {
		e.RegisterNamespace()
		adm, err := tollgate.NewAdmin(e.s, tollgate.WithNamespace(e.ns), tollgate.WithClock(e.clk), tollgate.WithChangeWatch(e.watch))
		if err != nil {
			e.t.Fatalf("tollgate.NewAdmin: %v", err)
		}
		e.adm = adm
	}
	return e.adm
}

// status returns the status of limit name of entity in statuses.
func status(t *testing.T, statuses []model.Status, entity, name string) model.Status {
	t.Helper()
	for _, s := range statuses {
		if s.Entity == entity && s.Limit == name {
			return s
		}
	}
	t.Fatalf("no status for %s.%s in %+v", entity, name, statuses)
	return model.Status{}
}

// available returns Available's whole-token balance of limit name of entity
// (which may be a cascade ancestor of the entity asked about).
func (e *env) available(lim *tollgate.Limiter, of, resource, entity, name string, opts ...tollgate.AcquireOption) int64 {
	e.t.Helper()
	st, err := lim.Available(e.ctx, of, resource, opts...)
	if err != nil {
		e.t.Fatalf("Available(%s/%s): %v", of, resource, err)
	}
	return status(e.t, st, entity, name).Available
}

func (e *env) wantAvailable(lim *tollgate.Limiter, entity, resource, name string, want int64, opts ...tollgate.AcquireOption) {
	e.t.Helper()
	if got := e.available(lim, entity, resource, entity, name, opts...); got != want {
		e.t.Errorf("Available %s/%s.%s = %d, want %d", entity, resource, name, got, want)
	}
}

func (e *env) acquire(lim *tollgate.Limiter, entity, resource string, c tollgate.Consume, opts ...tollgate.AcquireOption) *tollgate.Lease {
	e.t.Helper()
	le, err := lim.Acquire(e.ctx, entity, resource, c, opts...)
	if err != nil {
		e.t.Fatalf("Acquire(%s/%s, %v) at %+v: %v", entity, resource, c, e.clk.Now().Sub(time.UnixMilli(storetest.T0)), err)
	}
	return le
}

// denied acquires and requires a *RateLimitExceeded, which it returns.
func (e *env) denied(lim *tollgate.Limiter, entity, resource string, c tollgate.Consume, opts ...tollgate.AcquireOption) *tollgate.RateLimitExceeded {
	e.t.Helper()
	le, err := lim.Acquire(e.ctx, entity, resource, c, opts...)
	var ex *tollgate.RateLimitExceeded
	if !errors.As(err, &ex) {
		if le != nil {
			_ = le.Rollback(e.ctx)
		}
		e.t.Fatalf("Acquire(%s/%s, %v) = %v, want *RateLimitExceeded", entity, resource, c, err)
	}
	if !errors.Is(err, tollgate.ErrRateLimited) {
		e.t.Errorf("denial %v does not match ErrRateLimited", err)
	}
	return ex
}

func (e *env) commit(le *tollgate.Lease) {
	e.t.Helper()
	if err := le.Commit(e.ctx); err != nil {
		e.t.Fatalf("Commit: %v", err)
	}
}

func (e *env) rollback(le *tollgate.Lease) {
	e.t.Helper()
	if err := le.Rollback(e.ctx); err != nil {
		e.t.Fatalf("Rollback: %v", err)
	}
}

// Planes returns a Limiter and an Admin over s, made with opts, that
// share a change watch reading s's generation at most once per refresh:
// the limiter sees the admin's changes at its next call, as a server's
// limiters see its admin's. For tests beyond the suite that drive a
// backend through both planes.
func Planes(t testing.TB, s store.Store, refresh time.Duration, opts ...tollgate.Option) (*tollgate.Limiter, *tollgate.Admin) {
	t.Helper()
	w, err := tollgate.NewChangeWatch(s, refresh)
	if err != nil {
		t.Fatalf("tollgate.NewChangeWatch: %v", err)
	}
	opts = append(opts[:len(opts):len(opts)], tollgate.WithChangeWatch(w))
	lim, err := tollgate.New(s, opts...)
	if err != nil {
		t.Fatalf("tollgate.New: %v", err)
	}
	adm, err := tollgate.NewAdmin(s, opts...)
	if err != nil {
		t.Fatalf("tollgate.NewAdmin: %v", err)
	}
	return lim, adm
}
