package tollgate_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// newRegistry returns a Registry over s whose clock stands at tgEpoch.
func newRegistry(t testing.TB, s store.Store) *tollgate.Registry {
	t.Helper()
	reg, err := tollgate.NewRegistry(s, tollgate.WithRegistryClock(clock.NewFake(tgEpoch)))
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	return reg
}

func TestNewRegistryRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name  string
		store store.Store
		opts  []tollgate.RegistryOption
		field string
	}{
		{"no store", nil, nil, "store"},
		{"no clock", memory.New(), []tollgate.RegistryOption{tollgate.WithRegistryClock(nil)}, "clock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg, err := tollgate.NewRegistry(tt.store, tt.opts...)
			wantValidation(t, err, tt.field)
			if reg != nil {
				t.Errorf("NewRegistry returned %v with its error", reg)
			}
		})
	}
}

// registryStep is one call of a namespace's life, run in order with the
// steps before it, and what it should return.
type registryStep struct {
	name string
	call func(ctx context.Context, reg *tollgate.Registry) error
	want error // nil, a sentinel for errors.Is, or tollgate.ErrInvalid
}

func register(name string) func(context.Context, *tollgate.Registry) error {
	return func(ctx context.Context, reg *tollgate.Registry) error {
		_, err := reg.Register(ctx, name)
		return err
	}
}

func get(name string) func(context.Context, *tollgate.Registry) error {
	return func(ctx context.Context, reg *tollgate.Registry) error {
		_, err := reg.Get(ctx, name)
		return err
	}
}

func purge(name string) func(context.Context, *tollgate.Registry) error {
	return func(ctx context.Context, reg *tollgate.Registry) error { return reg.Purge(ctx, name, nil) }
}

func TestRegistryLifecycle(t *testing.T) {
	del := func(name string) func(context.Context, *tollgate.Registry) error {
		return func(ctx context.Context, reg *tollgate.Registry) error { return reg.Delete(ctx, name) }
	}
	recov := func(name string) func(context.Context, *tollgate.Registry) error {
		return func(ctx context.Context, reg *tollgate.Registry) error { return reg.Recover(ctx, name) }
	}
	steps := []registryStep{
		{"register", register("tenant-a"), nil},
		{"register twice", register("tenant-a"), tollgate.ErrNamespaceExists},
		{"register an invalid name", register("no spaces"), tollgate.ErrInvalid},
		{"register an empty name", register(""), tollgate.ErrInvalid},
		{"get", get("tenant-a"), nil},
		{"get an unknown name", get("tenant-z"), tollgate.ErrNamespaceNotFound},
		{"get an invalid name", get("no/slashes"), tollgate.ErrInvalid},
		{"purge a live namespace", purge("tenant-a"), tollgate.ErrInvalid},
		{"delete", del("tenant-a"), nil},
		{"register a deleted name", register("tenant-a"), tollgate.ErrNamespaceExists},
		{"recover", recov("tenant-a"), nil},
		{"purge a recovered namespace", purge("tenant-a"), tollgate.ErrInvalid},
		{"delete again", del("tenant-a"), nil},
		{"purge", purge("tenant-a"), nil},
		{"get a purged namespace", get("tenant-a"), tollgate.ErrNamespaceNotFound},
		{"delete a purged namespace", del("tenant-a"), tollgate.ErrNamespaceNotFound},
		{"recover an unknown name", recov("tenant-z"), tollgate.ErrNamespaceNotFound},
		{"purge an unknown name", purge("tenant-z"), tollgate.ErrNamespaceNotFound},
		{"register a purged name again", register("tenant-a"), nil},
	}
	ctx := context.Background()
	reg := newRegistry(t, memory.New())
	for _, st := range steps {
		err := st.call(ctx, reg)
		switch {
		case st.want == nil && err != nil:
			t.Fatalf("%s: %v", st.name, err)
		case st.want == tollgate.ErrInvalid:
			wantValidation(t, err, "namespace")
		case !errors.Is(err, st.want):
			t.Fatalf("%s: err = %v, want %v", st.name, err, st.want)
		}
	}
}

// Register stamps the registry's clock and a fresh id; Delete stamps its
// clock too, Recover clears the stamp, and List shows every namespace,
// deleted ones included, sorted by name.
func TestRegistryRecords(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(tgEpoch.Add(1500 * time.Microsecond))
	reg, err := tollgate.NewRegistry(memory.New(), tollgate.WithRegistryClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	b, err := reg.Register(ctx, "tenant-b")
	if err != nil {
		t.Fatal(err)
	}
	a, err := reg.Register(ctx, "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	wantCreated := tgEpoch.Add(time.Millisecond) // to the millisecond, as stored
	if !b.CreatedAt.Equal(wantCreated) || len(b.ID) != 16 || b.ID == a.ID || b.Deleted() {
		t.Errorf("Register = %+v, want created at %v, a 16-digit id of its own, not deleted", b, wantCreated)
	}
	clk.Advance(time.Hour)
	if err := reg.Delete(ctx, "tenant-b"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		wantDeleted time.Time
	}{
		{"tenant-a", time.Time{}},
		{"tenant-b", wantCreated.Add(time.Hour)},
	}
	list, err := reg.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(tests) {
		t.Fatalf("List = %+v, want %d namespaces", list, len(tests))
	}
	for i, tt := range tests {
		got, err := reg.Get(ctx, tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if !got.DeletedAt.Equal(tt.wantDeleted) {
			t.Errorf("%s: DeletedAt = %v, want %v", tt.name, got.DeletedAt, tt.wantDeleted)
		}
		if !reflect.DeepEqual(list[i], got) {
			t.Errorf("List[%d] = %+v, want %+v", i, list[i], got)
		}
	}
	if err := reg.Recover(ctx, "tenant-b"); err != nil {
		t.Fatal(err)
	}
	if got, err := reg.Get(ctx, "tenant-b"); err != nil || got.Deleted() || got.ID != b.ID {
		t.Errorf("Get after Recover = %+v, %v; want %s not deleted, same id", got, err, "tenant-b")
	}
}

// Purge tells progress how many items it deleted, and leaves nothing of the
// namespace for a limiter to find.
func TestRegistryPurgeProgress(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	reg := newRegistry(t, s)
	if _, err := reg.Register(ctx, "tenant-a"); err != nil {
		t.Fatal(err)
	}
	lim, _ := newLim(t, s, tollgate.WithNamespace("tenant-a"), tollgate.WithCacheTTL(0))
	if _, err := lim.CreateEntity(ctx, tollgate.Entity{ID: "org"}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Delete(ctx, "tenant-a"); err != nil {
		t.Fatal(err)
	}
	deleted := 0
	if err := reg.Purge(ctx, "tenant-a", func(n int) { deleted = n }); err != nil {
		t.Fatal(err)
	}
	if deleted == 0 {
		t.Error("Purge reported no deleted items, want at least the entity")
	}
	if _, err := lim.GetEntity(ctx, "org"); !errors.Is(err, tollgate.ErrNamespaceNotFound) {
		t.Errorf("GetEntity after Purge: %v, want ErrNamespaceNotFound", err)
	}
}

// A store that cannot answer makes every registry call an
// *UnavailableError wrapping the cause.
func TestRegistryStoreErrorsAreUnavailable(t *testing.T) {
	ctx := context.Background()
	fs := newFaultStore()
	reg := newRegistry(t, fs)
	if _, err := reg.Register(ctx, "tenant-a"); err != nil {
		t.Fatal(err)
	}
	fs.failOn(errConnReset, "CreateNamespace", mGetNamespace, "ListNamespaces", "SetNamespaceDeleted", "PurgeNamespace")
	tests := []registryStep{
		{"Register", register("tenant-b"), nil},
		{"Get", get("tenant-a"), nil},
		{"List", func(ctx context.Context, reg *tollgate.Registry) error { _, err := reg.List(ctx); return err }, nil},
		{"Delete", func(ctx context.Context, reg *tollgate.Registry) error { return reg.Delete(ctx, "tenant-a") }, nil},
		{"Recover", func(ctx context.Context, reg *tollgate.Registry) error { return reg.Recover(ctx, "tenant-a") }, nil},
		{"Purge", purge("tenant-a"), nil},
	}
	for _, tt := range tests {
		if err := tt.call(ctx, reg); !errors.Is(err, tollgate.ErrUnavailable) || !errors.Is(err, errConnReset) {
			t.Errorf("%s: err = %v, want ErrUnavailable wrapping the cause", tt.name, err)
		}
	}
}

// A limiter caches its namespace for its cache TTL: it sees a delete or a
// recovery made through a Registry once the TTL has passed, or at once
// after InvalidateCache.
func TestLimiterSeesRegistryChangesWithinCacheTTL(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	reg := newRegistry(t, s)
	if _, err := reg.Register(ctx, "tenant-a"); err != nil {
		t.Fatal(err)
	}
	const ttl = 10 * time.Second
	lim, clk := newLim(t, frozenStore{s}, tollgate.WithNamespace("tenant-a"), tollgate.WithCacheTTL(ttl))
	steps := []struct {
		name    string
		change  func() error // before the acquire, or nil
		advance time.Duration
		flush   bool // InvalidateCache before the acquire
		want    error
	}{
		{"registered", nil, 0, false, nil},
		{"deleted, within the TTL", func() error { return reg.Delete(ctx, "tenant-a") }, ttl - time.Nanosecond, false, nil},
		{"deleted, past the TTL", nil, time.Nanosecond, false, tollgate.ErrNamespaceDeleted},
		{"recovered, within the TTL", func() error { return reg.Recover(ctx, "tenant-a") }, ttl / 2, false, tollgate.ErrNamespaceDeleted},
		{"recovered, cache invalidated", nil, 0, true, nil},
		{"purged, past the TTL", func() error {
			if err := reg.Delete(ctx, "tenant-a"); err != nil {
				return err
			}
			return reg.Purge(ctx, "tenant-a", nil)
		}, ttl, false, tollgate.ErrNamespaceNotFound},
	}
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 1000))
	for _, st := range steps {
		if st.change != nil {
			if err := st.change(); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
		}
		clk.Advance(st.advance)
		if st.flush {
			lim.InvalidateCache()
		}
		_, err := lim.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 1}, limits)
		if (st.want == nil && err != nil) || !errors.Is(err, st.want) {
			t.Errorf("%s: acquire err = %v, want %v", st.name, err, st.want)
		}
	}
}

// The default namespace needs no registration: a limiter registers it on
// first use, and the registry then lists it.
func TestDefaultNamespaceRegisteredOnFirstUse(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	reg := newRegistry(t, s)
	if _, err := reg.Get(ctx, tollgate.DefaultNamespace); !errors.Is(err, tollgate.ErrNamespaceNotFound) {
		t.Fatalf("Get before first use: %v, want ErrNamespaceNotFound", err)
	}
	lim, _ := newLim(t, s)
	mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 1}, tollgate.WithLimits(tollgate.PerMinute("rpm", 10)))
	n, err := reg.Get(ctx, tollgate.DefaultNamespace)
	if err != nil {
		t.Fatalf("Get after first use: %v", err)
	}
	if !n.CreatedAt.Equal(tgEpoch) || n.ID == "" {
		t.Errorf("default namespace = %+v, want created at the limiter's %v with an id", n, tgEpoch)
	}
}
