// Package storetest is the conformance suite of the store contract. Every
// backend runs it unchanged from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return mybackend.New(...) })
//	}
//
// The suite checks the behaviours of docs/semantics.md that the store keeps
// directly through the store.Store contract (amounts in millitokens, times
// in Unix milliseconds); RunUsage and RunBucketLister check the optional
// contracts. What users see through a tollgate.Limiter over the backend is
// the other suite, package limitertest, which sits above the limiter and
// builds on this package's exported Env; this one imports nothing above the
// contract (a test holds it to that), so that a backend's tests of the
// contract do not depend on the limiter.
//
// Each case asks newStore for its own store and works in a fresh random
// namespace, so a backend may hand every case the same underlying table or
// database. Time comes from a clock.Fake; no case sleeps or reads the wall
// clock for its semantics (the only wall-clock use is a watchdog that turns
// a hang into a failure).
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// T0 is the fake time every case starts at (Unix milliseconds).
const T0 int64 = 1_700_000_000_000

// testCase is one conformance case.
type testCase struct {
	name string
	fn   func(t *testing.T, e *Env)
}

// Run runs the conformance suite against the backend that newStore makes.
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
		{"Buckets", bucketCases()},
		{"Calendar", calendarCases()},
		{"Configs", configCases()},
		{"Entities", entityCases()},
		{"EntityUpdates", entityUpdateCases()},
		{"Audit", auditCases()},
		{"AuditLog", auditLogCases()},
		{"Namespaces", namespaceCases()},
		{"Cascade", cascadeCases()},
		{"Concurrency", concurrencyCases()},
		{"Leases", leaseCases()},
		{"Penalties", penaltyCases()},
		{"Resets", resetCases()},
		{"Keys", keyCases()},
		{"Changes", changeCases()},
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
					c.fn(t, NewEnv(t, s))
				})
			}
		})
	}
}

// Option narrows a Run.
type Option func(*options)

type options struct{ groups map[string]bool }

// Groups runs only the named groups of cases ("Buckets", "Configs",
// "Entities", "EntityUpdates", "Audit", "AuditLog", "Namespaces", "Cascade",
// "Concurrency", "Leases", "Penalties", "Resets", "Keys", "Changes"):
// for running a second configuration of a backend without repeating its
// slowest cases. A backend's main run must run them all.
func Groups(names ...string) Option {
	return func(o *options) {
		o.groups = make(map[string]bool, len(names))
		for _, n := range names {
			o.groups[n] = true
		}
	}
}

// Env is what a case works with: a store, a fresh namespace in it, and a
// fake clock at T0. Its exported methods are for suites above the contract
// (package limitertest): they act on the store another way, in the same
// namespace and on the same clock, and read back through the contract what
// was written.
type Env struct {
	t   *testing.T
	ctx context.Context
	s   store.Store
	ns  string
	clk *clock.Fake

	eventSeq int64
	// latest is the latest time any Consume of the case ran at: what
	// WantStored evaluates balances at.
	latest atomic.Int64
}

// NewEnv returns an Env over s, in a fresh random namespace, with a fake
// clock at T0.
func NewEnv(t *testing.T, s store.Store) *Env {
	return &Env{t: t, ctx: t.Context(), s: s, ns: newNamespace(t), clk: clock.NewFake(time.UnixMilli(T0))}
}

// OtherNamespace returns an Env over the same store and clock in a fresh
// namespace of its own: a second tenant of the case.
func (e *Env) OtherNamespace() *Env {
	return &Env{t: e.t, ctx: e.ctx, s: e.s, ns: newNamespace(e.t), clk: e.clk}
}

// newNamespace returns a random namespace name no other case uses.
func newNamespace(t *testing.T) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "ns-" + hex.EncodeToString(b[:])
}

// Namespace is the case's namespace: its name, which is also its id once
// RegisterNamespace has run (the contract's methods take ids).
func (e *Env) Namespace() string { return e.ns }

// Clock is the case's fake clock.
func (e *Env) Clock() *clock.Fake { return e.clk }

// RegisterNamespace registers the case's namespace with its name as its id,
// so that contract-level reads (which take ids) see what a limiter working
// in the namespace by name wrote. Registering it again does nothing.
func (e *Env) RegisterNamespace() {
	e.t.Helper()
	err := e.s.CreateNamespace(e.ctx, model.Namespace{Name: e.ns, ID: e.ns, CreatedAt: time.UnixMilli(T0)})
	if err != nil && !errors.Is(err, model.ErrNamespaceExists) {
		e.t.Fatalf("CreateNamespace: %v", err)
	}
}

// now is the fake time in Unix milliseconds.
func (e *Env) now() int64 { return e.clk.Now().UnixMilli() }

// Advance moves the fake clock forward by ms milliseconds.
func (e *Env) Advance(ms int64) { e.clk.Advance(time.Duration(ms) * time.Millisecond) }

// ---- contract-level helpers ----

// Key is the key of the bucket of entity and resource.
func Key(entity, resource string) store.BucketKey {
	return store.BucketKey{Entity: entity, Resource: resource}
}

// rate returns Params of amount millitokens per period ms with capacity cp.
func rate(cp, amount, period int64) bucket.Params {
	return bucket.Params{Capacity: cp, Amount: amount, Period: period}
}

// conc returns the Params of a concurrency limit of capacity cp millitokens.
func conc(cp int64) bucket.Params { return bucket.Params{Capacity: cp} }

func checked(name string, p bucket.Params, amount int64) store.LimitRequest {
	return store.LimitRequest{Name: name, Params: p, Check: true, Amount: amount}
}

func unchecked(name string, p bucket.Params) store.LimitRequest {
	return store.LimitRequest{Name: name, Params: p}
}

func breq(k store.BucketKey, limits ...store.LimitRequest) store.BucketRequest {
	return store.BucketRequest{Key: k, Limits: limits}
}

// request builds a ConsumeRequest with private copies of the limit slices, so
// that Observed values of different calls never alias.
func request(now int64, buckets ...store.BucketRequest) *store.ConsumeRequest {
	req := &store.ConsumeRequest{Now: now, Buckets: make([]store.BucketRequest, len(buckets))}
	for i, b := range buckets {
		req.Buckets[i] = store.BucketRequest{Key: b.Key, Limits: slices.Clone(b.Limits)}
	}
	return req
}

// consume runs Consume in the case's namespace; a store error is fatal.
func (e *Env) consume(now int64, buckets ...store.BucketRequest) (bool, *store.ConsumeRequest) {
	e.t.Helper()
	req := request(now, buckets...)
	for cur := e.latest.Load(); now > cur && !e.latest.CompareAndSwap(cur, now); cur = e.latest.Load() {
	}
	ok, err := e.s.Consume(e.ctx, e.ns, req)
	if err != nil {
		e.t.Fatalf("Consume at %+d ms: %v", now-T0, err)
	}
	return ok, req
}

// grant runs Consume and fails the case unless it is granted.
func (e *Env) grant(now int64, buckets ...store.BucketRequest) *store.ConsumeRequest {
	e.t.Helper()
	ok, req := e.consume(now, buckets...)
	if !ok {
		e.t.Fatalf("Consume at %+d ms denied, want granted; observed %s", now-T0, observed(req))
	}
	return req
}

// deny runs Consume and fails the case unless it is denied.
func (e *Env) deny(now int64, buckets ...store.BucketRequest) *store.ConsumeRequest {
	e.t.Helper()
	ok, req := e.consume(now, buckets...)
	if ok {
		e.t.Fatalf("Consume at %+d ms granted, want denied; observed %s", now-T0, observed(req))
	}
	return req
}

func observed(req *store.ConsumeRequest) string {
	var b []byte
	for _, br := range req.Buckets {
		for _, lr := range br.Limits {
			b = append(b, (br.Key.Entity + "/" + br.Key.Resource + "." + lr.Name + "=" + stateString(lr.Observed) + " ")...)
		}
	}
	return string(b)
}

func stateString(s bucket.State) string {
	return "{" + itoa(s.Tokens) + " rem " + itoa(s.Rem) + "}"
}

// wantObserved checks the Observed state of limit name in bucket k of req.
func (e *Env) wantObserved(req *store.ConsumeRequest, k store.BucketKey, name string, want bucket.State) {
	e.t.Helper()
	for _, br := range req.Buckets {
		if br.Key != k {
			continue
		}
		if i := br.Find(name); i >= 0 {
			if got := br.Limits[i].Observed; got != want {
				e.t.Errorf("%s/%s.%s Observed = %s, want %s", k.Entity, k.Resource, name, stateString(got), stateString(want))
			}
			return
		}
	}
	e.t.Fatalf("request has no limit %s in bucket %v", name, k)
}

// Read returns ReadBuckets of keys in the case's namespace; an error or a
// result of the wrong length is fatal.
func (e *Env) Read(keys ...store.BucketKey) []*store.Record {
	e.t.Helper()
	recs, err := e.s.ReadBuckets(e.ctx, e.ns, keys)
	if err != nil {
		e.t.Fatalf("ReadBuckets: %v", err)
	}
	if len(recs) != len(keys) {
		e.t.Fatalf("ReadBuckets returned %d records for %d keys", len(recs), len(keys))
	}
	return recs
}

// Limit returns the stored limit name of bucket k and its record; a missing
// bucket or limit is fatal.
func (e *Env) Limit(k store.BucketKey, name string) (store.LimitState, *store.Record) {
	e.t.Helper()
	rec := e.Read(k)[0]
	if rec == nil {
		e.t.Fatalf("bucket %v does not exist", k)
	}
	i := rec.Find(name)
	if i < 0 {
		e.t.Fatalf("bucket %v has no limit %q", k, name)
	}
	return rec.Limits[i], rec
}

// WantStored checks the stored state of a limit as of the latest Consume
// the case made through the Env (with none, as stored). Backends may store it unrefilled from an earlier time (a speculative
// write debits without refilling), so the stored state is refilled from its
// record's time to that moment; a balance at or above capacity (after
// refunds) is compared as stored, since only the next refill clamps it.
func (e *Env) WantStored(k store.BucketKey, name string, want bucket.State) {
	e.t.Helper()
	l, rec := e.Limit(k, name)
	got := l.State
	if at := e.latest.Load(); at > rec.Refilled && got.Tokens < l.Params.Capacity {
		got = bucket.RefillBetween(got, l.Params, rec.Refilled, at)
	}
	if got != want {
		e.t.Errorf("stored %s/%s.%s = %s, want %s", k.Entity, k.Resource, name, stateString(got), stateString(want))
	}
}

// wantRefilledBy checks that a bucket's refill time is not after at.
func (e *Env) wantRefilledBy(k store.BucketKey, at int64) {
	e.t.Helper()
	if _, rec := e.Limit(k, e.anyLimit(k)); rec.Refilled > at {
		e.t.Errorf("%s/%s Refilled = %+d ms, after the latest request at %+d", k.Entity, k.Resource, rec.Refilled-T0, at-T0)
	}
}

func (e *Env) anyLimit(k store.BucketKey) string {
	rec := e.Read(k)[0]
	if rec == nil || len(rec.Limits) == 0 {
		e.t.Fatalf("bucket %v does not exist", k)
	}
	return rec.Limits[0].Name
}

// WantTokensAt checks the balance of a limit as it is at now: the stored
// state refilled from the record's Refilled time. This is what any later Consume at
// now observes, whether or not the backend wrote anything in between.
func (e *Env) WantTokensAt(k store.BucketKey, name string, now, want int64) {
	e.t.Helper()
	l, rec := e.Limit(k, name)
	got := bucket.RefillBetween(l.State, l.Params, rec.Refilled, now)
	if got.Tokens != want {
		e.t.Errorf("%s/%s.%s at %+d ms = %d millitokens, want %d", k.Entity, k.Resource, name, now-T0, got.Tokens, want)
	}
}

func (e *Env) deltas(ds ...store.Delta) {
	e.t.Helper()
	if err := e.s.ApplyDeltas(e.ctx, e.ns, ds); err != nil {
		e.t.Fatalf("ApplyDeltas: %v", err)
	}
}

func delta(k store.BucketKey, name string, amount int64) store.Delta {
	return store.Delta{Key: k, Limit: name, Amount: amount}
}

// event returns an audit event with a fresh id that sorts after every id the
// env made before (a ULID whose time advances by one millisecond per event).
func (e *Env) event(action, entity, resource string) model.AuditEvent {
	e.eventSeq++
	ms := T0 + e.eventSeq
	return model.AuditEvent{
		ID:        ulid.MustNew(uint64(ms), rand.Reader).String(),
		Time:      time.UnixMilli(ms).UTC(),
		Action:    action,
		Entity:    entity,
		Resource:  resource,
		Principal: "storetest",
		Details:   map[string]string{"seq": itoa(e.eventSeq)},
	}
}

func (e *Env) createEntity(ent model.Entity) model.AuditEvent {
	e.t.Helper()
	if ent.CreatedAt.IsZero() {
		ent.CreatedAt = e.clk.Now().UTC()
	}
	ev := e.event(model.ActionEntityCreate, ent.ID, "")
	if err := e.s.CreateEntity(e.ctx, e.ns, ent, ev); err != nil {
		e.t.Fatalf("CreateEntity(%s): %v", ent.ID, err)
	}
	return ev
}

func (e *Env) putConfig(sc model.Scope, cfg model.Config) model.AuditEvent {
	e.t.Helper()
	ev := e.event(model.ActionConfigSet, sc.Entity, sc.Resource)
	if err := e.s.PutConfig(e.ctx, e.ns, sc, cfg, ev); err != nil {
		e.t.Fatalf("PutConfig(%+v): %v", sc, err)
	}
	return ev
}

func (e *Env) getConfigs(scopes ...model.Scope) []*model.Config {
	e.t.Helper()
	cfgs, err := e.s.GetConfigs(e.ctx, e.ns, scopes)
	if err != nil {
		e.t.Fatalf("GetConfigs: %v", err)
	}
	if len(cfgs) != len(scopes) {
		e.t.Fatalf("GetConfigs returned %d configs for %d scopes", len(cfgs), len(scopes))
	}
	return cfgs
}

func (e *Env) audit(entity string) []model.AuditEvent {
	e.t.Helper()
	evs, err := e.s.ListAudit(e.ctx, e.ns, entity, "", 1000)
	if err != nil {
		e.t.Fatalf("ListAudit(%q): %v", entity, err)
	}
	return evs
}

// ---- comparisons ----

func sameEntity(a, b model.Entity) bool {
	return a.ID == b.ID && a.Name == b.Name && a.ParentID == b.ParentID && a.Cascade == b.Cascade &&
		sameMap(a.Metadata, b.Metadata) && a.CreatedAt.Equal(b.CreatedAt)
}

func sameEvent(a, b model.AuditEvent) bool {
	return a.ID == b.ID && a.Time.Equal(b.Time) && a.Action == b.Action && a.Entity == b.Entity &&
		a.Resource == b.Resource && a.Principal == b.Principal && sameMap(a.Details, b.Details)
}

func sameConfig(a, b model.Config) bool {
	return slices.Equal(a.Limits, b.Limits) && a.OnUnavailable == b.OnUnavailable && sameSet(a.Shadow, b.Shadow) &&
		slices.Equal(a.AlertAt, b.AlertAt)
}

// sameSet reports whether a and b hold the same strings, in any order
// (nil and empty alike).
func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) })
}

// sameMap treats nil and empty maps as equal.
func sameMap(a, b map[string]string) bool { return maps.Equal(a, b) }

func eventIDs(evs []model.AuditEvent) []string {
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	return ids
}

func entityIDs(es []model.Entity) []string {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	return ids
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
