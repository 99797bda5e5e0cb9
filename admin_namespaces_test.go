package tollgate_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// NewAdmin checks the options it shares with New, and ignores those that
// configure acquires alone, so that one option list makes both.
func TestNewAdminOptions(t *testing.T) {
	tests := []struct {
		name  string
		store store.Store
		opts  []tollgate.Option
		field string // "" for no error
	}{
		{"no store", nil, nil, "store"},
		{"empty namespace", memory.New(), []tollgate.Option{tollgate.WithNamespace("")}, "namespace"},
		{"bad namespace", memory.New(), []tollgate.Option{tollgate.WithNamespace("no/such")}, "namespace"},
		{"no clock", memory.New(), []tollgate.Option{tollgate.WithClock(nil)}, "clock"},
		{"negative cache TTL", memory.New(), []tollgate.Option{tollgate.WithCacheTTL(-time.Second)}, "cache_ttl"},
		{"no refresh interval", memory.New(), []tollgate.Option{tollgate.WithRefreshInterval(0)}, "refresh_interval"},
		{"defaults", memory.New(), nil, ""},
		{"no cache", memory.New(), []tollgate.Option{tollgate.WithCacheTTL(0)}, ""},
		{"acquire-only options, out of bounds", memory.New(), []tollgate.Option{
			tollgate.WithCacheSize(0),
			tollgate.WithHolder(strings.Repeat("h", model.MaxHolderLen+1)),
			tollgate.WithConcurrencyRetryAfter(0),
			tollgate.WithDefaultLeaseTTL(-time.Second),
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			adm, err := tollgate.NewAdmin(tt.store, tt.opts...)
			if tt.field == "" {
				if err != nil || adm == nil {
					t.Fatalf("NewAdmin = %v, %v; want an admin", adm, err)
				}
				return
			}
			wantValidation(t, err, tt.field)
			if adm != nil {
				t.Errorf("NewAdmin returned %v with its error", adm)
			}
		})
	}
	// The acquire-only options are New's to check.
	if _, err := tollgate.New(memory.New(), tollgate.WithHolder(strings.Repeat("h", model.MaxHolderLen+1))); err == nil {
		t.Error("New accepted a holder NewAdmin ignores: the case above tests nothing")
	}
}

// Namespace reports the namespace of WithNamespace, DefaultNamespace by
// default.
func TestAdminNamespace(t *testing.T) {
	def, _ := newAdmin(t, memory.New())
	other, _ := newAdmin(t, memory.New(), tollgate.WithNamespace("tenant-b"))
	if def.Namespace() != tollgate.DefaultNamespace || other.Namespace() != "tenant-b" {
		t.Errorf("Namespace() = %q, %q; want %q, tenant-b", def.Namespace(), other.Namespace(), tollgate.DefaultNamespace)
	}
}

// namespaceStep is one call of a namespace's life, run in order with the
// steps before it, and what it should return.
type namespaceStep struct {
	name string
	call func(ctx context.Context, adm *tollgate.Admin) error
	want error // nil, a sentinel for errors.Is, or tollgate.ErrInvalid
}

func register(name string) func(context.Context, *tollgate.Admin) error {
	return func(ctx context.Context, adm *tollgate.Admin) error {
		_, err := adm.RegisterNamespace(ctx, name)
		return err
	}
}

func get(name string) func(context.Context, *tollgate.Admin) error {
	return func(ctx context.Context, adm *tollgate.Admin) error {
		_, err := adm.GetNamespace(ctx, name)
		return err
	}
}

func del(name string) func(context.Context, *tollgate.Admin) error {
	return func(ctx context.Context, adm *tollgate.Admin) error { return adm.DeleteNamespace(ctx, name) }
}

func recov(name string) func(context.Context, *tollgate.Admin) error {
	return func(ctx context.Context, adm *tollgate.Admin) error { return adm.RecoverNamespace(ctx, name) }
}

func purge(name string) func(context.Context, *tollgate.Admin) error {
	return func(ctx context.Context, adm *tollgate.Admin) error { return adm.PurgeNamespace(ctx, name, nil) }
}

func TestAdminNamespaceLifecycle(t *testing.T) {
	steps := []namespaceStep{
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
	// The admin works in another namespace: it manages them all.
	adm, _ := newAdmin(t, memory.New())
	for _, st := range steps {
		err := st.call(ctx, adm)
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

// RegisterNamespace stamps the admin's clock and a fresh id;
// DeleteNamespace stamps its clock too, RecoverNamespace clears the stamp,
// and ListNamespaces shows every namespace, deleted ones included, sorted
// by name.
func TestAdminNamespaceRecords(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(tgEpoch.Add(1500 * time.Microsecond))
	adm, _ := newAdmin(t, memory.New(), tollgate.WithClock(clk))
	b, err := adm.RegisterNamespace(ctx, "tenant-b")
	if err != nil {
		t.Fatal(err)
	}
	a, err := adm.RegisterNamespace(ctx, "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	wantCreated := tgEpoch.Add(time.Millisecond) // to the millisecond, as stored
	if !b.CreatedAt.Equal(wantCreated) || len(b.ID) != 16 || b.ID == a.ID || b.Deleted() {
		t.Errorf("RegisterNamespace = %+v, want created at %v, a 16-digit id of its own, not deleted", b, wantCreated)
	}
	clk.Advance(time.Hour)
	if err := adm.DeleteNamespace(ctx, "tenant-b"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		wantDeleted time.Time
	}{
		{"tenant-a", time.Time{}},
		{"tenant-b", wantCreated.Add(time.Hour)},
	}
	list, err := adm.ListNamespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(tests) {
		t.Fatalf("ListNamespaces = %+v, want %d namespaces", list, len(tests))
	}
	for i, tt := range tests {
		got, err := adm.GetNamespace(ctx, tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if !got.DeletedAt.Equal(tt.wantDeleted) {
			t.Errorf("%s: DeletedAt = %v, want %v", tt.name, got.DeletedAt, tt.wantDeleted)
		}
		if !reflect.DeepEqual(list[i], got) {
			t.Errorf("ListNamespaces[%d] = %+v, want %+v", i, list[i], got)
		}
	}
	if err := adm.RecoverNamespace(ctx, "tenant-b"); err != nil {
		t.Fatal(err)
	}
	if got, err := adm.GetNamespace(ctx, "tenant-b"); err != nil || got.Deleted() || got.ID != b.ID {
		t.Errorf("GetNamespace after RecoverNamespace = %+v, %v; want %s not deleted, same id", got, err, "tenant-b")
	}
}

// PurgeNamespace tells progress how many items it deleted, and leaves
// nothing of the namespace for an admin working in it to find.
func TestAdminPurgeNamespaceProgress(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	ops, _ := newAdmin(t, s)
	if _, err := ops.RegisterNamespace(ctx, "tenant-a"); err != nil {
		t.Fatal(err)
	}
	adm, _ := newAdmin(t, s, tollgate.WithNamespace("tenant-a"), tollgate.WithCacheTTL(0))
	if _, err := adm.CreateEntity(ctx, tollgate.Entity{ID: "org"}); err != nil {
		t.Fatal(err)
	}
	if err := ops.DeleteNamespace(ctx, "tenant-a"); err != nil {
		t.Fatal(err)
	}
	deleted := 0
	if err := ops.PurgeNamespace(ctx, "tenant-a", func(n int) { deleted = n }); err != nil {
		t.Fatal(err)
	}
	if deleted == 0 {
		t.Error("PurgeNamespace reported no deleted items, want at least the entity")
	}
	if _, err := adm.GetEntity(ctx, "org"); !errors.Is(err, tollgate.ErrNamespaceNotFound) {
		t.Errorf("GetEntity after PurgeNamespace: %v, want ErrNamespaceNotFound", err)
	}
}

// A store that cannot answer makes every namespace call an
// *UnavailableError wrapping the cause.
func TestAdminNamespaceStoreErrorsAreUnavailable(t *testing.T) {
	ctx := context.Background()
	fs := newFaultStore()
	adm, _ := newAdmin(t, fs)
	if _, err := adm.RegisterNamespace(ctx, "tenant-a"); err != nil {
		t.Fatal(err)
	}
	fs.failOn(errConnReset, "CreateNamespace", mGetNamespace, "ListNamespaces", "SetNamespaceDeleted", "PurgeNamespace")
	tests := []namespaceStep{
		{"RegisterNamespace", register("tenant-b"), nil},
		{"GetNamespace", get("tenant-a"), nil},
		{"ListNamespaces", func(ctx context.Context, adm *tollgate.Admin) error { _, err := adm.ListNamespaces(ctx); return err }, nil},
		{"DeleteNamespace", del("tenant-a"), nil},
		{"RecoverNamespace", recov("tenant-a"), nil},
		{"PurgeNamespace", purge("tenant-a"), nil},
	}
	for _, tt := range tests {
		if err := tt.call(ctx, adm); !errors.Is(err, tollgate.ErrUnavailable) || !errors.Is(err, errConnReset) {
			t.Errorf("%s: err = %v, want ErrUnavailable wrapping the cause", tt.name, err)
		}
	}
}

// Over a store shared with other processes whose generation tells of no
// change, a limiter with a watch of its own caches its namespace for its
// cache TTL: it sees a delete, a recovery or a purge made through an
// Admin once the TTL has passed. A limiter following the admin's change
// watch sees each at its next call.
func TestLimiterSeesNamespaceChanges(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	shared := frozenStore{s}
	const ttl = 10 * time.Second
	clk := clock.NewFake(tgEpoch)
	w, err := tollgate.NewChangeWatch(shared, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	adm, _ := newAdmin(t, shared, tollgate.WithClock(clk), tollgate.WithChangeWatch(w))
	if _, err := adm.RegisterNamespace(ctx, "tenant-a"); err != nil {
		t.Fatal(err)
	}
	opts := []tollgate.Option{tollgate.WithNamespace("tenant-a"), tollgate.WithCacheTTL(ttl), tollgate.WithClock(clk)}
	alone, _ := newLim(t, shared, opts...)
	following, _ := newLim(t, shared, append(opts, tollgate.WithChangeWatch(w))...)
	steps := []struct {
		name           string
		change         func() error // before the acquires, or nil
		advance        time.Duration
		want, wantSeen error // of alone's acquire, of following's
	}{
		{"registered", nil, 0, nil, nil},
		{"deleted, within the TTL", func() error { return adm.DeleteNamespace(ctx, "tenant-a") }, ttl - time.Nanosecond, nil, tollgate.ErrNamespaceDeleted},
		{"deleted, past the TTL", nil, time.Nanosecond, tollgate.ErrNamespaceDeleted, tollgate.ErrNamespaceDeleted},
		{"recovered, within the TTL", func() error { return adm.RecoverNamespace(ctx, "tenant-a") }, ttl / 2, tollgate.ErrNamespaceDeleted, nil},
		{"recovered, past the TTL", nil, ttl / 2, nil, nil},
		{"purged, within the TTL", func() error {
			if err := adm.DeleteNamespace(ctx, "tenant-a"); err != nil {
				return err
			}
			return adm.PurgeNamespace(ctx, "tenant-a", nil)
		}, 0, nil, tollgate.ErrNamespaceNotFound},
		{"purged, past the TTL", nil, ttl, tollgate.ErrNamespaceNotFound, tollgate.ErrNamespaceNotFound},
	}
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 1000))
	for _, st := range steps {
		if st.change != nil {
			if err := st.change(); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
		}
		clk.Advance(st.advance)
		for _, l := range []struct {
			name string
			lim  *tollgate.Limiter
			want error
		}{{"own watch", alone, st.want}, {"admin's watch", following, st.wantSeen}} {
			_, err := l.lim.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 1}, limits)
			if (l.want == nil && err != nil) || !errors.Is(err, l.want) {
				t.Errorf("%s, limiter on its %s: acquire err = %v, want %v", st.name, l.name, err, l.want)
			}
		}
	}
}

// The default namespace needs no registration: a limiter registers it on
// first use, and an admin then lists it.
func TestDefaultNamespaceRegisteredOnFirstUse(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	adm, _ := newAdmin(t, s, tollgate.WithNamespace("ops"))
	if _, err := adm.GetNamespace(ctx, tollgate.DefaultNamespace); !errors.Is(err, tollgate.ErrNamespaceNotFound) {
		t.Fatalf("GetNamespace before first use: %v, want ErrNamespaceNotFound", err)
	}
	lim, _ := newLim(t, s)
	mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 1}, tollgate.WithLimits(tollgate.PerMinute("rpm", 10)))
	n, err := adm.GetNamespace(ctx, tollgate.DefaultNamespace)
	if err != nil {
		t.Fatalf("GetNamespace after first use: %v", err)
	}
	if !n.CreatedAt.Equal(tgEpoch) || n.ID == "" {
		t.Errorf("default namespace = %+v, want created at the limiter's %v with an id", n, tgEpoch)
	}
}

// The deprecated Registry is an Admin under its old names: each of its
// calls gives what the Admin's gives, the key calls in the namespace they
// name.
func TestRegistryDelegatesToAdmin(t *testing.T) {
	ctx := context.Background()
	_, err := tollgate.NewRegistry(nil)
	wantValidation(t, err, "store")
	_, err = tollgate.NewRegistry(memory.New(), tollgate.WithRegistryClock(nil))
	wantValidation(t, err, "clock")

	s := memory.New()
	clk := clock.NewFake(tgEpoch)
	reg, err := tollgate.NewRegistry(s, tollgate.WithRegistryClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	adm, _ := newAdmin(t, s, tollgate.WithClock(clk), tollgate.WithNamespace("tenant-a"))
	same := func(what string, got, want any, gotErr, wantErr error) {
		t.Helper()
		if !reflect.DeepEqual(got, want) || (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Errorf("%s: Registry gives %+v, %v; Admin %+v, %v", what, got, gotErr, want, wantErr)
		}
	}

	created, err := reg.Register(ctx, "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	n, err := adm.GetNamespace(ctx, "tenant-a")
	same("Register", created, n, nil, err)
	_, err1 := reg.Register(ctx, "tenant-a")
	_, err2 := adm.RegisterNamespace(ctx, "tenant-a")
	same("Register twice", nil, nil, err1, err2)
	if !errors.Is(err1, tollgate.ErrNamespaceExists) {
		t.Errorf("Register twice: %v, want ErrNamespaceExists", err1)
	}
	got1, err1 := reg.Get(ctx, "tenant-a")
	got2, err2 := adm.GetNamespace(ctx, "tenant-a")
	same("Get", got1, got2, err1, err2)
	list1, err1 := reg.List(ctx)
	list2, err2 := adm.ListNamespaces(ctx)
	same("List", list1, list2, err1, err2)

	secret, k, err := reg.CreateKey(ctx, "tenant-a", tollgate.KeySpec{Name: "ci", Role: tollgate.RoleAcquire}, tollgate.WithPrincipal("ops"))
	if err != nil || k.Namespace != "tenant-a" {
		t.Fatalf("CreateKey = %+v, %v; want a key of tenant-a", k, err)
	}
	keys1, err1 := reg.Keys(ctx, "tenant-a", "", 10)
	keys2, err2 := adm.Keys(ctx, "", 10)
	same("Keys", keys1, keys2, err1, err2)
	if len(keys1) != 1 || keys1[0].Name != "ci" {
		t.Errorf("Keys = %+v, want ci", keys1)
	}
	key1, err1 := reg.LookupKey(ctx, model.HashKey(secret))
	key2, err2 := adm.LookupKey(ctx, model.HashKey(secret))
	same("LookupKey", key1, key2, err1, err2)
	evs := auditOf(t, adm, "")
	if len(evs) != 1 || evs[0].Action != tollgate.ActionKeyCreate || evs[0].Principal != "ops" {
		t.Errorf("audit of tenant-a = %+v, want the key's creation by ops", evs)
	}
	_, _, err1 = reg.CreateKey(ctx, "tenant-z", tollgate.KeySpec{Name: "ci", Role: tollgate.RoleAcquire})
	_, _, err2 = newAdminIn(t, s, "tenant-z").CreateKey(ctx, tollgate.KeySpec{Name: "ci", Role: tollgate.RoleAcquire})
	same("CreateKey in an unregistered namespace", nil, nil, err1, err2)
	if !errors.Is(err1, tollgate.ErrNamespaceNotFound) {
		t.Errorf("CreateKey in an unregistered namespace: %v, want ErrNamespaceNotFound", err1)
	}
	_, _, err = reg.CreateKey(ctx, "no/such", tollgate.KeySpec{Name: "ci", Role: tollgate.RoleAcquire})
	wantValidation(t, err, "namespace")
	if err := reg.RevokeKey(ctx, "tenant-a", "ci"); err != nil {
		t.Fatal(err)
	}
	err1 = reg.RevokeKey(ctx, "tenant-a", "ci")
	err2 = adm.RevokeKey(ctx, "ci")
	same("RevokeKey twice", nil, nil, err1, err2)
	if _, err := adm.LookupKey(ctx, model.HashKey(secret)); !errors.Is(err, tollgate.ErrKeyNotFound) {
		t.Errorf("LookupKey after the Registry's RevokeKey: %v, want ErrKeyNotFound", err)
	}

	clk.Advance(time.Hour)
	if err := reg.Delete(ctx, "tenant-a"); err != nil {
		t.Fatal(err)
	}
	if n, err := adm.GetNamespace(ctx, "tenant-a"); err != nil || !n.DeletedAt.Equal(tgEpoch.Add(time.Hour)) {
		t.Errorf("after Delete: %+v, %v; want deleted at %v", n, err, tgEpoch.Add(time.Hour))
	}
	err1 = reg.Purge(ctx, "tenant-b", nil)
	err2 = adm.PurgeNamespace(ctx, "tenant-b", nil)
	same("Purge of an unknown namespace", nil, nil, err1, err2)
	if err := reg.Recover(ctx, "tenant-a"); err != nil {
		t.Fatal(err)
	}
	if n, err := adm.GetNamespace(ctx, "tenant-a"); err != nil || n.Deleted() {
		t.Errorf("after Recover: %+v, %v; want not deleted", n, err)
	}
	err1 = reg.Purge(ctx, "tenant-a", nil)
	err2 = adm.PurgeNamespace(ctx, "tenant-a", nil)
	same("Purge of a live namespace", nil, nil, err1, err2)
	wantValidation(t, err1, "namespace")
	if err := reg.Delete(ctx, "tenant-a"); err != nil {
		t.Fatal(err)
	}
	deleted := -1
	if err := reg.Purge(ctx, "tenant-a", func(n int) { deleted = n }); err != nil || deleted < 1 {
		t.Errorf("Purge = %v, progress %d; want nil and the key (at least) deleted", err, deleted)
	}
	if _, err := adm.GetNamespace(ctx, "tenant-a"); !errors.Is(err, tollgate.ErrNamespaceNotFound) {
		t.Errorf("after Purge: %v, want ErrNamespaceNotFound", err)
	}
}

// newAdminIn returns an admin of namespace ns over s (newAdmin).
func newAdminIn(t testing.TB, s store.Store, ns string) *tollgate.Admin {
	t.Helper()
	adm, _ := newAdmin(t, s, tollgate.WithNamespace(ns))
	return adm
}
