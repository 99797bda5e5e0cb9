package tollgate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// Shared helpers of the root package's tests (all files of package
// tollgate_test use them).

// tgEpoch is where every fake clock of these tests starts.
var tgEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Store method names understood by faultStore.
const (
	mConsume      = "Consume"
	mApplyDeltas  = "ApplyDeltas"
	mReadBuckets  = "ReadBuckets"
	mGetConfigs   = "GetConfigs"
	mPutConfig    = "PutConfig"
	mDeleteConfig = "DeleteConfig"
	mCreateEntity = "CreateEntity"
	mGetEntity    = "GetEntity"
	mDeleteEntity = "DeleteEntity"
	mListChildren = "ListChildren"
	mListAudit    = "ListAudit"
	mGetNamespace = "GetNamespace"
)

// faultStore is a store.Store that delegates to a memory store, counts the
// calls of each method and can be told to fail chosen methods. A failing
// method returns its error without calling the memory store, so nothing is
// half-written.
type faultStore struct {
	inner *memory.Store

	mu    sync.Mutex
	fail  map[string]error
	calls map[string]int
}

var _ store.Store = (*faultStore)(nil)

func newFaultStore() *faultStore {
	return &faultStore{inner: memory.New(), fail: map[string]error{}, calls: map[string]int{}}
}

// failOn makes the named methods return err until heal.
func (f *faultStore) failOn(err error, methods ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range methods {
		f.fail[m] = err
	}
}

// heal makes every method work again.
func (f *faultStore) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.fail)
}

// count returns how often method was called (failed calls included).
func (f *faultStore) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// resetCounts zeroes the call counters.
func (f *faultStore) resetCounts() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.calls)
}

func (f *faultStore) enter(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[method]++
	return f.fail[method]
}

func (f *faultStore) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	if err := f.enter(mConsume); err != nil {
		return false, err
	}
	return f.inner.Consume(ctx, ns, req)
}

func (f *faultStore) ApplyDeltas(ctx context.Context, ns string, deltas []store.Delta) error {
	if err := f.enter(mApplyDeltas); err != nil {
		return err
	}
	return f.inner.ApplyDeltas(ctx, ns, deltas)
}

func (f *faultStore) ReadBuckets(ctx context.Context, ns string, keys []store.BucketKey) ([]*store.Record, error) {
	if err := f.enter(mReadBuckets); err != nil {
		return nil, err
	}
	return f.inner.ReadBuckets(ctx, ns, keys)
}

func (f *faultStore) GetConfigs(ctx context.Context, ns string, scopes []model.Scope) ([]*model.Config, error) {
	if err := f.enter(mGetConfigs); err != nil {
		return nil, err
	}
	return f.inner.GetConfigs(ctx, ns, scopes)
}

func (f *faultStore) PutConfig(ctx context.Context, ns string, scope model.Scope, cfg model.Config, ev model.AuditEvent, pre ...store.Precondition) error {
	if err := f.enter(mPutConfig); err != nil {
		return err
	}
	return f.inner.PutConfig(ctx, ns, scope, cfg, ev, pre...)
}

func (f *faultStore) DeleteConfig(ctx context.Context, ns string, scope model.Scope, ev model.AuditEvent, pre ...store.Precondition) error {
	if err := f.enter(mDeleteConfig); err != nil {
		return err
	}
	return f.inner.DeleteConfig(ctx, ns, scope, ev, pre...)
}

func (f *faultStore) CreateEntity(ctx context.Context, ns string, e model.Entity, ev model.AuditEvent) error {
	if err := f.enter(mCreateEntity); err != nil {
		return err
	}
	return f.inner.CreateEntity(ctx, ns, e, ev)
}

func (f *faultStore) GetEntity(ctx context.Context, ns, id string) (model.Entity, error) {
	if err := f.enter(mGetEntity); err != nil {
		return model.Entity{}, err
	}
	return f.inner.GetEntity(ctx, ns, id)
}

func (f *faultStore) DeleteEntity(ctx context.Context, ns, id string, ev model.AuditEvent, pre ...store.Precondition) error {
	if err := f.enter(mDeleteEntity); err != nil {
		return err
	}
	return f.inner.DeleteEntity(ctx, ns, id, ev, pre...)
}

func (f *faultStore) ListChildren(ctx context.Context, ns, id string) ([]model.Entity, error) {
	if err := f.enter(mListChildren); err != nil {
		return nil, err
	}
	return f.inner.ListChildren(ctx, ns, id)
}

func (f *faultStore) ListEntities(ctx context.Context, ns, after string, limit int) ([]model.Entity, error) {
	if err := f.enter("ListEntities"); err != nil {
		return nil, err
	}
	return f.inner.ListEntities(ctx, ns, after, limit)
}

func (f *faultStore) UpdateEntity(ctx context.Context, ns string, e model.Entity, ev model.AuditEvent, pre ...store.Precondition) error {
	if err := f.enter("UpdateEntity"); err != nil {
		return err
	}
	return f.inner.UpdateEntity(ctx, ns, e, ev, pre...)
}

func (f *faultStore) ListConfigs(ctx context.Context, ns string, after *model.Scope, limit int) ([]model.ScopedConfig, error) {
	if err := f.enter("ListConfigs"); err != nil {
		return nil, err
	}
	return f.inner.ListConfigs(ctx, ns, after, limit)
}

func (f *faultStore) ListAudit(ctx context.Context, ns, entity, after string, limit int) ([]model.AuditEvent, error) {
	if err := f.enter(mListAudit); err != nil {
		return nil, err
	}
	return f.inner.ListAudit(ctx, ns, entity, after, limit)
}

func (f *faultStore) CreateNamespace(ctx context.Context, n model.Namespace) error {
	if err := f.enter("CreateNamespace"); err != nil {
		return err
	}
	return f.inner.CreateNamespace(ctx, n)
}

func (f *faultStore) GetNamespace(ctx context.Context, name string) (model.Namespace, error) {
	if err := f.enter(mGetNamespace); err != nil {
		return model.Namespace{}, err
	}
	return f.inner.GetNamespace(ctx, name)
}

func (f *faultStore) ListNamespaces(ctx context.Context) ([]model.Namespace, error) {
	if err := f.enter("ListNamespaces"); err != nil {
		return nil, err
	}
	return f.inner.ListNamespaces(ctx)
}

func (f *faultStore) SetNamespaceDeleted(ctx context.Context, name string, at time.Time) error {
	if err := f.enter("SetNamespaceDeleted"); err != nil {
		return err
	}
	return f.inner.SetNamespaceDeleted(ctx, name, at)
}

func (f *faultStore) PurgeNamespace(ctx context.Context, name string, progress func(int)) error {
	if err := f.enter("PurgeNamespace"); err != nil {
		return err
	}
	return f.inner.PurgeNamespace(ctx, name, progress)
}

// newLim returns a limiter over s with a fake clock at tgEpoch.
func newLim(t testing.TB, s store.Store, opts ...tollgate.Option) (*tollgate.Limiter, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(tgEpoch)
	lim, err := tollgate.New(s, append([]tollgate.Option{tollgate.WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return lim, clk
}

// newFaultLim returns a limiter over a fresh faultStore.
func newFaultLim(t testing.TB, opts ...tollgate.Option) (*tollgate.Limiter, *faultStore, *clock.Fake) {
	t.Helper()
	fs := newFaultStore()
	lim, clk := newLim(t, fs, opts...)
	return lim, fs, clk
}

// newAdmin returns an admin over s with a fake clock at tgEpoch and a
// change watch of its own (opts may replace either): the control plane of
// a process that shares s with no limiter of the test.
func newAdmin(t testing.TB, s store.Store, opts ...tollgate.Option) (*tollgate.Admin, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(tgEpoch)
	adm, err := tollgate.NewAdmin(s, append([]tollgate.Option{tollgate.WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatalf("NewAdmin: %v", err)
	}
	return adm, clk
}

// newPair returns a limiter and an admin over s made from one option
// list: a fake clock at tgEpoch and a change watch they share, then opts
// (which may replace either). What the admin changes, the limiter sees
// at its next call, whether or not the store's generation is local.
func newPair(t testing.TB, s store.Store, opts ...tollgate.Option) (*tollgate.Limiter, *tollgate.Admin, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(tgEpoch)
	w, err := tollgate.NewChangeWatch(s, tollgate.DefaultRefreshInterval)
	if err != nil {
		t.Fatalf("NewChangeWatch: %v", err)
	}
	all := append([]tollgate.Option{tollgate.WithClock(clk), tollgate.WithChangeWatch(w)}, opts...)
	lim, err := tollgate.New(s, all...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	adm, err := tollgate.NewAdmin(s, all...)
	if err != nil {
		t.Fatalf("NewAdmin: %v", err)
	}
	return lim, adm, clk
}

// newFaultPair returns a limiter and an admin (newPair) over a fresh
// faultStore.
func newFaultPair(t testing.TB, opts ...tollgate.Option) (*tollgate.Limiter, *tollgate.Admin, *faultStore, *clock.Fake) {
	t.Helper()
	fs := newFaultStore()
	lim, adm, clk := newPair(t, fs, opts...)
	return lim, adm, fs, clk
}

// wantValidation asserts that err is a *ValidationError of field.
func wantValidation(t testing.TB, err error, field string) *tollgate.ValidationError {
	t.Helper()
	var ve *tollgate.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got error %v (%T), want a *ValidationError of field %q", err, err, field)
	}
	if !errors.Is(err, tollgate.ErrInvalid) {
		t.Errorf("errors.Is(%v, ErrInvalid) = false", err)
	}
	if errors.Is(err, tollgate.ErrRateLimited) || errors.Is(err, tollgate.ErrUnavailable) {
		t.Errorf("validation error %v also matches ErrRateLimited or ErrUnavailable", err)
	}
	if ve.Field != field {
		t.Errorf("ValidationError.Field = %q, want %q (error: %v)", ve.Field, field, err)
	}
	return ve
}

// wantExceeded asserts that err is a *RateLimitExceeded and returns it.
func wantExceeded(t testing.TB, err error) *tollgate.RateLimitExceeded {
	t.Helper()
	var ex *tollgate.RateLimitExceeded
	if !errors.As(err, &ex) {
		t.Fatalf("got error %v (%T), want a *RateLimitExceeded", err, err)
	}
	if !errors.Is(err, tollgate.ErrRateLimited) {
		t.Errorf("errors.Is(%v, ErrRateLimited) = false", err)
	}
	return ex
}

// mustAcquire acquires or fails the test.
func mustAcquire(t testing.TB, lim *tollgate.Limiter, entity, resource string, c tollgate.Consume, opts ...tollgate.AcquireOption) *tollgate.Lease {
	t.Helper()
	le, err := lim.Acquire(context.Background(), entity, resource, c, opts...)
	if err != nil {
		t.Fatalf("Acquire(%s, %s, %v): %v", entity, resource, c, err)
	}
	if le == nil {
		t.Fatalf("Acquire(%s, %s, %v) returned a nil lease and no error", entity, resource, c)
	}
	return le
}

// availableOf returns the Available of limit name of entity/resource as
// reported by lim.Available.
func availableOf(t testing.TB, lim *tollgate.Limiter, entity, resource, name string, opts ...tollgate.AcquireOption) int64 {
	t.Helper()
	sts, err := lim.Available(context.Background(), entity, resource, opts...)
	if err != nil {
		t.Fatalf("Available(%s, %s): %v", entity, resource, err)
	}
	for _, s := range sts {
		if s.Entity == entity && s.Limit == name {
			return s.Available
		}
	}
	t.Fatalf("Available(%s, %s) has no limit %q: %+v", entity, resource, name, sts)
	return 0
}

// statusOf finds the status of entity's limit name.
func statusOf(t testing.TB, sts []tollgate.Status, entity, name string) tollgate.Status {
	t.Helper()
	for _, s := range sts {
		if s.Entity == entity && s.Limit == name {
			return s
		}
	}
	t.Fatalf("no status for %s/%s in %+v", entity, name, sts)
	return tollgate.Status{}
}

var errConnReset = errors.New("connection reset")

// rpm100 is a hoisted explicit-limits option used by many tests.
var rpm100 = tollgate.WithLimits(tollgate.PerMinute("rpm", 100))

// --- Fault injection ---------------------------------------------------------

func TestFaultBlockModeIsDefault(t *testing.T) {
	ctx := context.Background()
	lim, fs, _ := newFaultLim(t)
	fs.failOn(errConnReset, mConsume)

	le, err := lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1}, rpm100)
	if le != nil {
		t.Errorf("got lease %s with a failing store in Block mode", descLease(le))
	}
	var ue *tollgate.UnavailableError
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v (%T), want *UnavailableError", err, err)
	}
	if !errors.Is(err, tollgate.ErrUnavailable) {
		t.Errorf("errors.Is(err, ErrUnavailable) = false for %v", err)
	}
	if !errors.Is(err, errConnReset) {
		t.Errorf("errors.Is(err, injected) = false for %v", err)
	}
	if errors.Unwrap(err) != errConnReset {
		t.Errorf("errors.Unwrap(err) = %v, want the injected error", errors.Unwrap(err))
	}
	if errors.Is(err, tollgate.ErrRateLimited) || errors.Is(err, tollgate.ErrInvalid) {
		t.Errorf("unavailable error %v matches ErrRateLimited or ErrInvalid", err)
	}
	if ue.Op == "" {
		t.Errorf("UnavailableError.Op is empty")
	}
	if lim.Stats().Degraded != 0 {
		t.Errorf("Stats().Degraded = %d in Block mode, want 0", lim.Stats().Degraded)
	}
	// An explicit Block gives the same.
	_, err = lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1}, rpm100, tollgate.WithOnUnavailable(tollgate.Block))
	if !errors.As(err, &ue) {
		t.Fatalf("explicit Block: err = %v, want *UnavailableError", err)
	}

	// Failures while reading configuration and entities are unavailable too.
	lim2, fs2, _ := newFaultLim(t)
	fs2.failOn(errConnReset, mGetEntity)
	_, err = lim2.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1}, rpm100)
	if !errors.As(err, &ue) || !errors.Is(err, errConnReset) {
		t.Errorf("GetEntity failing: err = %v, want *UnavailableError wrapping the cause", err)
	}
	lim3, fs3, _ := newFaultLim(t)
	fs3.failOn(errConnReset, mGetConfigs)
	_, err = lim3.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1})
	if !errors.As(err, &ue) || !errors.Is(err, errConnReset) {
		t.Errorf("GetConfigs failing: err = %v, want *UnavailableError wrapping the cause", err)
	}
}

func TestFaultAllowModeDegradedLease(t *testing.T) {
	ctx := context.Background()
	lim, fs, _ := newFaultLim(t)
	fs.failOn(errConnReset, mConsume)
	allow := tollgate.WithOnUnavailable(tollgate.Allow)

	le, err := lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1}, rpm100, allow)
	if err != nil {
		t.Fatalf("Allow mode: err = %v, want a degraded lease", err)
	}
	if !le.Degraded() {
		t.Fatalf("Degraded() = false, want true")
	}
	var ue *tollgate.UnavailableError
	if !errors.As(le.Cause(), &ue) || !errors.Is(le.Cause(), errConnReset) {
		t.Errorf("Cause() = %v, want the *UnavailableError wrapping the injected error", le.Cause())
	}
	if le.Entity() != "key-1" || le.Resource() != "api" {
		t.Errorf("Entity/Resource = %q/%q, want key-1/api", le.Entity(), le.Resource())
	}
	if got := le.Statuses(); got != nil {
		t.Errorf("degraded Statuses() = %+v, want nil", got)
	}
	if lim.Stats().Degraded != 1 {
		t.Errorf("lim.Stats().Degraded = %d, want 1", lim.Stats().Degraded)
	}
	if err := le.Adjust(ctx, tollgate.Consume{"rpm": 5}); err != nil {
		t.Errorf("Adjust on a degraded lease: %v", err)
	}
	if len(le.Consumed()) != 0 {
		t.Errorf("degraded Consumed() = %v, want empty", le.Consumed())
	}
	fs.heal() // even with the store back, a degraded lease writes nothing
	if err := le.Commit(ctx); err != nil {
		t.Errorf("Commit of a degraded lease: %v", err)
	}
	le2, err := lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1}, rpm100, allow)
	if err != nil || le2.Degraded() {
		t.Fatalf("store healed: lease %s, err %v; want a normal lease", descLease(le2), err)
	}
	if err := le2.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	fs.resetCounts()

	fs.failOn(errConnReset, mConsume)
	le3, err := lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1}, rpm100, allow)
	if err != nil || !le3.Degraded() {
		t.Fatalf("lease %s, err %v; want degraded", descLease(le3), err)
	}
	fs.heal()
	if err := le3.Rollback(ctx); err != nil {
		t.Errorf("Rollback of a degraded lease: %v", err)
	}
	if n := fs.count(mApplyDeltas); n != 0 {
		t.Errorf("degraded Commit/Rollback called ApplyDeltas %d times, want 0", n)
	}
	if err := le3.Commit(ctx); !errors.Is(err, tollgate.ErrLeaseClosed) {
		t.Errorf("Commit after Rollback of a degraded lease: %v, want ErrLeaseClosed", err)
	}
	if lim.Stats().Degraded != 2 {
		t.Errorf("lim.Stats().Degraded = %d, want 2", lim.Stats().Degraded)
	}
	if got := availableOf(t, lim, "key-1", "api", "rpm", rpm100); got != 100 {
		t.Errorf("available = %d after degraded leases, want 100 (nothing consumed)", got)
	}
}

// A degraded lease still knows what it was acquired for, even when the store
// failed before the limiter had looked anything up.
func TestFaultDegradedLeaseColdCacheKnowsEntity(t *testing.T) {
	// Regression: plan once set the lease's entity and resource only after
	// reading the entity chain, so a store failing during that read left a
	// degraded lease that reported "" for both.
	ctx := context.Background()
	lim, fs, _ := newFaultLim(t)
	fs.failOn(errConnReset, mGetEntity, mGetConfigs, mConsume)
	le, err := lim.Acquire(ctx, "key-1", "api", tollgate.Consume{"rpm": 1}, rpm100, tollgate.WithOnUnavailable(tollgate.Allow))
	if err != nil || !le.Degraded() {
		t.Fatalf("lease %s, err %v; want degraded", descLease(le), err)
	}
	if le.Entity() != "key-1" || le.Resource() != "api" {
		t.Errorf("degraded lease Entity/Resource = %q/%q, want key-1/api", le.Entity(), le.Resource())
	}
}

func TestFaultModeResolution(t *testing.T) {
	ctx := context.Background()
	c := tollgate.Consume{"rpm": 1}
	sysAllow := tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 100)}, OnUnavailable: tollgate.Allow}

	t.Run("default is Block", func(t *testing.T) {
		lim, adm, fs, _ := newFaultPair(t)
		if err := adm.SetLimits(ctx, tollgate.SystemScope(), tollgate.Config{Limits: sysAllow.Limits}); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, lim, "k", "api", c)
		fs.failOn(errConnReset, mConsume)
		if _, err := lim.Acquire(ctx, "k", "api", c); !errors.Is(err, tollgate.ErrUnavailable) {
			t.Errorf("err = %v, want ErrUnavailable", err)
		}
	})

	t.Run("stored Allow", func(t *testing.T) {
		lim, adm, fs, _ := newFaultPair(t)
		if err := adm.SetLimits(ctx, tollgate.SystemScope(), sysAllow); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, lim, "k", "api", c) // learns the stored mode
		fs.failOn(errConnReset, mConsume)
		le, err := lim.Acquire(ctx, "k", "api", c)
		if err != nil || !le.Degraded() {
			t.Fatalf("lease %s, err %v; want degraded (stored Allow)", descLease(le), err)
		}
		// The call option wins over the stored setting.
		_, err = lim.Acquire(ctx, "k", "api", c, tollgate.WithOnUnavailable(tollgate.Block))
		if !errors.Is(err, tollgate.ErrUnavailable) {
			t.Errorf("call Block over stored Allow: err = %v, want ErrUnavailable", err)
		}
	})

	t.Run("call Allow over stored Block", func(t *testing.T) {
		lim, adm, fs, _ := newFaultPair(t)
		cfg := tollgate.Config{Limits: sysAllow.Limits, OnUnavailable: tollgate.Block}
		if err := adm.SetLimits(ctx, tollgate.SystemScope(), cfg); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, lim, "k", "api", c)
		fs.failOn(errConnReset, mConsume)
		le, err := lim.Acquire(ctx, "k", "api", c, tollgate.WithOnUnavailable(tollgate.Allow))
		if err != nil || !le.Degraded() {
			t.Fatalf("lease %s, err %v; want degraded", descLease(le), err)
		}
		if _, err := lim.Acquire(ctx, "k", "api", c); !errors.Is(err, tollgate.ErrUnavailable) {
			t.Errorf("stored Block: err = %v, want ErrUnavailable", err)
		}
	})

	t.Run("remembered while the store is down", func(t *testing.T) {
		lim, adm, fs, clk := newFaultPair(t)
		if err := adm.SetLimits(ctx, tollgate.SystemScope(), sysAllow); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, lim, "k", "api", c)
		fs.failOn(errConnReset, mGetConfigs, mConsume)
		le, err := lim.Acquire(ctx, "k", "api", c)
		if err != nil || !le.Degraded() {
			t.Fatalf("warm cache: lease %s, err %v; want degraded", descLease(le), err)
		}
		// After the cache expired the limiter cannot read anything, and still
		// remembers Allow.
		clk.Advance(2 * tollgate.DefaultCacheTTL)
		le, err = lim.Acquire(ctx, "k", "api", c)
		if err != nil || !le.Degraded() {
			t.Fatalf("expired cache: lease %s, err %v; want degraded", descLease(le), err)
		}
		if !errors.Is(le.Cause(), errConnReset) {
			t.Errorf("Cause() = %v, want the injected error", le.Cause())
		}
		if lim.Stats().Degraded != 2 {
			t.Errorf("Stats().Degraded = %d, want 2", lim.Stats().Degraded)
		}
	})

	t.Run("learnt from SetLimits: Allow", func(t *testing.T) {
		lim, adm, fs, _ := newFaultPair(t)
		if err := adm.SetLimits(ctx, tollgate.SystemScope(), sysAllow); err != nil {
			t.Fatal(err)
		}
		// A limiter following the watch of the admin that wrote the system
		// config knows its mode without reading it back.
		fs.failOn(errConnReset, mGetConfigs, mGetEntity, mConsume)
		le, err := lim.Acquire(ctx, "k", "api", c)
		if err != nil || !le.Degraded() {
			t.Fatalf("lease %s, err %v; want degraded", descLease(le), err)
		}
	})

	t.Run("never learnt: Block", func(t *testing.T) {
		lim, adm, fs, clk := newFaultPair(t)
		if err := adm.SetLimits(ctx, tollgate.SystemScope(), sysAllow); err != nil {
			t.Fatal(err)
		}
		// A second limiter on the same store, with a change watch of its
		// own, has never read the system config nor been told of it; with
		// every read failing from the start it cannot read it, so Block
		// applies.
		other, err := tollgate.New(fs, tollgate.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		fs.failOn(errConnReset, mGetConfigs, mGetEntity, mConsume)
		if _, err := other.Acquire(ctx, "k", "api", c); !errors.Is(err, tollgate.ErrUnavailable) {
			t.Errorf("err = %v, want ErrUnavailable", err)
		}
		// The limiter following the admin's watch was told of it.
		if le, err := lim.Acquire(ctx, "k", "api", c); err != nil || !le.Degraded() {
			t.Errorf("limiter sharing the admin's watch: lease %s, err %v; want degraded", descLease(le), err)
		}
	})

	t.Run("explicit limits learn the stored mode", func(t *testing.T) {
		lim, adm, fs, _ := newFaultPair(t)
		if err := adm.SetLimits(ctx, tollgate.SystemScope(), tollgate.Config{OnUnavailable: tollgate.Allow}); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, lim, "k", "api", c, rpm100)
		fs.failOn(errConnReset, mGetConfigs, mConsume)
		le, err := lim.Acquire(ctx, "k", "api", c, rpm100)
		if err != nil || !le.Degraded() {
			t.Fatalf("lease %s, err %v; want degraded (stored Allow learnt with explicit limits)", descLease(le), err)
		}
	})

	t.Run("stored mode switched back to Block", func(t *testing.T) {
		lim, adm, fs, clk := newFaultPair(t)
		other, _ := newAdmin(t, fs)
		if err := adm.SetLimits(ctx, tollgate.SystemScope(), sysAllow); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, lim, "k", "api", c)
		// Another process sets Block (an admin with a watch of its own);
		// this limiter learns it, after the TTL at the latest.
		if err := other.SetLimits(ctx, tollgate.SystemScope(), tollgate.Config{Limits: sysAllow.Limits}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(tollgate.DefaultCacheTTL)
		mustAcquire(t, lim, "k", "api", c)
		fs.failOn(errConnReset, mConsume)
		if _, err := lim.Acquire(ctx, "k", "api", c); !errors.Is(err, tollgate.ErrUnavailable) {
			t.Errorf("err = %v, want ErrUnavailable after the stored mode went back to Block", err)
		}
	})
}

func TestFaultAllowNeverHidesVerdicts(t *testing.T) {
	ctx := context.Background()
	lim, adm, fs, _ := newFaultPair(t)
	allow := tollgate.WithOnUnavailable(tollgate.Allow)
	if err := adm.SetLimits(ctx, tollgate.SystemScope(), tollgate.Config{OnUnavailable: tollgate.Allow}); err != nil {
		t.Fatal(err)
	}
	lim2 := func() *tollgate.Limiter { l, _ := newLim(t, fs); return l }()

	// Validation errors in Allow mode, with a working and with a broken store.
	for _, broken := range []bool{false, true} {
		if broken {
			fs.failOn(errConnReset, mConsume, mGetConfigs, mGetEntity, mApplyDeltas, mReadBuckets)
		}
		for _, l := range []*tollgate.Limiter{lim, lim2} {
			_, err := l.Acquire(ctx, "bad id!", "api", tollgate.Consume{"rpm": 1}, rpm100, allow)
			wantValidation(t, err, "entity")
			_, err = l.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 101}, rpm100, allow)
			wantValidation(t, err, "consume.rpm")
			_, err = l.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 1}, tollgate.WithLimits(), allow)
			wantValidation(t, err, "limits")
		}
		fs.heal()
	}

	// A denial stays a denial in Allow mode.
	mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 100}, rpm100, allow)
	_, err := lim.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 1}, rpm100, allow)
	wantExceeded(t, err)
	_, err = lim.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 1}, rpm100) // stored Allow
	wantExceeded(t, err)
	if lim.Stats().Degraded != 0 || lim2.Stats().Degraded != 0 {
		t.Errorf("Stats().Degraded = %d, %d; want 0", lim.Stats().Degraded, lim2.Stats().Degraded)
	}
}

func TestFaultCancelledContextIsNotDegraded(t *testing.T) {
	lim, fs, _ := newFaultLim(t)
	allow := tollgate.WithOnUnavailable(tollgate.Allow)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	// Cold cache: the entity read sees the cancellation.
	le, err := lim.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 1}, rpm100, allow)
	if !errors.Is(err, context.Canceled) || le != nil {
		t.Errorf("cold: lease %s, err %v; want context.Canceled and no lease", descLease(le), err)
	}
	// Warm cache: the consume sees it.
	mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 1}, rpm100)
	fs.resetCounts()
	le, err = lim.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 1}, rpm100, allow)
	if !errors.Is(err, context.Canceled) || le != nil {
		t.Errorf("warm: lease %s, err %v; want context.Canceled and no lease", descLease(le), err)
	}
	if errors.Is(err, tollgate.ErrUnavailable) {
		t.Errorf("a cancelled call reported ErrUnavailable: %v", err)
	}
	if fs.count(mConsume) != 1 {
		t.Errorf("Consume calls = %d, want 1 (warm path reaches the store)", fs.count(mConsume))
	}
	if lim.Stats().Degraded != 0 {
		t.Errorf("Stats().Degraded = %d, want 0", lim.Stats().Degraded)
	}
	if got := availableOf(t, lim, "k", "api", "rpm", rpm100); got != 99 {
		t.Errorf("available = %d, want 99", got)
	}
}

// A store that times out on its own (an HTTP client timeout, say) while the
// caller's context is still live has failed: any store failure other than a
// verdict or a validation error is "unavailable" (docs/semantics.md 8).
func TestFaultStoreTimeoutWithLiveContextIsUnavailable(t *testing.T) {
	// Regression: storeErr once passed through any error matching
	// context.DeadlineExceeded or context.Canceled without asking whether the
	// caller's ctx was done, so a store's own timeout escaped both Block and
	// Allow.
	ctx := context.Background()
	timeout := fmt.Errorf("dynamodb: UpdateItem: request timed out: %w", context.DeadlineExceeded)

	lim, fs, _ := newFaultLim(t)
	mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 1}, rpm100)
	fs.failOn(timeout, mConsume)

	_, err := lim.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 1}, rpm100)
	if !errors.Is(err, tollgate.ErrUnavailable) {
		t.Errorf("Block: err = %v, want ErrUnavailable (caller's ctx is live)", err)
	}
	// The store's deadline is not the caller's: nothing in the chain
	// says context.DeadlineExceeded, whatever the backend's error.
	if errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "request timed out") {
		t.Errorf("Block: err = %v, want the store's text without context.DeadlineExceeded in its chain", err)
	}
	le, err := lim.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 1}, rpm100, tollgate.WithOnUnavailable(tollgate.Allow))
	if err != nil || le == nil || !le.Degraded() {
		t.Errorf("Allow: lease %s, err %v; want a degraded lease (caller's ctx is live)", descLease(le), err)
	}
}

func TestFaultCommitFailureKeepsLeaseOpen(t *testing.T) {
	ctx := context.Background()
	lim, fs, _ := newFaultLim(t)
	le := mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 10}, rpm100)
	if err := le.Adjust(ctx, tollgate.Consume{"rpm": 5}); err != nil {
		t.Fatal(err)
	}
	fs.failOn(errConnReset, mApplyDeltas)
	err := le.Commit(ctx)
	if !errors.Is(err, tollgate.ErrUnavailable) || !errors.Is(err, errConnReset) {
		t.Fatalf("Commit with a failing store: %v, want ErrUnavailable wrapping the cause", err)
	}
	if got := availableOf(t, lim, "k", "api", "rpm", rpm100); got != 90 {
		t.Errorf("available after failed commit = %d, want 90 (adjustment not written)", got)
	}
	// Rollback fails the same way and the lease is still open.
	if err := le.Rollback(ctx); !errors.Is(err, tollgate.ErrUnavailable) {
		t.Errorf("Rollback with a failing store: %v, want ErrUnavailable", err)
	}
	fs.heal()
	if err := le.Commit(ctx); err != nil {
		t.Fatalf("second Commit after recovery: %v", err)
	}
	if got := availableOf(t, lim, "k", "api", "rpm", rpm100); got != 85 {
		t.Errorf("available after commit = %d, want 85", got)
	}
	if err := le.Commit(ctx); !errors.Is(err, tollgate.ErrLeaseClosed) {
		t.Errorf("third Commit: %v, want ErrLeaseClosed", err)
	}
	if n := fs.count(mApplyDeltas); n != 3 {
		t.Errorf("ApplyDeltas calls = %d, want 3 (fail, fail, succeed)", n)
	}
}

func TestFaultAdminErrorsAreUnavailable(t *testing.T) {
	ctx := context.Background()
	lim, adm, fs, _ := newFaultPair(t)
	fs.failOn(errConnReset, mPutConfig, mCreateEntity, mGetEntity, mListAudit, mReadBuckets)
	checks := map[string]error{
		"SetLimits": adm.SetLimits(ctx, tollgate.SystemScope(), tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 1)}}),
		"CreateEntity": func() error {
			_, err := adm.CreateEntity(ctx, tollgate.Entity{ID: "org"})
			return err
		}(),
		"GetEntity": func() error { _, err := adm.GetEntity(ctx, "org"); return err }(),
		"AuditEvents": func() error {
			_, err := adm.AuditEvents(ctx, "", "", 10)
			return err
		}(),
		"Available": func() error { _, err := lim.Available(ctx, "k", "api", rpm100); return err }(),
	}
	for name, err := range checks {
		if !errors.Is(err, tollgate.ErrUnavailable) || !errors.Is(err, errConnReset) {
			t.Errorf("%s: err = %v, want ErrUnavailable wrapping the cause", name, err)
		}
	}
}

// Bad input that explicit limits decide (an amount above a limit's capacity,
// a name that is not a limit) is a validation error even when the store is
// down and nothing is cached.
func TestFaultValidationBeforeStoreWithExplicitLimits(t *testing.T) {
	// Regression: plan once read the entity chain from the store before it
	// compared consume with the explicit limits, so with a cold cache and a
	// failing store these requests, which can never be granted, became
	// *UnavailableError (Block) or degraded grants (Allow).
	ctx := context.Background()
	for _, mode := range []tollgate.OnUnavailable{tollgate.Block, tollgate.Allow} {
		lim, fs, _ := newFaultLim(t)
		fs.failOn(errConnReset, mGetEntity, mGetConfigs, mConsume)
		opt := tollgate.WithOnUnavailable(mode)
		le, err := lim.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 101}, rpm100, opt)
		if le != nil {
			t.Errorf("%s: amount above capacity got a lease (degraded=%v)", mode, le.Degraded())
		}
		var ve *tollgate.ValidationError
		if !errors.As(err, &ve) || ve.Field != "consume.rpm" {
			t.Errorf("%s: amount above capacity: err = %v, want *ValidationError of consume.rpm", mode, err)
		}
		le, err = lim.Acquire(ctx, "k", "api", tollgate.Consume{"bogus": 1}, rpm100, opt)
		if le != nil || !errors.As(err, &ve) || ve.Field != "consume.bogus" {
			t.Errorf("%s: unknown limit name: lease %s, err %v; want *ValidationError of consume.bogus", mode, descLease(le), err)
		}
		if lim.Stats().Degraded != 0 {
			t.Errorf("%s: Stats().Degraded = %d, want 0", mode, lim.Stats().Degraded)
		}
	}
}

// descLease describes a lease for failure messages.
func descLease(le *tollgate.Lease) string {
	switch {
	case le == nil:
		return "<nil>"
	case le.Degraded():
		return "degraded(" + le.Entity() + "/" + le.Resource() + ")"
	}
	return "granted(" + le.Entity() + "/" + le.Resource() + ")"
}
