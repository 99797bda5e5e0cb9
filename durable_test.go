package tollgate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/reconcile"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// slots is a 4-slot concurrency limit beside a rate limit.
var slots = tollgate.WithLimits(tollgate.PerMinute("rpm", 100), tollgate.ConcurrencyLimit("inflight", 4))

// nsID returns the id of namespace name in st.
func nsID(t testing.TB, st store.Store, name string) string {
	t.Helper()
	n, err := st.GetNamespace(context.Background(), name)
	if err != nil {
		t.Fatalf("GetNamespace(%q): %v", name, err)
	}
	return n.ID
}

// records returns every lease record of the default namespace.
func records(t testing.TB, st store.Store) []store.LeaseRecord {
	t.Helper()
	recs, _, err := st.ListLeases(context.Background(), nsID(t, st, tollgate.DefaultNamespace), store.LeaseQuery{Limit: store.MaxLeasePage})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// record returns the stored record of le, failing the test if there is none.
func record(t testing.TB, st store.Store, le *tollgate.Lease) store.LeaseRecord {
	t.Helper()
	rec, err := st.GetLease(context.Background(), nsID(t, st, tollgate.DefaultNamespace), le.ID())
	if err != nil {
		t.Fatalf("GetLease(%q): %v", le.ID(), err)
	}
	return rec
}

// reconcileAt runs one reconciler pass over st at clk's time and returns how
// many leases it ended.
func reconcileAt(t testing.TB, st store.Store, clk clock.Clock) int {
	t.Helper()
	r, err := reconcile.New(st, reconcile.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	n, err := r.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// wantEndedElsewhere checks the error of using a lease a reconciler or
// another process ended.
func wantEndedElsewhere(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, tollgate.ErrLeaseClosed) {
		t.Fatalf("got %v, want an error matching ErrLeaseClosed", err)
	}
	if errors.Is(err, tollgate.ErrUnavailable) {
		t.Errorf("%v matches ErrUnavailable", err)
	}
}

// wantEndedAs asserts that err says the lease ended elsewhere, and how
// (its tombstone's answer).
func wantEndedAs(t testing.TB, err error, how string) {
	t.Helper()
	wantEndedElsewhere(t, err)
	var ended *tollgate.LeaseEndedError
	if !errors.As(err, &ended) || ended.How != how {
		t.Fatalf("got %v, want a *LeaseEndedError saying %s", err, how)
	}
	if got := errors.Is(err, tollgate.ErrLeaseExpired); got != (how == model.EndedExpired) {
		t.Errorf("errors.Is(%v, ErrLeaseExpired) = %v", err, got)
	}
}

// Which acquires write a record: those that take a concurrency token, and
// those that ask.
func TestDurableLeaseRecord(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		consume tollgate.Consume
		opts    []tollgate.AcquireOption
		lim     []tollgate.Option
		durable bool
		expiry  time.Duration
	}{
		{name: "concurrency token", consume: tollgate.Consume{"rpm": 1, "inflight": 1}, durable: true, expiry: tollgate.DefaultLeaseTTL},
		{name: "rate only", consume: tollgate.Consume{"rpm": 1}},
		{name: "concurrency limit in effect, not taken", consume: tollgate.Consume{"rpm": 1, "inflight": 0}},
		{name: "rate only, asked", consume: tollgate.Consume{"rpm": 1}, opts: []tollgate.AcquireOption{tollgate.WithDurableLease()},
			durable: true, expiry: tollgate.DefaultLeaseTTL},
		{name: "per-acquire expiry", consume: tollgate.Consume{"inflight": 1}, opts: []tollgate.AcquireOption{tollgate.WithLeaseTTL(30 * time.Second)},
			durable: true, expiry: 30 * time.Second},
		{name: "limiter's expiry", consume: tollgate.Consume{"inflight": 1}, lim: []tollgate.Option{tollgate.WithDefaultLeaseTTL(time.Hour)},
			durable: true, expiry: time.Hour},
		{name: "per-acquire beats the limiter's", consume: tollgate.Consume{"inflight": 1},
			opts: []tollgate.AcquireOption{tollgate.WithLeaseTTL(2 * time.Second)},
			lim:  []tollgate.Option{tollgate.WithDefaultLeaseTTL(time.Hour)}, durable: true, expiry: 2 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := memory.New()
			lim, clk := newLim(t, st, append([]tollgate.Option{tollgate.WithHolder("test-host/42")}, c.lim...)...)
			le := mustAcquire(t, lim, "key-1", "api", c.consume, append([]tollgate.AcquireOption{slots}, c.opts...)...)
			if !c.durable {
				if le.ID() != "" || !le.ExpiresAt().IsZero() || len(records(t, st)) != 0 {
					t.Fatalf("ID %q, Expires %v, records %v; want none", le.ID(), le.ExpiresAt(), records(t, st))
				}
				return
			}
			if len(le.ID()) != 32 || strings.Trim(le.ID(), "0123456789abcdef") != "" {
				t.Errorf("ID() = %q, want 32 hex characters", le.ID())
			}
			want := clk.Now().Add(c.expiry)
			if !le.ExpiresAt().Equal(want) {
				t.Errorf("ExpiresAt() = %v, want %v", le.ExpiresAt(), want)
			}
			rec := record(t, st, le)
			if rec.Entity != "key-1" || rec.Resource != "api" || rec.Holder != "test-host/42" || rec.Version != 1 ||
				rec.Created != clk.Now().UnixMilli() || rec.Expires != want.UnixMilli() || len(rec.Buckets) != 1 {
				t.Errorf("record = %+v", rec)
			}
			if err := le.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if recs := records(t, st); len(recs) != 0 {
				t.Errorf("records after Commit = %+v, want none", recs)
			}
		})
	}
}

// A cascade's record lists every bucket, and its ending gives back every
// slot.
func TestDurableLeaseCascade(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	lim, adm, _ := newPair(t, st)
	mustCreate(t, adm, tollgate.Entity{ID: "org"})
	mustCreate(t, adm, tollgate.Entity{ID: "key", ParentID: "org", Cascade: true})
	le := mustAcquire(t, lim, "key", "api", tollgate.Consume{"inflight": 1}, slots)
	rec := record(t, st, le)
	if len(rec.Buckets) != 2 || rec.Buckets[0].Key.Entity != "key" || rec.Buckets[1].Key.Entity != "org" {
		t.Fatalf("record buckets = %+v, want key then org", rec.Buckets)
	}
	if got := availableOf(t, lim, "org", "api", "inflight", slots); got != 3 {
		t.Errorf("org inflight = %d, want 3", got)
	}
	if err := le.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range []string{"key", "org"} {
		if got := availableOf(t, lim, e, "api", "inflight", slots); got != 4 {
			t.Errorf("%s inflight after Rollback = %d, want 4", e, got)
		}
	}
}

func TestLeaseExpiryValidation(t *testing.T) {
	ctx := context.Background()
	for _, d := range []time.Duration{0, -time.Second, 999 * time.Millisecond, 24*time.Hour + time.Millisecond} {
		t.Run(d.String(), func(t *testing.T) {
			_, err := tollgate.New(memory.New(), tollgate.WithDefaultLeaseTTL(d))
			wantValidation(t, err, "lease_ttl")
			lim, _ := newLim(t, memory.New())
			_, err = lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"inflight": 1}, slots, tollgate.WithLeaseTTL(d))
			wantValidation(t, err, "lease_ttl")
			// Checked on a rate-only acquire too: a bad option is a bug
			// wherever it is passed.
			_, err = lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1}, slots, tollgate.WithLeaseTTL(d))
			wantValidation(t, err, "lease_ttl")
			le := mustAcquire(t, lim, "key-1", "api", tollgate.Consume{"inflight": 1}, slots)
			wantValidation(t, le.Extend(ctx, d), "lease_ttl")
			if got := availableOf(t, lim, "key-1", "api", "inflight", slots); got != 3 {
				t.Errorf("inflight = %d, want 3: refused acquires take nothing", got)
			}
		})
	}
	for _, d := range []time.Duration{tollgate.MinLeaseTTL, tollgate.MaxLeaseTTL} {
		if _, err := tollgate.New(memory.New(), tollgate.WithDefaultLeaseTTL(d)); err != nil {
			t.Errorf("WithDefaultLeaseTTL(%v): %v", d, err)
		}
	}
	_, err := tollgate.New(memory.New(), tollgate.WithHolder(strings.Repeat("h", 257)))
	wantValidation(t, err, "holder")
}

// Extend moves the expiry, so a reconciler leaves the lease alone until
// then; a lease without a record never expires, and Extend has nothing to
// do.
func TestLeaseExtend(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	lim, clk := newLim(t, st)
	le := mustAcquire(t, lim, "key-1", "api", tollgate.Consume{"inflight": 1}, slots, tollgate.WithLeaseTTL(time.Minute))
	clk.Advance(50 * time.Second)
	if err := le.Extend(ctx, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	want := clk.Now().Add(10 * time.Minute)
	if rec := record(t, st, le); !le.ExpiresAt().Equal(want) || rec.Expires != want.UnixMilli() || rec.Version != 2 {
		t.Errorf("after Extend: Expires %v, record %+v; want %v, version 2", le.ExpiresAt(), rec, want)
	}
	clk.Advance(5 * time.Minute) // past the first expiry
	if n := reconcileAt(t, st, clk); n != 0 {
		t.Fatalf("reconciler ended %d leases, want 0: the lease was extended", n)
	}
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	rateOnly := mustAcquire(t, lim, "key-1", "api", tollgate.Consume{"rpm": 1}, slots)
	if err := rateOnly.Extend(ctx, time.Minute); err != nil || !rateOnly.ExpiresAt().IsZero() {
		t.Errorf("Extend of a lease without record = %v, Expires %v; want nil, zero", err, rateOnly.ExpiresAt())
	}
	if err := rateOnly.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rateOnly.Extend(ctx, time.Minute); !errors.Is(err, tollgate.ErrLeaseClosed) {
		t.Errorf("Extend after Commit = %v, want ErrLeaseClosed", err)
	}
}

// Commit keeps the rate consumption and Rollback gives it back; both give
// the slot back and delete the record, in one EndLease.
func TestDurableLeaseEnd(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		end     func(*tollgate.Lease, context.Context) error
		wantRPM int64
	}{
		{"commit", (*tollgate.Lease).Commit, 99},
		{"rollback", (*tollgate.Lease).Rollback, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			lim, fs, _ := newFaultLim(t)
			le := mustAcquire(t, lim, "key-1", "api", tollgate.Consume{"rpm": 1, "inflight": 1}, slots)
			fs.resetCounts()
			if err := c.end(le, ctx); err != nil {
				t.Fatal(err)
			}
			if e, a := fs.count(mEndLease), fs.count(mApplyDeltas); e != 1 || a != 0 {
				t.Errorf("%d EndLease, %d ApplyDeltas; want 1, 0", e, a)
			}
			if got := availableOf(t, lim, "key-1", "api", "inflight", slots); got != 4 {
				t.Errorf("inflight = %d, want 4", got)
			}
			if got := availableOf(t, lim, "key-1", "api", "rpm", slots); got != c.wantRPM {
				t.Errorf("rpm = %d, want %d", got, c.wantRPM)
			}
			if recs := records(t, fs); len(recs) != 0 {
				t.Errorf("records = %+v, want none", recs)
			}
			if err := c.end(le, ctx); !errors.Is(err, tollgate.ErrLeaseClosed) {
				t.Errorf("second end = %v, want ErrLeaseClosed", err)
			}
		})
	}
}

// A store failure leaves a durable lease open, to end again.
func TestDurableLeaseEndStoreDown(t *testing.T) {
	ctx := context.Background()
	lim, fs, _ := newFaultLim(t)
	le := mustAcquire(t, lim, "key-1", "api", tollgate.Consume{"inflight": 1}, slots)
	fs.failOn(errConnReset, mEndLease, mUpdateLease)
	if err := le.Commit(ctx); !errors.Is(err, tollgate.ErrUnavailable) {
		t.Fatalf("Commit with the store down = %v, want ErrUnavailable", err)
	}
	if err := le.Extend(ctx, time.Minute); !errors.Is(err, tollgate.ErrUnavailable) {
		t.Fatalf("Extend with the store down = %v, want ErrUnavailable", err)
	}
	fs.heal()
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := availableOf(t, lim, "key-1", "api", "inflight", slots); got != 4 {
		t.Errorf("inflight = %d, want 4", got)
	}
}

// A holder that ends its lease after a reconciler took it is told so, and
// the slot came back once: by the reconciler.
func TestDurableLeaseEndAfterReconcile(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		use  func(*tollgate.Lease) error
	}{
		{"commit", func(le *tollgate.Lease) error { return le.Commit(ctx) }},
		{"rollback", func(le *tollgate.Lease) error { return le.Rollback(ctx) }},
		{"extend", func(le *tollgate.Lease) error { return le.Extend(ctx, time.Minute) }},
		{"sync", func(le *tollgate.Lease) error {
			if err := le.Adjust(ctx, tollgate.Consume{"rpm": 1}); err != nil {
				return err
			}
			return le.Sync(ctx)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := memory.New()
			lim, clk := newLim(t, st)
			held := mustAcquire(t, lim, "key-1", "api", tollgate.Consume{"inflight": 1}, slots, tollgate.WithLeaseTTL(time.Hour))
			le := mustAcquire(t, lim, "key-1", "api", tollgate.Consume{"rpm": 10, "inflight": 1}, slots, tollgate.WithLeaseTTL(time.Second))
			clk.Advance(2 * time.Second)
			if n := reconcileAt(t, st, clk); n != 1 {
				t.Fatalf("reconciler ended %d leases, want 1", n)
			}
			wantEndedElsewhere(t, c.use(le))
			if got := availableOf(t, lim, "key-1", "api", "inflight", slots); got != 3 {
				t.Errorf("inflight = %d, want 3: one lease still held, the other's slot back once", got)
			}
			// 10 taken, 3.33 refilled in 2 s; a refund would show 100.
			if got := availableOf(t, lim, "key-1", "api", "rpm", slots); got != 93 {
				t.Errorf("rpm = %d, want 93: an expired lease is committed", got)
			}
			if err := le.Commit(ctx); !errors.Is(err, tollgate.ErrLeaseClosed) || le.ID() != "" {
				t.Errorf("after: Commit = %v, ID %q; want ErrLeaseClosed, \"\"", err, le.ID())
			}
			if err := held.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Any limiter over the store resumes a lease by id: adjustments synced by
// one are seen and committed by the other; the first handle then finds the
// lease ended.
func TestResumeLease(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	a, clk := newLim(t, st)
	b, err := tollgate.New(st, tollgate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	le := mustAcquire(t, a, "key-1", "api", tollgate.Consume{"rpm": 10, "inflight": 1}, slots)
	if err := le.Adjust(ctx, tollgate.Consume{"rpm": 5}); err != nil {
		t.Fatal(err)
	}
	if err := le.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if rec := record(t, st, le); rec.Version != 2 || rec.PendingOf("rpm") != 5000 || !le.ExpiresAt().Equal(time.UnixMilli(rec.Expires)) {
		t.Errorf("record after Sync = %+v, want version 2 with 5 tokens of rpm pending", rec)
	}
	if err := le.Sync(ctx); err != nil || record(t, st, le).Version != 2 {
		t.Errorf("a Sync with nothing new wrote: %v", err)
	}

	id := le.ID()
	r, err := b.ResumeLease(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID() != le.ID() || r.Entity() != "key-1" || r.Resource() != "api" || !r.ExpiresAt().Equal(le.ExpiresAt()) {
		t.Errorf("resumed lease %q %s/%s expiring %v, want %q key-1/api %v", r.ID(), r.Entity(), r.Resource(), r.ExpiresAt(), le.ID(), le.ExpiresAt())
	}
	if got := r.Consumed(); got["rpm"] != 15 || got["inflight"] != 1 {
		t.Errorf("resumed Consumed() = %v, want rpm 15, inflight 1", got)
	}
	if r.Statuses() != nil {
		t.Errorf("resumed Statuses() = %v, want nil", r.Statuses())
	}
	if err := r.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := availableOf(t, a, "key-1", "api", "rpm", slots); got != 85 {
		t.Errorf("rpm = %d, want 85: 10 taken and 5 adjusted", got)
	}
	if got := availableOf(t, a, "key-1", "api", "inflight", slots); got != 4 {
		t.Errorf("inflight = %d, want 4", got)
	}
	wantEndedAs(t, le.Commit(ctx), model.EndedCommitted)
	_, err = b.ResumeLease(ctx, id)
	wantEndedAs(t, err, model.EndedCommitted)
}

func TestResumeLeaseRefused(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	lim, clk := newLim(t, st)
	le := mustAcquire(t, lim, "key-1", "api", tollgate.Consume{"inflight": 1}, slots)
	adm, _ := newAdmin(t, st)
	if _, err := adm.RegisterNamespace(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	other, err := tollgate.New(st, tollgate.WithNamespace("other"), tollgate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		lim   *tollgate.Limiter
		id    string
		field string // "" for ErrLeaseNotFound
	}{
		{"another namespace", other, le.ID(), ""},
		{"unknown id", lim, strings.Repeat("0", 32), ""},
		{"empty id", lim, "", "lease_id"},
		{"bad characters", lim, "lease id", "lease_id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.lim.ResumeLease(ctx, c.id)
			if c.field != "" {
				wantValidation(t, err, c.field)
			} else if !errors.Is(err, tollgate.ErrLeaseNotFound) || errors.Is(err, tollgate.ErrUnavailable) {
				t.Errorf("ResumeLease = %v, want ErrLeaseNotFound", err)
			}
		})
	}
	if err := le.Commit(ctx); err != nil {
		t.Fatalf("Commit after the refused resumes: %v", err)
	}
}

// Two handles to one lease: what each adjusted adds up, whichever wrote
// first, and the first ending wins.
func TestDurableLeaseConflictMerges(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	lim, _ := newLim(t, st)
	le := mustAcquire(t, lim, "key-1", "api", tollgate.Consume{"rpm": 10, "inflight": 1}, slots)
	r, err := lim.ResumeLease(ctx, le.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Adjust(ctx, tollgate.Consume{"rpm": 3}); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := le.Adjust(ctx, tollgate.Consume{"rpm": 2}); err != nil {
		t.Fatal(err)
	}
	if err := le.Extend(ctx, time.Hour); err != nil { // meets version 2: reads it, then writes 3
		t.Fatal(err)
	}
	if got := le.Consumed()["rpm"]; got != 15 {
		t.Errorf("Consumed after the merge = %d, want 15 (10 + 3 + 2)", got)
	}
	if err := r.Adjust(ctx, tollgate.Consume{"rpm": -1}); err != nil {
		t.Fatal(err)
	}
	if err := r.Commit(ctx); err != nil { // meets version 3
		t.Fatal(err)
	}
	if got := availableOf(t, lim, "key-1", "api", "rpm", slots); got != 86 {
		t.Errorf("rpm = %d, want 86: 10 + 3 + 2 - 1 consumed", got)
	}
	wantEndedAs(t, le.Rollback(ctx), model.EndedCommitted)
	if got := availableOf(t, lim, "key-1", "api", "inflight", slots); got != 4 {
		t.Errorf("inflight = %d, want 4", got)
	}
}

// Two handles' additions, each within MaxTokens net, may together exceed
// it: the merge keeps the lease's net consumption at MaxTokens.
func TestDurableLeaseConflictMergeBounded(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	lim, _ := newLim(t, st)
	le := mustAcquire(t, lim, "key-1", "api", tollgate.Consume{"rpm": 10, "inflight": 1}, slots)
	r, err := lim.ResumeLease(ctx, le.ID())
	if err != nil {
		t.Fatal(err)
	}
	big := tollgate.Consume{"rpm": model.MaxTokens - 10}
	if err := r.Adjust(ctx, big); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := le.Adjust(ctx, big); err != nil { // this handle has not seen r's
		t.Fatal(err)
	}
	if err := le.Sync(ctx); err != nil { // meets r's version: merges
		t.Fatal(err)
	}
	if got := le.Consumed()["rpm"]; got != model.MaxTokens {
		t.Errorf("Consumed after the merge = %d, want MaxTokens (%d)", got, model.MaxTokens)
	}
	if rec := record(t, st, le); rec.PendingOf("rpm") != (model.MaxTokens-10)*1000 {
		t.Errorf("record's pending rpm = %d millitokens, want %d", rec.PendingOf("rpm"), (model.MaxTokens-10)*1000)
	}
}

// An id collision (the store refuses the record) is retried once with a
// fresh id; the refused attempt debited nothing.
func TestDurableLeaseIDCollision(t *testing.T) {
	ctx := context.Background()
	st := &collidingStore{Store: memory.New(), refuse: 1}
	lim, _ := newLim(t, st)
	le := mustAcquire(t, lim, "key-1", "api", tollgate.Consume{"inflight": 1}, slots)
	if st.ids[0] == st.ids[1] || le.ID() != st.ids[1] {
		t.Errorf("ids tried %v, lease %q: want two different ids, the second kept", st.ids, le.ID())
	}
	st.refuse = 2
	_, err := lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"inflight": 1}, slots)
	if !errors.Is(err, model.ErrLeaseExists) {
		t.Errorf("two refusals = %v, want ErrLeaseExists", err)
	}
	if got := availableOf(t, lim, "key-1", "api", "inflight", slots); got != 3 {
		t.Errorf("inflight = %d, want 3", got)
	}
}

// collidingStore refuses the first refuse lease records it is asked to
// create, as a store does for an id already taken, and notes the ids.
type collidingStore struct {
	store.Store
	refuse int
	ids    []string
}

func (s *collidingStore) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	if req.Lease != nil {
		s.ids = append(s.ids, req.Lease.ID)
		if s.refuse > 0 {
			s.refuse--
			return false, model.ErrLeaseExists
		}
	}
	return s.Store.Consume(ctx, ns, req)
}
