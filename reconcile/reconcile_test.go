package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/reconcile"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// env is a memory store with namespaces, a fake clock, and leases on a
// concurrency limit of capacity 10 of job/emr.
type env struct {
	t   *testing.T
	ctx context.Context
	s   *memory.Store
	clk *clock.Fake
}

func newEnv(t *testing.T, namespaces ...string) *env {
	e := &env{t: t, ctx: t.Context(), s: memory.New(), clk: clock.NewFake(epoch)}
	for _, n := range namespaces {
		if err := e.s.CreateNamespace(e.ctx, model.Namespace{Name: n, ID: "id-" + n, CreatedAt: epoch}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

var slots = bucket.Params{Capacity: 10_000}

var key = store.BucketKey{Entity: "job", Resource: "emr"}

// lease takes one slot in namespace ns with a record expiring after ttl.
func (e *env) lease(ns, id string, ttl time.Duration) *store.LeaseRecord {
	e.t.Helper()
	now := e.clk.Now().UnixMilli()
	req := &store.ConsumeRequest{Now: now, Buckets: []store.BucketRequest{{Key: key, Limits: []store.LimitRequest{
		{Name: "slots", Params: slots, Check: true, Amount: 1000},
	}}}}
	req.Lease = store.NewLeaseRecord(id, "holder-1", req, now+ttl.Milliseconds())
	if ok, err := e.s.Consume(e.ctx, "id-"+ns, req); !ok || err != nil {
		e.t.Fatalf("Consume(%s) = %v, %v", id, ok, err)
	}
	return req.Lease
}

// free returns the free slots of job/emr in ns, in millitokens.
func (e *env) free(ns string) int64 {
	e.t.Helper()
	recs, err := e.s.ReadBuckets(e.ctx, "id-"+ns, []store.BucketKey{key})
	if err != nil || recs[0] == nil {
		e.t.Fatalf("ReadBuckets: %v, %v", recs, err)
	}
	return recs[0].Limits[0].State.Tokens
}

func (e *env) reconciler(opts ...reconcile.Option) *reconcile.Reconciler {
	e.t.Helper()
	r, err := reconcile.New(e.s, append([]reconcile.Option{reconcile.WithClock(e.clk)}, opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func TestOnceReclaimsExpiredLeasesOnly(t *testing.T) {
	e := newEnv(t, "default")
	for i := range 3 {
		e.lease("default", fmt.Sprintf("short-%d", i), time.Second)
	}
	long := e.lease("default", "long", time.Hour)
	var seen []string
	r := e.reconciler(reconcile.WithOnReclaim(func(rc reconcile.Reclaimed) { seen = append(seen, rc.Lease.ID) }))

	if n, err := r.Once(e.ctx); n != 0 || err != nil {
		t.Fatalf("Once before any expiry = %d, %v; want 0", n, err)
	}
	e.clk.Advance(time.Second)
	if n, err := r.Once(e.ctx); n != 3 || err != nil {
		t.Fatalf("Once at the expiry = %d, %v; want 3", n, err)
	}
	if got := e.free("default"); got != 9000 {
		t.Errorf("free slots = %d millitokens, want 9000 (the long lease's held)", got)
	}
	if _, err := e.s.GetLease(e.ctx, "id-default", long.ID); err != nil {
		t.Errorf("the long lease: %v", err)
	}
	if len(seen) != 3 {
		t.Errorf("OnReclaim saw %v, want the 3 short leases", seen)
	}
	evs, err := e.s.ListAudit(e.ctx, "id-default", "job", "", 10)
	if err != nil || len(evs) != 3 {
		t.Fatalf("audit = %d events, %v; want 3", len(evs), err)
	}
	ev := evs[0]
	if ev.Action != model.ActionLeaseExpired || ev.Principal != reconcile.DefaultPrincipal || ev.Resource != "emr" ||
		ev.Details["holder"] != "holder-1" || ev.Details["lease"] == "" {
		t.Errorf("audit event = %+v", ev)
	}
	if n, _ := r.Once(e.ctx); n != 0 {
		t.Errorf("a second pass reclaimed %d, want 0", n)
	}
	if st := r.Stats(); st != (reconcile.Stats{Reclaimed: 3}) {
		t.Errorf("Stats = %+v, want 3 reclaimed", st)
	}
}

// Reconcilers racing over the same leases end each once: the slots come
// back once, and the reclaimed counts add up to the leases.
func TestConcurrentReconcilersReclaimOnce(t *testing.T) {
	const leases, reconcilers = 10, 6
	e := newEnv(t, "default")
	for i := range leases {
		e.lease("default", fmt.Sprintf("l-%02d", i), time.Second)
	}
	e.clk.Advance(time.Second)
	rs := make([]*reconcile.Reconciler, reconcilers)
	for i := range rs {
		rs[i] = e.reconciler()
	}
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() {
			if _, err := r.Once(e.ctx); err != nil {
				t.Errorf("Once: %v", err)
			}
		})
	}
	wg.Wait()
	var reclaimed, skipped uint64
	for _, r := range rs {
		st := r.Stats()
		reclaimed, skipped = reclaimed+st.Reclaimed, skipped+st.Skipped
	}
	if reclaimed != leases {
		t.Errorf("reclaimed %d in all (%d skipped), want %d", reclaimed, skipped, leases)
	}
	if got := e.free("default"); got != 10_000 {
		t.Errorf("free slots = %d millitokens, want 10000", got)
	}
}

func TestNamespacesChosenAndDeletedSkipped(t *testing.T) {
	e := newEnv(t, "a", "b", "gone")
	for _, ns := range []string{"a", "b", "gone"} {
		e.lease(ns, "l-"+ns, time.Second)
	}
	if err := e.s.SetNamespaceDeleted(e.ctx, "gone", epoch); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Second)
	if n, err := e.reconciler(reconcile.WithNamespaces("b", "gone")).Once(e.ctx); n != 1 || err != nil {
		t.Fatalf("Once over b and gone = %d, %v; want 1 (gone is deleted)", n, err)
	}
	if e.free("a") != 9000 || e.free("b") != 10_000 || e.free("gone") != 9000 {
		t.Errorf("free slots a/b/gone = %d/%d/%d, want 9000/10000/9000", e.free("a"), e.free("b"), e.free("gone"))
	}
	if n, _ := e.reconciler().Once(e.ctx); n != 1 {
		t.Errorf("Once over every namespace = %d, want 1 (a)", n)
	}
}

// failingStore fails ListLeases.
type failingStore struct{ *memory.Store }

var errDown = errors.New("store down")

func (failingStore) ListLeases(context.Context, string, store.LeaseQuery) ([]store.LeaseRecord, string, error) {
	return nil, "", errDown
}

func TestFailuresAreCountedAndReturned(t *testing.T) {
	e := newEnv(t, "default")
	r, err := reconcile.New(failingStore{e.s}, reconcile.WithClock(e.clk))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Once(e.ctx); !errors.Is(err, errDown) {
		t.Errorf("Once = %v, want the store's error", err)
	}
	if st := r.Stats(); st.Failed != 1 {
		t.Errorf("Stats = %+v, want 1 failed", st)
	}
}

// Run passes every interval on its clock until its context ends.
func TestRunPassesEveryInterval(t *testing.T) {
	e := newEnv(t, "default")
	e.lease("default", "l-1", 30*time.Second)
	reclaimed := make(chan string, 1)
	r := e.reconciler(reconcile.WithInterval(10*time.Second),
		reconcile.WithOnReclaim(func(rc reconcile.Reclaimed) { reclaimed <- rc.Lease.ID }))
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	for range 4 { // passes at +0 (nothing due) ... until one at or after +30 s
		e.clk.BlockUntilWaiters(1, nil)
		select {
		case id := <-reclaimed:
			t.Fatalf("%s reclaimed at %v, before its expiry", id, e.clk.Now().Sub(epoch))
		default:
		}
		next, _ := e.clk.NextDeadline()
		e.clk.Set(next)
		if e.clk.Now().Sub(epoch) >= 30*time.Second {
			break
		}
	}
	if id := <-reclaimed; id != "l-1" {
		t.Errorf("reclaimed %s, want l-1", id)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	cases := map[string][]reconcile.Option{
		"interval":  {reconcile.WithInterval(0)},
		"namespace": {reconcile.WithNamespaces("no spaces")},
	}
	for name, opts := range cases {
		if _, err := reconcile.New(memory.New(), opts...); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := reconcile.New(nil); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("New(nil) = %v, want ErrInvalid", err)
	}
}
