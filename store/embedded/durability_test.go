package embedded_test

import (
	"context"
	"errors"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/embedded"
)

// The durability tests (restart here, kill -9 in crash_test.go) share one
// scenario: setUp writes a namespace, a cascade (key-a and key-b under
// org), and stored limits; acquires then consume from the buckets.

// t0 is the frozen fake time of the scenario: nothing refills, so every
// balance is exactly the capacity minus what was consumed.
const t0 int64 = 1_700_000_000_000

// dayCapacity is the capacity of the scenario's limit, in tokens.
const dayCapacity = 1_000_000_000

var scenarioLimit = tollgate.PerDay("rpd", dayCapacity)

// newLimiter returns a limiter on s whose clock never moves.
func newLimiter(s store.Store) (*tollgate.Limiter, error) {
	return tollgate.New(s, tollgate.WithClock(clock.NewFake(time.UnixMilli(t0))))
}

// newAdmin returns an admin of s whose clock never moves.
func newAdmin(s store.Store) (*tollgate.Admin, error) {
	return tollgate.NewAdmin(s, tollgate.WithClock(clock.NewFake(time.UnixMilli(t0))))
}

// setUp writes the scenario's namespace, entities and configs to s.
func setUp(ctx context.Context, s store.Store) error {
	adm, err := newAdmin(s)
	if err != nil {
		return err
	}
	if _, err := adm.RegisterNamespace(ctx, "tenant-a"); err != nil {
		return err
	}
	for _, e := range []tollgate.Entity{
		{ID: "org", Metadata: map[string]string{"plan": "gold"}},
		{ID: "key-a", ParentID: "org", Cascade: true},
		{ID: "key-b", ParentID: "org", Cascade: true},
	} {
		if _, err := adm.CreateEntity(ctx, e); err != nil {
			return err
		}
	}
	cfg := tollgate.Config{Limits: []tollgate.Limit{scenarioLimit}}
	if err := adm.SetLimits(ctx, tollgate.ResourceScope("api"), cfg); err != nil {
		return err
	}
	return adm.SetLimits(ctx, tollgate.EntityScope("org", ""), cfg)
}

// checkSetUp fails the test unless everything setUp wrote is in s.
func checkSetUp(t *testing.T, s store.Store) {
	t.Helper()
	ctx := t.Context()
	all, err := s.ListNamespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range all {
		names = append(names, n.Name)
	}
	if !slices.Equal(names, []string{"default", "tenant-a"}) {
		t.Errorf("namespaces %v, want [default tenant-a]", names)
	}
	ns := defaultNS(t, s)
	org, err := s.GetEntity(ctx, ns, "org")
	if err != nil || org.Metadata["plan"] != "gold" || !org.CreatedAt.Equal(time.UnixMilli(t0)) {
		t.Errorf("org = %+v, %v", org, err)
	}
	kids, err := s.ListChildren(ctx, ns, "org")
	if err != nil || len(kids) != 2 || kids[0].ID != "key-a" || kids[1].ID != "key-b" || !kids[0].Cascade {
		t.Errorf("children of org = %+v, %v", kids, err)
	}
	cfgs, err := s.GetConfigs(ctx, ns, []model.Scope{model.ResourceScope("api"), model.EntityScope("org", "")})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cfgs {
		if c == nil || !slices.Equal(c.Limits, []model.Limit{scenarioLimit}) {
			t.Errorf("config %d = %+v, want %v", i, c, scenarioLimit)
		}
	}
	for entity, want := range map[string][]string{
		"org":   {model.ActionEntityCreate, model.ActionConfigSet},
		"key-a": {model.ActionEntityCreate},
		"key-b": {model.ActionEntityCreate},
		"":      {model.ActionConfigSet},
	} {
		evs, err := s.ListAudit(ctx, ns, entity, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range evs {
			got = append(got, ev.Action)
		}
		if !slices.Equal(got, want) {
			t.Errorf("audit of %q = %v, want %v", entity, got, want)
		}
	}
}

// defaultNS returns the id of the default namespace.
func defaultNS(t *testing.T, s store.Store) string {
	t.Helper()
	n, err := s.GetNamespace(t.Context(), model.DefaultNamespace)
	if err != nil {
		t.Fatalf("GetNamespace(default): %v", err)
	}
	return n.ID
}

// consumed returns the tokens consumed from each entity's "api" bucket.
func consumed(t *testing.T, s store.Store, entities ...string) []int64 {
	t.Helper()
	keys := make([]store.BucketKey, len(entities))
	for i, e := range entities {
		keys[i] = store.BucketKey{Entity: e, Resource: "api"}
	}
	recs, err := s.ReadBuckets(t.Context(), defaultNS(t, s), keys)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, len(entities))
	for i, r := range recs {
		if r == nil {
			continue // never consumed from
		}
		l := r.Limits[r.Find("rpd")]
		if r.Refilled != t0 || l.State.Rem != 0 || l.State.Tokens%1000 != 0 {
			t.Errorf("%s: record %+v is not whole tokens consumed at t0", entities[i], r)
		}
		out[i] = (l.Params.Capacity - l.State.Tokens) / 1000
	}
	return out
}

func acquire(t *testing.T, lim *tollgate.Limiter, entity string, n int64) *tollgate.Lease {
	t.Helper()
	le, err := lim.Acquire(t.Context(), entity, "api", tollgate.Consume{"rpd": n})
	if err != nil {
		t.Fatalf("Acquire(%s, %d): %v", entity, n, err)
	}
	return le
}

// Everything written before Close is there after Open, bucket balances
// exactly: configs, entities, audit and namespaces were committed when
// written, buckets by the final flush of Close (nothing else flushes them
// here: the interval is an hour).
func TestRestartKeepsEverything(t *testing.T) {
	ctx := t.Context()
	path := tempFile(t)
	s, err := embedded.Open(path, embedded.WithFlushInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := newLimiter(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := setUp(ctx, s); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := acquire(t, lim, "key-a", 1).Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	le := acquire(t, lim, "key-b", 3)
	if err := le.Adjust(ctx, tollgate.Consume{"rpd": 5}); err != nil { // ApplyDeltas on both buckets
		t.Fatal(err)
	}
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// A concurrency token held across the restart, in another namespace.
	tenant, err := s.GetNamespace(ctx, "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	inflight := store.LimitRequest{Name: "inflight", Params: bucket.Params{Capacity: 4000}, Check: true, Amount: 1000}
	job := store.BucketKey{Entity: "job", Resource: "emr"}
	if ok, err := s.Consume(ctx, tenant.ID, &store.ConsumeRequest{Now: t0, Buckets: []store.BucketRequest{{Key: job, Limits: []store.LimitRequest{inflight}}}}); !ok || err != nil {
		t.Fatalf("Consume inflight = %v, %v", ok, err)
	}
	if got := consumed(t, s, "key-a", "key-b", "org"); !slices.Equal(got, []int64{10, 8, 18}) {
		t.Fatalf("before restart consumed %v, want [10 8 18]", got)
	}
	keys := []store.BucketKey{{Entity: "key-a", Resource: "api"}, {Entity: "key-b", Resource: "api"}, {Entity: "org", Resource: "api"}}
	before, err := s.ReadBuckets(ctx, defaultNS(t, s), keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, path)
	checkSetUp(t, s)
	after, err := s.ReadBuckets(ctx, defaultNS(t, s), keys)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after, before) {
		t.Errorf("buckets after restart %+v, want %+v", after, before)
	}
	if recs, err := s.ReadBuckets(ctx, tenant.ID, []store.BucketKey{job}); err != nil || recs[0] == nil || recs[0].Limits[0].State.Tokens != 3000 {
		t.Errorf("inflight bucket after restart = %+v, %v; want 3000 millitokens left", recs, err)
	}
	// The reopened store serves on from the restored balances.
	lim, err = newLimiter(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := acquire(t, lim, "key-a", 2).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := consumed(t, s, "key-a", "key-b", "org"); !slices.Equal(got, []int64{12, 8, 20}) {
		t.Errorf("after restart and one more acquire consumed %v, want [12 8 20]", got)
	}
}

// A second Open of a held file fails with ErrLocked after the lock timeout
// instead of waiting, and succeeds once the holder closed.
func TestOpenLockedFileFails(t *testing.T) {
	path := tempFile(t)
	s, err := embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s2, err := embedded.Open(path, embedded.WithLockTimeout(200*time.Millisecond))
	if !errors.Is(err, embedded.ErrLocked) {
		if s2 != nil {
			_ = s2.Close()
		}
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("second Open took %v with a 200ms lock timeout", d)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	open(t, path, embedded.WithLockTimeout(200*time.Millisecond))
}

func TestOpenRejectsBadOptions(t *testing.T) {
	for name, opt := range map[string]embedded.Option{
		"zero flush interval": embedded.WithFlushInterval(0),
		"negative timeout":    embedded.WithLockTimeout(-time.Second),
	} {
		s, err := embedded.Open(tempFile(t), opt)
		if err == nil {
			_ = s.Close()
		}
		if !errors.Is(err, model.ErrInvalid) {
			t.Errorf("%s: Open = %v, want ErrInvalid", name, err)
		}
	}
}

// Every call on a closed store fails with ErrClosed; Close again is a no-op.
func TestClosedStore(t *testing.T) {
	ctx := t.Context()
	s, err := embedded.Open(tempFile(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	k := store.BucketKey{Entity: "e", Resource: "api"}
	req := &store.ConsumeRequest{Now: t0, Buckets: []store.BucketRequest{{Key: k, Limits: []store.LimitRequest{{Name: "rpm", Params: bucket.Params{Capacity: 1000}, Check: true, Amount: 1}}}}}
	calls := map[string]error{}
	_, calls["Consume"] = s.Consume(ctx, "ns", req)
	calls["ApplyDeltas"] = s.ApplyDeltas(ctx, "ns", []store.Delta{{Key: k, Limit: "rpm", Amount: 1}})
	_, calls["ReadBuckets"] = s.ReadBuckets(ctx, "ns", []store.BucketKey{k})
	_, calls["GetConfigs"] = s.GetConfigs(ctx, "ns", []model.Scope{model.SystemScope()})
	calls["PutConfig"] = s.PutConfig(ctx, "ns", model.SystemScope(), model.Config{}, model.AuditEvent{ID: "1"})
	calls["CreateEntity"] = s.CreateEntity(ctx, "ns", model.Entity{ID: "e"}, model.AuditEvent{ID: "1"})
	_, calls["GetEntity"] = s.GetEntity(ctx, "ns", "e")
	_, calls["ListNamespaces"] = s.ListNamespaces(ctx)
	calls["CreateNamespace"] = s.CreateNamespace(ctx, model.Namespace{Name: "n", ID: "n"})
	calls["Flush"] = s.Flush(ctx)
	for name, err := range calls {
		if !errors.Is(err, embedded.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

// Input the file cannot hold is refused with a validation error before
// anything changes, so later flushes are not blocked by it.
func TestBadInputIsRefused(t *testing.T) {
	ctx := t.Context()
	path := tempFile(t)
	s, err := embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	p := bucket.Params{Capacity: 10_000, Amount: 1000, Period: 1000}
	req := func(entity string) *store.ConsumeRequest {
		return &store.ConsumeRequest{Now: t0, Buckets: []store.BucketRequest{{
			Key: store.BucketKey{Entity: entity, Resource: "api"}, Limits: []store.LimitRequest{{Name: "rps", Params: p, Check: true, Amount: 1000}},
		}}}
	}
	huge := string(make([]byte, 40_000))
	var ve *model.ValidationError
	if _, err := s.Consume(ctx, "", req("e")); !errors.As(err, &ve) || !errors.Is(err, model.ErrInvalid) {
		t.Errorf("Consume in namespace \"\" = %v, want a *ValidationError", err)
	}
	if _, err := s.Consume(ctx, "ns", req(huge)); !errors.As(err, &ve) {
		t.Errorf("Consume with a 40 kB entity id = %v, want a *ValidationError", err)
	}
	if err := s.CreateEntity(ctx, "ns", model.Entity{ID: ""}, model.AuditEvent{ID: "1"}); !errors.As(err, &ve) {
		t.Errorf("CreateEntity with an empty id = %v, want a *ValidationError", err)
	}
	if err := s.PutConfig(ctx, "ns", model.ResourceScope(huge), model.Config{}, model.AuditEvent{ID: "1"}); !errors.As(err, &ve) {
		t.Errorf("PutConfig with a 40 kB resource = %v, want a *ValidationError", err)
	}
	if err := s.CreateNamespace(ctx, model.Namespace{Name: "x", ID: ""}); !errors.As(err, &ve) {
		t.Errorf("CreateNamespace with an empty id = %v, want a *ValidationError", err)
	}
	if recs, err := s.ReadBuckets(ctx, "ns", []store.BucketKey{{Entity: huge, Resource: "api"}}); err != nil || recs[0] != nil {
		t.Errorf("a refused Consume created a bucket: %+v, %v", recs, err)
	}
	if _, err := s.GetNamespace(ctx, "x"); !errors.Is(err, model.ErrNamespaceNotFound) {
		t.Errorf("a refused CreateNamespace registered x: %v", err)
	}
	// Good input still flushes and survives a restart.
	if ok, err := s.Consume(ctx, "ns", req("e")); !ok || err != nil {
		t.Fatalf("Consume = %v, %v", ok, err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	if recs, err := s.ReadBuckets(ctx, "ns", []store.BucketKey{{Entity: "e", Resource: "api"}}); err != nil || recs[0] == nil || recs[0].Limits[0].State.Tokens != 9000 {
		t.Errorf("after restart: %+v, %v; want 9000 millitokens", recs, err)
	}
}

// Backup writes a consistent copy that opens as a store with everything in
// it, bucket changes not yet flushed included.
func TestBackup(t *testing.T) {
	ctx := t.Context()
	s := open(t, tempFile(t), embedded.WithFlushInterval(time.Hour))
	lim, err := newLimiter(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := setUp(ctx, s); err != nil {
		t.Fatal(err)
	}
	for _, e := range []string{"key-a", "key-a", "key-b"} {
		if err := acquire(t, lim, e, 1).Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	backup := tempFile(t)
	f, err := os.Create(backup)
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.Backup(ctx, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil || n == 0 {
		t.Fatalf("Backup = %d bytes, %v", n, err)
	}
	b := open(t, backup)
	checkSetUp(t, b)
	if got := consumed(t, b, "key-a", "key-b", "org"); !slices.Equal(got, []int64{2, 1, 3}) {
		t.Errorf("backup consumed %v, want [2 1 3]", got)
	}
}

// Deleting an entity or purging a namespace deletes its buckets from the
// file too, whether they were flushed already or only changed in memory: a
// later flush does not write them back, and a restart does not revive them.
func TestDeletesReachTheFile(t *testing.T) {
	ctx := t.Context()
	path := tempFile(t)
	s, err := embedded.Open(path, embedded.WithFlushInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := newLimiter(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := setUp(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := acquire(t, lim, "key-a", 1).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil { // key-a's bucket is in the file
		t.Fatal(err)
	}
	if err := acquire(t, lim, "key-b", 1).Commit(ctx); err != nil { // key-b's only in memory
		t.Fatal(err)
	}
	adm, err := newAdmin(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"key-a", "key-b"} {
		if err := adm.DeleteEntity(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// A namespace with flushed and unflushed buckets, purged.
	tenant, err := s.GetNamespace(ctx, "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	tl, err := tollgate.New(s, tollgate.WithNamespace("tenant-a"), tollgate.WithClock(clock.NewFake(time.UnixMilli(t0))))
	if err != nil {
		t.Fatal(err)
	}
	limits := tollgate.WithLimits(scenarioLimit)
	for i, e := range []string{"flushed", "unflushed"} {
		if _, err := tl.Acquire(ctx, e, "api", tollgate.Consume{"rpd": 1}, limits); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := adm.DeleteNamespace(ctx, "tenant-a"); err != nil {
		t.Fatal(err)
	}
	if err := adm.PurgeNamespace(ctx, "tenant-a", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // the final flush
		t.Fatal(err)
	}

	s = open(t, path)
	if got := consumed(t, s, "key-a", "key-b", "org"); !slices.Equal(got, []int64{0, 0, 2}) {
		t.Errorf("consumed %v, want [0 0 2]: the deleted keys' buckets are gone, org's stays", got)
	}
	ns := defaultNS(t, s)
	if recs, err := s.ReadBuckets(ctx, ns, []store.BucketKey{{Entity: "key-a", Resource: "api"}, {Entity: "key-b", Resource: "api"}}); err != nil || recs[0] != nil || recs[1] != nil {
		t.Errorf("deleted entities' buckets after restart: %+v, %v", recs, err)
	}
	for _, id := range []string{"key-a", "key-b"} {
		if _, err := s.GetEntity(ctx, ns, id); !errors.Is(err, model.ErrEntityNotFound) {
			t.Errorf("GetEntity(%s) after delete and restart = %v, want ErrEntityNotFound", id, err)
		}
	}
	if _, err := s.GetNamespace(ctx, "tenant-a"); !errors.Is(err, model.ErrNamespaceNotFound) {
		t.Errorf("purged namespace after restart: %v, want ErrNamespaceNotFound", err)
	}
	if recs, err := s.ReadBuckets(ctx, tenant.ID, []store.BucketKey{{Entity: "flushed", Resource: "api"}, {Entity: "unflushed", Resource: "api"}}); err != nil || recs[0] != nil || recs[1] != nil {
		t.Errorf("purged namespace's buckets after restart: %+v, %v", recs, err)
	}
}
