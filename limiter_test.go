package tollgate_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// --- New ----------------------------------------------------------------------

func TestNewRejectsBadOptions(t *testing.T) {
	_, err := tollgate.New(nil)
	wantValidation(t, err, "store")
	_, err = tollgate.New(memory.New(), tollgate.WithNamespace(""))
	wantValidation(t, err, "namespace")
	_, err = tollgate.New(memory.New(), tollgate.WithCacheTTL(-time.Second))
	wantValidation(t, err, "cache_ttl")
	_, err = tollgate.New(memory.New(), tollgate.WithConcurrencyRetryAfter(0))
	wantValidation(t, err, "concurrency_retry_after")

	for _, ttl := range []time.Duration{0, time.Second} {
		if _, err := tollgate.New(memory.New(), tollgate.WithCacheTTL(ttl)); err != nil {
			t.Errorf("WithCacheTTL(%v): %v", ttl, err)
		}
	}
}

func TestNamespace(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	def, adm, _ := newPair(t, s)
	if def.Namespace() != tollgate.DefaultNamespace || def.Namespace() != "default" {
		t.Errorf("Namespace() = %q, want %q", def.Namespace(), "default")
	}
	other, otherAdm, _ := newPair(t, s, tollgate.WithNamespace("tenant-b"))
	if other.Namespace() != "tenant-b" {
		t.Errorf("Namespace() = %q, want tenant-b", other.Namespace())
	}
	// Only the default namespace exists unregistered.
	if _, err := other.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 1}); !errors.Is(err, tollgate.ErrNamespaceNotFound) {
		t.Fatalf("acquire in an unregistered namespace: err = %v, want ErrNamespaceNotFound", err)
	}
	if _, err := otherAdm.RegisterNamespace(ctx, "tenant-b"); err != nil {
		t.Fatal(err)
	}
	// Namespaces sharing a store see neither each other's config nor buckets.
	if err := adm.SetLimits(ctx, tollgate.SystemScope(), tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 5)}}); err != nil {
		t.Fatal(err)
	}
	_, err := other.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 1})
	wantValidation(t, err, "limits")
	mustAcquire(t, def, "k", "api", tollgate.Consume{"rpm": 5})
	if got := availableOf(t, other, "k", "api", "rpm", tollgate.WithLimits(tollgate.PerMinute("rpm", 5))); got != 5 {
		t.Errorf("other namespace's bucket has %d, want 5", got)
	}
}

// --- Config cache -------------------------------------------------------------

func setLimits(t testing.TB, adm *tollgate.Admin, scope tollgate.Scope, limits ...tollgate.Limit) {
	t.Helper()
	if err := adm.SetLimits(context.Background(), scope, tollgate.Config{Limits: limits}); err != nil {
		t.Fatalf("SetLimits(%+v): %v", scope, err)
	}
}

// capacityIn acquires 1 rpm and returns the capacity of entity's rpm limit.
func capacityIn(t testing.TB, lim *tollgate.Limiter, key, entity string) int64 {
	t.Helper()
	le := mustAcquire(t, lim, key, "api", tollgate.Consume{"rpm": 1})
	defer le.Rollback(context.Background())
	return statusOf(t, le.Statuses(), entity, "rpm").Capacity
}

func TestCacheHitsAndMisses(t *testing.T) {
	lim, adm, fs, _ := newFaultPair(t)
	setLimits(t, adm, tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 100))
	if st := lim.Stats().Cache; st != (tollgate.CacheStats{}) {
		t.Errorf("fresh CacheStats = %+v, want zero", st)
	}
	mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 1})
	first := lim.Stats().Cache
	if first.Hits != 0 || first.Misses == 0 || first.Entries == 0 {
		t.Errorf("after the first acquire CacheStats = %+v, want misses and entries, no hits", first)
	}
	for i := 0; i < 3; i++ {
		mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 1})
	}
	st := lim.Stats().Cache
	if st.Misses != first.Misses || st.Hits == 0 || st.Entries != first.Entries {
		t.Errorf("after warm acquires CacheStats = %+v, want hits only (first %+v)", st, first)
	}
	if st.Hits != 3*first.Misses {
		t.Errorf("Hits = %d, want %d (every lookup of the first call, three times)", st.Hits, 3*first.Misses)
	}
	if n := fs.count(mGetConfigs); n != 1 {
		t.Errorf("GetConfigs calls = %d, want 1", n)
	}
	if n := fs.count(mGetEntity); n != 1 {
		t.Errorf("GetEntity calls = %d, want 1", n)
	}
	// Another resource is another resolution.
	setLimits(t, adm, tollgate.ResourceScope("db"), tollgate.PerMinute("rpm", 100))
	fs.resetCounts()
	mustAcquire(t, lim, "k", "db", tollgate.Consume{"rpm": 1})
	mustAcquire(t, lim, "k", "db", tollgate.Consume{"rpm": 1})
	if n := fs.count(mGetConfigs); n != 1 {
		t.Errorf("GetConfigs calls for a new resource = %d, want 1", n)
	}
}

func TestCacheTTLAndRemoteChanges(t *testing.T) {
	fs := newFaultStore()
	lim, adm, clk := newPair(t, frozenStore{fs}) // told of no change but its admin's: the TTL alone brings others'
	remote, _ := newAdmin(t, fs)                 // another process on the same store
	setLimits(t, adm, tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 100))
	if got := capacityIn(t, lim, "k", "k"); got != 100 {
		t.Fatalf("capacity = %d, want 100", got)
	}
	setLimits(t, remote, tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 5))

	clk.Advance(tollgate.DefaultCacheTTL - time.Millisecond)
	if got := capacityIn(t, lim, "k", "k"); got != 100 {
		t.Errorf("remote change seen before the TTL: capacity = %d, want 100", got)
	}
	clk.Advance(time.Millisecond)
	if got := capacityIn(t, lim, "k", "k"); got != 5 {
		t.Errorf("remote change not seen after the TTL: capacity = %d, want 5", got)
	}

	// A shorter TTL.
	short, clk2 := newLim(t, frozenStore{fs}, tollgate.WithCacheTTL(time.Second))
	if got := capacityIn(t, short, "k2", "k2"); got != 5 {
		t.Fatalf("capacity = %d, want 5", got)
	}
	setLimits(t, remote, tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 7))
	clk2.Advance(999 * time.Millisecond)
	if got := capacityIn(t, short, "k2", "k2"); got != 5 {
		t.Errorf("1s TTL, 999ms later: capacity = %d, want 5", got)
	}
	clk2.Advance(time.Millisecond)
	if got := capacityIn(t, short, "k2", "k2"); got != 7 {
		t.Errorf("1s TTL, 1s later: capacity = %d, want 7", got)
	}
}

// An admin's changes are in force at once in a limiter following its
// change watch, over a store whose generation tells of no change.
func TestCacheAdminWritesInvalidate(t *testing.T) {
	ctx := context.Background()
	lim, adm, _ := newPair(t, frozenStore{newFaultStore()})
	setLimits(t, adm, tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 100))
	if got := capacityIn(t, lim, "key", "key"); got != 100 {
		t.Fatalf("capacity = %d, want 100", got)
	}

	// SetLimits
	setLimits(t, adm, tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 50))
	if got := capacityIn(t, lim, "key", "key"); got != 50 {
		t.Errorf("after SetLimits: capacity = %d, want 50", got)
	}

	// CreateEntity: key was looked up (and cached) as unknown; once created
	// with a cascading parent, its acquires debit the parent at once.
	if _, err := adm.CreateEntity(ctx, tollgate.Entity{ID: "org"}); err != nil {
		t.Fatal(err)
	}
	setLimits(t, adm, tollgate.EntityScope("org", ""), tollgate.PerMinute("rpm", 30))
	if _, err := adm.CreateEntity(ctx, tollgate.Entity{ID: "key", ParentID: "org", Cascade: true}); err != nil {
		t.Fatal(err)
	}
	if got := capacityIn(t, lim, "key", "org"); got != 30 {
		t.Errorf("after CreateEntity: org capacity = %d, want 30", got)
	}

	// SetLimits at the entity level, then DeleteLimits.
	setLimits(t, adm, tollgate.EntityScope("key", "api"), tollgate.PerMinute("rpm", 20))
	if got := capacityIn(t, lim, "key", "key"); got != 20 {
		t.Errorf("after entity SetLimits: capacity = %d, want 20", got)
	}
	if err := adm.DeleteLimits(ctx, tollgate.EntityScope("key", "api")); err != nil {
		t.Fatal(err)
	}
	if got := capacityIn(t, lim, "key", "key"); got != 50 {
		t.Errorf("after DeleteLimits: capacity = %d, want 50 (resource level)", got)
	}

	// DeleteEntity: key no longer exists, so it no longer cascades.
	if err := adm.DeleteEntity(ctx, "key"); err != nil {
		t.Fatal(err)
	}
	le := mustAcquire(t, lim, "key", "api", tollgate.Consume{"rpm": 1})
	for _, s := range le.Statuses() {
		if s.Entity != "key" {
			t.Errorf("after DeleteEntity the acquire still debits %s: %+v", s.Entity, s)
		}
	}
}

func TestCacheNegativeResults(t *testing.T) {
	ctx := context.Background()
	lim, adm, fs, clk := newFaultPair(t)
	for i := 0; i < 3; i++ {
		_, err := lim.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 1})
		ve := wantValidation(t, err, "limits")
		if !strings.Contains(ve.Error(), `"k"`) || !strings.Contains(ve.Error(), `"api"`) {
			t.Errorf("no-limits error %q does not name the entity and resource", ve)
		}
	}
	if n := fs.count(mGetConfigs); n != 1 {
		t.Errorf("GetConfigs calls = %d, want 1 (the empty result is cached)", n)
	}
	if n := fs.count(mGetEntity); n != 1 {
		t.Errorf("GetEntity calls = %d, want 1 (the unknown entity is cached)", n)
	}
	if st := lim.Stats().Cache; st.Hits == 0 || st.Entries == 0 {
		t.Errorf("CacheStats = %+v, want hits on negative entries", st)
	}
	clk.Advance(tollgate.DefaultCacheTTL)
	_, err := lim.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 1})
	wantValidation(t, err, "limits")
	if n := fs.count(mGetConfigs); n != 2 {
		t.Errorf("GetConfigs calls after the TTL = %d, want 2", n)
	}
	// The admin's write replaces the negative entry at once.
	setLimits(t, adm, tollgate.SystemScope(), tollgate.PerMinute("rpm", 3))
	mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 1})
}

func TestCacheDisabled(t *testing.T) {
	lim, adm, fs, _ := newFaultPair(t, tollgate.WithCacheTTL(0))
	setLimits(t, adm, tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 100))
	remote, _ := newAdmin(t, fs)
	for i := 1; i <= 4; i++ {
		mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 1})
		if n := fs.count(mGetConfigs); n != i {
			t.Errorf("acquire %d: GetConfigs calls = %d, want %d", i, n, i)
		}
	}
	if st := lim.Stats().Cache; st.Hits != 0 || st.Entries != 0 {
		t.Errorf("CacheStats with caching disabled = %+v, want no hits and no entries", st)
	}
	setLimits(t, remote, tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 9))
	if got := capacityIn(t, lim, "k", "k"); got != 9 {
		t.Errorf("remote change not seen at once with TTL 0: capacity = %d, want 9", got)
	}
}

// Any change an admin makes drops the whole cache of the limiters
// following its watch, not only what the change concerns: a change made
// meanwhile by another process, which the limiter was not told of, is then
// read too.
func TestAdminChangeDropsTheWholeCache(t *testing.T) {
	fs := newFaultStore()
	lim, adm, _ := newPair(t, frozenStore{fs})
	remote, _ := newAdmin(t, fs)
	setLimits(t, adm, tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 100))
	capacityIn(t, lim, "k", "k")
	setLimits(t, remote, tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 4))
	if got := capacityIn(t, lim, "k", "k"); got != 100 {
		t.Fatalf("capacity = %d, want 100 (cached)", got)
	}
	before := lim.Stats().Cache
	if before.Entries == 0 {
		t.Fatalf("Stats().Cache = %+v, want entries", before)
	}
	setLimits(t, adm, tollgate.ResourceScope("db"), tollgate.PerMinute("rpm", 1)) // another resource
	if got := capacityIn(t, lim, "k", "k"); got != 4 {
		t.Errorf("capacity after the admin's change = %d, want 4", got)
	}
	if st := lim.Stats().Cache; st.Misses <= before.Misses || st.Entries > before.Entries {
		t.Errorf("Stats().Cache = %+v after the admin's change, want new misses and no more entries than %+v", st, before)
	}
}

// --- Acquire validation -------------------------------------------------------

func TestAcquireValidation(t *testing.T) {
	ctx := context.Background()
	lim, fs, _ := newFaultLim(t)
	two := tollgate.WithLimits(tollgate.PerMinute("rpm", 100), tollgate.PerMinute("tpm", 1000))
	cases := []struct {
		name, entity, resource string
		consume                tollgate.Consume
		opt                    tollgate.AcquireOption
		field                  string
	}{
		{"empty entity", "", "api", tollgate.Consume{"rpm": 1}, two, "entity"},
		{"entity starts with dash", "-k", "api", tollgate.Consume{"rpm": 1}, two, "entity"},
		{"entity with space", "a b", "api", tollgate.Consume{"rpm": 1}, two, "entity"},
		{"entity too long", strings.Repeat("k", 257), "api", tollgate.Consume{"rpm": 1}, two, "entity"},
		{"empty resource", "k", "", tollgate.Consume{"rpm": 1}, two, "resource"},
		{"resource starts with digit", "k", "4o", tollgate.Consume{"rpm": 1}, two, "resource"},
		{"reserved resource", "k", tollgate.DefaultResource, tollgate.Consume{"rpm": 1}, two, "resource"},
		{"resource too long", "k", strings.Repeat("r", 65), tollgate.Consume{"rpm": 1}, two, "resource"},
		{"nil consume", "k", "api", nil, two, "consume"},
		{"empty consume", "k", "api", tollgate.Consume{}, two, "consume"},
		{"negative amount", "k", "api", tollgate.Consume{"tpm": -1}, two, "consume.tpm"},
		{"negative with valid", "k", "api", tollgate.Consume{"rpm": 1, "tpm": -5}, two, "consume.tpm"},
		{"unknown limit", "k", "api", tollgate.Consume{"rpm": 1, "tph": 1}, two, "consume.tph"},
		{"above capacity", "k", "api", tollgate.Consume{"tpm": 1001}, two, "consume.tpm"},
		{"unrepresentable", "k", "api", tollgate.Consume{"tpm": math.MaxInt64}, two, "consume.tpm"},
		{"no limits", "k", "api", tollgate.Consume{"rpm": 1}, tollgate.WithLimits(), "limits"},
		{"duplicate limits", "k", "api", tollgate.Consume{"rpm": 1},
			tollgate.WithLimits(tollgate.PerMinute("rpm", 1), tollgate.PerHour("rpm", 10)), "limits"},
		{"zero capacity", "k", "api", tollgate.Consume{"rpm": 1},
			tollgate.WithLimits(tollgate.PerMinute("rpm", 0)), "limit.rpm.capacity"},
		{"reserved limit name", "k", "api", tollgate.Consume{"_rpm": 1},
			tollgate.WithLimits(tollgate.PerMinute("_rpm", 1)), "limit.name"},
		{"sub-ms period", "k", "api", tollgate.Consume{"r": 1},
			tollgate.WithLimits(tollgate.RateLimit("r", 1, time.Microsecond)), "limit.r.refill_period"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			le, err := lim.Acquire(ctx, c.entity, c.resource, c.consume, c.opt)
			if le != nil {
				t.Errorf("got a lease")
			}
			wantValidation(t, err, c.field)
			// The same request through Wait and Do fails the same way at once.
			_, err = lim.Wait(ctx, c.entity, c.resource, c.consume, c.opt)
			wantValidation(t, err, c.field)
			called := false
			err = lim.Do(ctx, c.entity, c.resource, c.consume, func(context.Context, *tollgate.Lease) error { called = true; return nil }, c.opt)
			wantValidation(t, err, c.field)
			if called {
				t.Errorf("Do called fn after a validation error")
			}
		})
	}
	if n := fs.count(mConsume) + fs.count(mApplyDeltas); n != 0 {
		t.Errorf("invalid acquires wrote to the store: %d Consume/ApplyDeltas calls", n)
	}
	sts, err := lim.Available(ctx, "k", "api", two)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"rpm", "tpm"} {
		if s := statusOf(t, sts, "k", name); s.Available != s.Capacity {
			t.Errorf("%s available = %d, want %d (nothing written)", name, s.Available, s.Capacity)
		}
	}
}

func TestAcquireAboveCascadeParentCapacity(t *testing.T) {
	ctx := context.Background()
	lim, adm, fs, _ := newFaultPair(t)
	mustCreate(t, adm, tollgate.Entity{ID: "org"})
	mustCreate(t, adm, tollgate.Entity{ID: "key", ParentID: "org", Cascade: true})
	setLimits(t, adm, tollgate.EntityScope("org", ""), tollgate.PerMinute("rpm", 10))
	setLimits(t, adm, tollgate.EntityScope("key", ""), tollgate.PerMinute("rpm", 100))

	_, err := lim.Acquire(ctx, "key", "api", tollgate.Consume{"rpm": 11})
	ve := wantValidation(t, err, "consume.rpm")
	if !strings.Contains(ve.Error(), `"org"`) {
		t.Errorf("error %q does not name the entity whose capacity is exceeded", ve)
	}
	if n := fs.count(mConsume); n != 0 {
		t.Errorf("Consume calls = %d, want 0", n)
	}
	// 10 fits both.
	mustAcquire(t, lim, "key", "api", tollgate.Consume{"rpm": 10})
	_, err = lim.TimeUntilAvailable(ctx, "key", "api", tollgate.Consume{"rpm": 11})
	wantValidation(t, err, "consume.rpm")
}

// --- Denials ------------------------------------------------------------------

func TestRateLimitExceededContents(t *testing.T) {
	ctx := context.Background()
	lim, fs, _ := newFaultLim(t)
	limits := tollgate.WithLimits(
		tollgate.PerMinute("rpm", 100),
		tollgate.PerMinute("tpm", 60),
		tollgate.PerHour("rph", 1000),
	)
	mustAcquire(t, lim, "k", "llm", tollgate.Consume{"rpm": 100, "tpm": 58}, limits)

	_, err := lim.Acquire(ctx, "k", "llm", tollgate.Consume{"rpm": 1, "tpm": 4}, limits)
	ex := wantExceeded(t, err)
	want := []tollgate.Status{
		{Entity: "k", Resource: "llm", Limit: "rpm", Kind: tollgate.Rate, Capacity: 100, Available: 0, Requested: 1, Exceeded: true,
			RetryAfter: 600 * time.Millisecond, RetryAfterMS: 600, Source: tollgate.SourceCall, Window: time.Minute},
		{Entity: "k", Resource: "llm", Limit: "tpm", Kind: tollgate.Rate, Capacity: 60, Available: 2, Requested: 4, Exceeded: true,
			RetryAfter: 2 * time.Second, RetryAfterMS: 2000, Source: tollgate.SourceCall, Window: time.Minute},
		{Entity: "k", Resource: "llm", Limit: "rph", Kind: tollgate.Rate, Capacity: 1000, Available: 1000, Requested: 0, Exceeded: false,
			Source: tollgate.SourceCall, Window: time.Hour},
	}
	if len(ex.Statuses) != len(want) {
		t.Fatalf("Statuses = %+v, want %+v", ex.Statuses, want)
	}
	for i := range want {
		if ex.Statuses[i] != want[i] {
			t.Errorf("Statuses[%d] = %+v, want %+v", i, ex.Statuses[i], want[i])
		}
	}
	if ex.RetryAfter != 2*time.Second {
		t.Errorf("RetryAfter = %v, want 2s (the largest violation)", ex.RetryAfter)
	}
	if v := ex.Violations(); len(v) != 2 || v[0].Limit != "rpm" || v[1].Limit != "tpm" {
		t.Errorf("Violations = %+v, want rpm and tpm", v)
	}
	if p := ex.Passed(); len(p) != 1 || p[0].Limit != "rph" {
		t.Errorf("Passed = %+v, want rph", p)
	}
	if p := ex.Primary(); p.Limit != "tpm" {
		t.Errorf("Primary = %+v, want tpm", p)
	}
	if msg := err.Error(); !strings.Contains(msg, "tpm") || !strings.Contains(msg, "2s") {
		t.Errorf("Error() = %q, want the primary limit and the retry-after", msg)
	}

	// Nothing was debited by the denial.
	sts, _ := lim.Available(ctx, "k", "llm", limits)
	if a := statusOf(t, sts, "k", "tpm").Available; a != 2 {
		t.Errorf("tpm available after denial = %d, want 2", a)
	}
	if a := statusOf(t, sts, "k", "rph").Available; a != 1000 {
		t.Errorf("rph available after denial = %d, want 1000", a)
	}

	// A single drained 100/min limit: one token comes back every 600ms.
	_, err = lim.Acquire(ctx, "k", "llm", tollgate.Consume{"rpm": 1}, limits)
	if ex := wantExceeded(t, err); ex.RetryAfter != 600*time.Millisecond || len(ex.Violations()) != 1 {
		t.Errorf("rpm only: RetryAfter = %v, violations %+v; want 600ms, one", ex.RetryAfter, ex.Violations())
	}
	if n := fs.count(mApplyDeltas); n != 0 {
		t.Errorf("ApplyDeltas calls = %d, want 0", n)
	}
}

func TestRateLimitExceededRetryAfterIsExact(t *testing.T) {
	ctx := context.Background()
	lim, clk := newLim(t, memory.New())
	rpm := tollgate.WithLimits(tollgate.PerMinute("rpm", 100))
	mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 100}, rpm)
	clk.Advance(250 * time.Millisecond) // 0.41666 tokens accrued
	_, err := lim.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 1}, rpm)
	ex := wantExceeded(t, err)
	if ex.RetryAfter != 350*time.Millisecond {
		t.Fatalf("RetryAfter = %v, want 350ms", ex.RetryAfter)
	}
	clk.Advance(ex.RetryAfter - time.Millisecond)
	_, err = lim.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 1}, rpm)
	if ex := wantExceeded(t, err); ex.RetryAfter != time.Millisecond {
		t.Errorf("1ms early: RetryAfter = %v, want 1ms", ex.RetryAfter)
	}
	clk.Advance(time.Millisecond)
	mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 1}, rpm)
}

// A concurrency slot's RetryAfter is the time until the earliest expiry
// among the leases holding it (WaitsExpiry); once they have expired,
// awaiting a reconciler, it is the limiter's hint (WaitsRelease).
func TestRateLimitExceededConcurrency(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		opts []tollgate.Option
		hint time.Duration
	}{
		{nil, tollgate.DefaultConcurrencyRetryAfter},
		{[]tollgate.Option{tollgate.WithConcurrencyRetryAfter(250 * time.Millisecond)}, 250 * time.Millisecond},
	} {
		lim, clk := newLim(t, memory.New(), tc.opts...)
		limits := tollgate.WithLimits(tollgate.ConcurrencyLimit("inflight", 2), tollgate.PerMinute("rpm", 100))
		one := tollgate.Consume{"inflight": 1, "rpm": 1}
		a := mustAcquire(t, lim, "k", "jobs", one, limits, tollgate.WithLeaseTTL(time.Minute))
		clk.Advance(10 * time.Second)
		mustAcquire(t, lim, "k", "jobs", one, limits, tollgate.WithLeaseTTL(30*time.Second))
		clk.Advance(5 * time.Second)
		steps := []struct {
			name    string
			advance time.Duration
			want    time.Duration
			waits   string
		}{
			{"the earliest expiry, 25s away", 0, 25 * time.Second, tollgate.WaitsExpiry},
			{"a holder expired, awaiting a reconciler: the hint", 30 * time.Second, tc.hint, tollgate.WaitsRelease},
			{"both expired: the hint", time.Hour, tc.hint, tollgate.WaitsRelease},
		}
		for _, st := range steps {
			clk.Advance(st.advance)
			_, err := lim.Acquire(ctx, "k", "jobs", one, limits)
			ex := wantExceeded(t, err)
			if ex.RetryAfter != st.want || ex.Waits() != st.waits {
				t.Errorf("%s: RetryAfter = %v, Waits %q; want %v, %q", st.name, ex.RetryAfter, ex.Waits(), st.want, st.waits)
			}
			s := statusOf(t, ex.Statuses, "k", "inflight")
			want := tollgate.Status{Entity: "k", Resource: "jobs", Limit: "inflight", Kind: tollgate.Concurrency,
				Capacity: 2, Available: 0, Requested: 1, Exceeded: true, RetryAfter: st.want, RetryAfterMS: st.want.Milliseconds(), Waits: st.waits,
				Source: tollgate.SourceCall}
			if s != want {
				t.Errorf("%s: inflight status = %+v, want %+v", st.name, s, want)
			}
			if v := ex.Violations(); len(v) != 1 {
				t.Errorf("%s: Violations = %+v, want inflight only", st.name, v)
			}
		}
		// Ending a lease returns its slot.
		if err := a.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, lim, "k", "jobs", one, limits)
	}

	// A rate violation longer than the concurrency hint decides.
	lim, _ := newLim(t, memory.New())
	limits := tollgate.WithLimits(tollgate.ConcurrencyLimit("inflight", 1), tollgate.PerMinute("rpm", 1))
	mustAcquire(t, lim, "k", "jobs", tollgate.Consume{"inflight": 1, "rpm": 1}, limits)
	_, err := lim.Acquire(ctx, "k", "jobs", tollgate.Consume{"inflight": 1, "rpm": 1}, limits)
	if ex := wantExceeded(t, err); ex.RetryAfter != time.Minute || len(ex.Violations()) != 2 {
		t.Errorf("RetryAfter = %v, violations %d; want 1m, 2", ex.RetryAfter, len(ex.Violations()))
	}
}

func TestCascadeDenialNamesBlockingEntity(t *testing.T) {
	ctx := context.Background()
	lim, adm, _ := newPair(t, memory.New())
	mustCreate(t, adm, tollgate.Entity{ID: "org"})
	mustCreate(t, adm, tollgate.Entity{ID: "proj", ParentID: "org", Cascade: true})
	mustCreate(t, adm, tollgate.Entity{ID: "key", ParentID: "proj", Cascade: true})
	mustCreate(t, adm, tollgate.Entity{ID: "key2", ParentID: "proj", Cascade: true})
	setLimits(t, adm, tollgate.EntityScope("org", ""), tollgate.PerMinute("rpm", 3))
	setLimits(t, adm, tollgate.EntityScope("proj", ""), tollgate.PerMinute("rpm", 50))
	setLimits(t, adm, tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 10))

	le := mustAcquire(t, lim, "key", "api", tollgate.Consume{"rpm": 2})
	if got := le.Consumed()["rpm"]; got != 2 {
		t.Errorf("Consumed rpm = %d, want 2 (what was asked, debited at each of three levels)", got)
	}
	mustAcquire(t, lim, "key2", "api", tollgate.Consume{"rpm": 1})
	_, err := lim.Acquire(ctx, "key", "api", tollgate.Consume{"rpm": 1})
	ex := wantExceeded(t, err)
	if len(ex.Statuses) != 3 {
		t.Fatalf("Statuses = %+v, want key, proj and org", ex.Statuses)
	}
	for i, id := range []string{"key", "proj", "org"} {
		if ex.Statuses[i].Entity != id {
			t.Errorf("Statuses[%d].Entity = %q, want %q (child first)", i, ex.Statuses[i].Entity, id)
		}
	}
	v := ex.Violations()
	if len(v) != 1 || v[0].Entity != "org" || v[0].RetryAfter != 20*time.Second {
		t.Errorf("Violations = %+v, want org with 20s", v)
	}
	if ex.Primary().Entity != "org" || ex.RetryAfter != 20*time.Second {
		t.Errorf("Primary = %+v, RetryAfter %v; want org, 20s", ex.Primary(), ex.RetryAfter)
	}
	// All or nothing: the denial debited neither key nor proj.
	if got := availableOf(t, lim, "key", "api", "rpm"); got != 8 {
		t.Errorf("key available = %d, want 8", got)
	}
	if got := availableOf(t, lim, "proj", "api", "rpm"); got != 47 {
		t.Errorf("proj available = %d, want 47", got)
	}
}

// --- Wait ---------------------------------------------------------------------

type waitResult struct {
	le  *tollgate.Lease
	err error
}

// startWait runs lim.Wait in a goroutine; done is closed when it returns.
func startWait(ctx context.Context, lim *tollgate.Limiter, c tollgate.Consume, opts ...tollgate.AcquireOption) (<-chan waitResult, chan struct{}) {
	res := make(chan waitResult, 1)
	done := make(chan struct{})
	go func() {
		le, err := lim.Wait(ctx, "k", "api", c, opts...)
		res <- waitResult{le, err}
		close(done)
	}()
	return res, done
}

// sleepingFor waits until the Wait goroutine sleeps and returns the duration
// it asked for.
func sleepingFor(t *testing.T, clk interface {
	BlockUntilWaiters(int, <-chan struct{}) bool
	NextDeadline() (time.Time, bool)
	Now() time.Time
}, res <-chan waitResult, done chan struct{}) time.Duration {
	t.Helper()
	if !clk.BlockUntilWaiters(1, done) {
		r := <-res
		t.Fatalf("Wait returned without sleeping: lease %s, err %v", descLease(r.le), r.err)
	}
	at, _ := clk.NextDeadline()
	return at.Sub(clk.Now())
}

func TestWaitSleepsExactlyRetryAfter(t *testing.T) {
	ctx := context.Background()
	lim, fs, clk := newFaultLim(t)
	hold := mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 100}, rpm100)
	fs.resetCounts()

	res, done := startWait(ctx, lim, tollgate.Consume{"rpm": 1}, rpm100)
	if d := sleepingFor(t, clk, res, done); d != 600*time.Millisecond {
		t.Errorf("first sleep = %v, want 600ms (the RetryAfter)", d)
	}
	if n := fs.count(mConsume); n != 1 {
		t.Errorf("Consume calls before the first wake-up = %d, want 1", n)
	}
	// While Wait sleeps, more is consumed: the first wake-up finds the bucket
	// at zero and Wait must sleep again, exactly as long.
	if err := hold.Adjust(ctx, tollgate.Consume{"rpm": 1}); err != nil {
		t.Fatal(err)
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(600 * time.Millisecond)
	if d := sleepingFor(t, clk, res, done); d != 600*time.Millisecond {
		t.Errorf("second sleep = %v, want 600ms", d)
	}
	if n := fs.count(mConsume); n != 2 {
		t.Errorf("Consume calls after one wake-up = %d, want 2", n)
	}
	clk.Advance(599 * time.Millisecond)
	if n := fs.count(mConsume); n != 2 || clk.Waiters() != 1 {
		t.Errorf("1ms before the deadline: %d Consume calls, %d waiters; want 2, 1", n, clk.Waiters())
	}
	clk.Advance(time.Millisecond)
	r := <-res
	if r.err != nil || r.le == nil || r.le.Degraded() {
		t.Fatalf("Wait: lease %s, err %v; want a grant", descLease(r.le), r.err)
	}
	if n := fs.count(mConsume); n != 3 {
		t.Errorf("Consume calls = %d, want 3 (one per attempt)", n)
	}
	if got := statusOf(t, r.le.Statuses(), "k", "rpm").Available; got != 0 {
		t.Errorf("available after the grant = %d, want 0", got)
	}
}

func TestWaitGrantsAtOnceWhenAvailable(t *testing.T) {
	lim, clk := newLim(t, memory.New())
	le, err := lim.Wait(context.Background(), "k", "api", tollgate.Consume{"rpm": 1}, rpm100)
	if err != nil || le == nil {
		t.Fatalf("Wait: %v", err)
	}
	if clk.Waiters() != 0 {
		t.Errorf("Wait left %d timers", clk.Waiters())
	}
}

// A waiter on a full slot looks again after SlotPoll (its holder's expiry
// is minutes away), and the holder's release wakes it at once: granted
// without the clock moving.
func TestWaitSlotWokenByRelease(t *testing.T) {
	ctx := context.Background()
	lim, fs, clk := newFaultLim(t, tollgate.WithConcurrencyRetryAfter(40*time.Millisecond))
	one := tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", 1))
	held := mustAcquire(t, lim, "k", "api", tollgate.Consume{"slots": 1}, one)
	fs.resetCounts()
	res, done := startWait(ctx, lim, tollgate.Consume{"slots": 1}, one)
	if d := sleepingFor(t, clk, res, done); d != tollgate.SlotPoll {
		t.Errorf("sleep = %v, want %v, not the 40ms hint", d, tollgate.SlotPoll)
	}
	if err := held.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var r waitResult
	select {
	case r = <-res:
	case <-time.After(10 * time.Second): // a hang, not a timing: the clock does not move
		t.Fatal("the release did not wake the waiter")
	}
	if r.err != nil {
		t.Fatalf("Wait: %v", r.err)
	}
	if n := fs.count(mConsume); n != 2 {
		t.Errorf("Consume calls = %d, want 2", n)
	}
	if n := fs.count(mListLeases); n != 1 {
		t.Errorf("ListLeases calls = %d, want 1: one per refusal by the slot alone", n)
	}
}

// A waiter on a slot that stays full for N seconds costs about N calls,
// whatever the configured hint: about one a second.
func TestWaitSlotPollsAboutOnceASecond(t *testing.T) {
	const n = 30
	lim, fs, clk := newFaultLim(t, tollgate.WithConcurrencyRetryAfter(10*time.Millisecond))
	one := tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", 1))
	mustAcquire(t, lim, "k", "api", tollgate.Consume{"slots": 1}, one) // expires in 5 minutes
	fs.resetCounts()
	ctx, cancel := context.WithCancel(context.Background())
	res, done := startWait(ctx, lim, tollgate.Consume{"slots": 1}, one)
	end := clk.Now().Add(n * time.Second)
	for clk.BlockUntilWaiters(1, done) {
		next, _ := clk.NextDeadline()
		if next.After(end) {
			break
		}
		clk.Set(next)
	}
	cancel()
	if r := <-res; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Wait: %v, want context.Canceled", r.err)
	}
	if calls := fs.count(mConsume); calls < n || calls > n+1 {
		t.Errorf("%d Consume calls in %d s on a full slot, want about one a second", calls, n)
	}
}

// A holder's expiry sooner than SlotPoll is when the waiter looks again.
func TestWaitSlotLooksAgainAtTheExpiry(t *testing.T) {
	ctx := context.Background()
	lim, clk := newLim(t, memory.New())
	one := tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", 1))
	mustAcquire(t, lim, "k", "api", tollgate.Consume{"slots": 1}, one, tollgate.WithLeaseTTL(time.Second))
	clk.Advance(600 * time.Millisecond)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res, done := startWait(ctx, lim, tollgate.Consume{"slots": 1}, one)
	if d := sleepingFor(t, clk, res, done); d != 400*time.Millisecond {
		t.Errorf("sleep = %v, want 400ms, until the holder's expiry", d)
	}
}

func TestWaitCancelledWhileSleeping(t *testing.T) {
	lim, fs, clk := newFaultLim(t)
	mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 100}, rpm100)
	fs.resetCounts()
	ctx, cancel := context.WithCancel(context.Background())
	res, done := startWait(ctx, lim, tollgate.Consume{"rpm": 1}, rpm100)
	sleepingFor(t, clk, res, done)
	cancel()
	r := <-res
	if !errors.Is(r.err, context.Canceled) || r.le != nil {
		t.Errorf("Wait after cancel: lease %s, err %v; want context.Canceled", descLease(r.le), r.err)
	}
	if n := fs.count(mConsume); n != 1 {
		t.Errorf("Consume calls = %d, want 1", n)
	}
}

func TestWaitDeadlineSoonerThanRetryAfter(t *testing.T) {
	lim, fs, clk := newFaultLim(t)
	rpd := tollgate.WithLimits(tollgate.PerDay("rpd", 1))
	mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpd": 1}, rpd)
	fs.resetCounts()
	// The retry-after is a day; the context allows an hour.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	res, done := startWait(ctx, lim, tollgate.Consume{"rpd": 1}, rpd)
	if clk.BlockUntilWaiters(1, done) {
		cancel()
		<-res
		t.Fatalf("Wait went to sleep although its deadline comes before the retry-after")
	}
	r := <-res
	ex := wantExceeded(t, r.err)
	if ex.RetryAfter != 24*time.Hour {
		t.Errorf("RetryAfter = %v, want 24h", ex.RetryAfter)
	}
	if n := fs.count(mConsume); n != 1 {
		t.Errorf("Consume calls = %d, want 1", n)
	}
}

func TestWaitValidationErrorAtOnce(t *testing.T) {
	lim, fs, clk := newFaultLim(t)
	res, done := startWait(context.Background(), lim, tollgate.Consume{"rpm": 101}, rpm100)
	if clk.BlockUntilWaiters(1, done) {
		t.Fatalf("Wait sleeps on a request larger than the capacity")
	}
	r := <-res
	wantValidation(t, r.err, "consume.rpm")
	if n := fs.count(mConsume); n != 0 {
		t.Errorf("Consume calls = %d, want 0", n)
	}
}

func TestWaitUnavailableAtOnce(t *testing.T) {
	lim, fs, clk := newFaultLim(t)
	fs.failOn(errConnReset, mConsume)
	res, done := startWait(context.Background(), lim, tollgate.Consume{"rpm": 1}, rpm100)
	if clk.BlockUntilWaiters(1, done) {
		t.Fatalf("Wait sleeps on a store failure")
	}
	if r := <-res; !errors.Is(r.err, tollgate.ErrUnavailable) {
		t.Errorf("Wait: %v, want ErrUnavailable", r.err)
	}
}

// --- Do -----------------------------------------------------------------------

func TestDoCommitsOnSuccess(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	err := lim.Do(ctx, "k", "api", tollgate.Consume{"rpm": 1}, func(ctx context.Context, le *tollgate.Lease) error {
		if le.Entity() != "k" || le.Resource() != "api" {
			t.Errorf("lease for %s/%s", le.Entity(), le.Resource())
		}
		return le.Adjust(ctx, tollgate.Consume{"rpm": 4})
	}, rpm100)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if got := availableOf(t, lim, "k", "api", "rpm", rpm100); got != 95 {
		t.Errorf("available = %d, want 95 (1 + 4 committed)", got)
	}
}

func TestDoRollsBackOnError(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	errVendor := errors.New("vendor said no")
	err := lim.Do(ctx, "k", "api", tollgate.Consume{"rpm": 10}, func(ctx context.Context, le *tollgate.Lease) error {
		if got := availableOf(t, lim, "k", "api", "rpm", rpm100); got != 90 {
			t.Errorf("inside fn available = %d, want 90 (written on enter)", got)
		}
		_ = le.Adjust(ctx, tollgate.Consume{"rpm": 5})
		return fmt.Errorf("calling vendor: %w", errVendor)
	}, rpm100)
	if !errors.Is(err, errVendor) {
		t.Errorf("Do: %v, want the fn's error", err)
	}
	if got := availableOf(t, lim, "k", "api", "rpm", rpm100); got != 100 {
		t.Errorf("available after rollback = %d, want 100", got)
	}
}

func TestDoRollsBackOnPanic(t *testing.T) {
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the fn's panic value", r)
			}
		}()
		_ = lim.Do(ctx, "k", "api", tollgate.Consume{"rpm": 7}, func(context.Context, *tollgate.Lease) error {
			panic("boom")
		}, rpm100)
		t.Errorf("Do returned instead of panicking")
	}()
	if got := availableOf(t, lim, "k", "api", "rpm", rpm100); got != 100 {
		t.Errorf("available after panic = %d, want 100", got)
	}
}

func TestDoRollsBackWithCancelledContext(t *testing.T) {
	lim, _ := newLim(t, memory.New())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := lim.Do(ctx, "k", "api", tollgate.Consume{"rpm": 3}, func(ctx context.Context, le *tollgate.Lease) error {
		cancel()
		return ctx.Err()
	}, rpm100)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Do: %v, want context.Canceled", err)
	}
	if got := availableOf(t, lim, "k", "api", "rpm", rpm100); got != 100 {
		t.Errorf("available = %d, want 100 (rolled back despite the cancelled ctx)", got)
	}
}

// If fn succeeds but the caller's context was cancelled meanwhile, Do must
// not lose the end of the lease: its doc says "a cancelled call still returns
// what it took".
func TestDoCommitsWithCancelledContext(t *testing.T) {
	// BUG (see report): Do (acquire.go) commits with the caller's ctx
	// ("return le.Commit(ctx)") after setting finished = true. When ctx was
	// cancelled during fn, Commit fails in the store with context.Canceled,
	// the lease stays open, and the deferred rollback is skipped: the
	// concurrency slot is never returned and the adjustment never written.
	lim, _ := newLim(t, memory.New())
	limits := tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", 1), tollgate.PerMinute("rpm", 100))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := lim.Do(ctx, "k", "api", tollgate.Consume{"slots": 1, "rpm": 1}, func(ctx context.Context, le *tollgate.Lease) error {
		if err := le.Adjust(ctx, tollgate.Consume{"rpm": 4}); err != nil {
			return err
		}
		cancel() // e.g. the client disconnected after the work was done
		return nil
	}, limits)
	t.Logf("Do returned %v", err)
	if got := availableOf(t, lim, "k", "api", "slots", limits); got != 1 {
		t.Errorf("slots available after Do = %d, want 1 (the lease's slot returned)", got)
	}
	if got := availableOf(t, lim, "k", "api", "rpm", limits); got != 95 && got != 100 {
		t.Errorf("rpm available after Do = %d, want 95 (committed) or 100 (rolled back)", got)
	}
}

func TestDoDeniedDoesNotCallFn(t *testing.T) {
	lim, _ := newLim(t, memory.New())
	mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 100}, rpm100)
	err := lim.Do(context.Background(), "k", "api", tollgate.Consume{"rpm": 1}, func(context.Context, *tollgate.Lease) error {
		t.Errorf("fn called after a denial")
		return nil
	}, rpm100)
	wantExceeded(t, err)
}

// --- Available and TimeUntilAvailable -----------------------------------------

func TestTimeUntilAvailable(t *testing.T) {
	ctx := context.Background()
	lim, fs, clk := newFaultLim(t)
	tua := func(c tollgate.Consume, opts ...tollgate.AcquireOption) time.Duration {
		t.Helper()
		d, err := lim.TimeUntilAvailable(ctx, "k", "api", c, opts...)
		if err != nil {
			t.Fatalf("TimeUntilAvailable(%v): %v", c, err)
		}
		return d
	}
	if d := tua(tollgate.Consume{"rpm": 100}, rpm100); d != 0 {
		t.Errorf("fresh bucket: %v, want 0", d)
	}
	mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 97}, rpm100)
	fs.resetCounts()
	if d := tua(tollgate.Consume{"rpm": 3}, rpm100); d != 0 {
		t.Errorf("3 of 3 available: %v, want 0", d)
	}
	if d := tua(tollgate.Consume{"rpm": 5}, rpm100); d != 1200*time.Millisecond {
		t.Errorf("2 short: %v, want 1.2s", d)
	}
	if d := tua(tollgate.Consume{"rpm": 100}, rpm100); d != 58200*time.Millisecond {
		t.Errorf("97 short: %v, want 58.2s", d)
	}
	if n := fs.count(mConsume) + fs.count(mApplyDeltas); n != 0 {
		t.Errorf("TimeUntilAvailable wrote: %d Consume/ApplyDeltas calls", n)
	}
	// Exact: 1ms before, the acquire is denied; at the time, granted.
	clk.Advance(1200*time.Millisecond - time.Millisecond)
	_, err := lim.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 5}, rpm100)
	wantExceeded(t, err)
	clk.Advance(time.Millisecond)
	mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 5}, rpm100)

	// Debt is repaid first.
	le := mustAcquire(t, lim, "k2", "api", tollgate.Consume{"rpm": 100}, rpm100)
	_ = le.Adjust(ctx, tollgate.Consume{"rpm": 50})
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := lim.TimeUntilAvailable(ctx, "k2", "api", tollgate.Consume{"rpm": 1}, rpm100)
	if err != nil || d != 51*600*time.Millisecond {
		t.Errorf("in debt of 50: %v, %v; want 30.6s", d, err)
	}

	// Concurrency limits report their holders' earliest expiry, or the
	// hint once it has passed; a full reserved limit when to look again.
	slots := tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", 1), tollgate.ReservedLimit("clusters", 1))
	mustAcquire(t, lim, "k3", "api", tollgate.Consume{"slots": 1}, slots)
	d, err = lim.TimeUntilAvailable(ctx, "k3", "api", tollgate.Consume{"slots": 1}, slots)
	if err != nil || d != tollgate.DefaultLeaseTTL {
		t.Errorf("exhausted concurrency: %v, %v; want %v, the holder's expiry", d, err, tollgate.DefaultLeaseTTL)
	}
	mustAcquire(t, lim, "k3", "api", tollgate.Consume{"clusters": 1}, slots, tollgate.WithReservation("j-1"))
	d, err = lim.TimeUntilAvailable(ctx, "k3", "api", tollgate.Consume{"clusters": 1}, slots, tollgate.WithReservation("j-2"))
	if err != nil || d != tollgate.SlotPoll {
		t.Errorf("full reserved limit: %v, %v; want %v", d, err, tollgate.SlotPoll)
	}
	clk.Advance(tollgate.DefaultLeaseTTL)
	d, err = lim.TimeUntilAvailable(ctx, "k3", "api", tollgate.Consume{"slots": 1}, slots)
	if err != nil || d != tollgate.DefaultConcurrencyRetryAfter {
		t.Errorf("exhausted concurrency, the holder expired: %v, %v; want %v", d, err, tollgate.DefaultConcurrencyRetryAfter)
	}

	// Validation.
	_, err = lim.TimeUntilAvailable(ctx, "k", "api", nil, rpm100)
	wantValidation(t, err, "consume")
	_, err = lim.TimeUntilAvailable(ctx, "k", "api", tollgate.Consume{"rpm": 101}, rpm100)
	wantValidation(t, err, "consume.rpm")
	_, err = lim.TimeUntilAvailable(ctx, "k", "api", tollgate.Consume{"x": 1}, rpm100)
	wantValidation(t, err, "consume.x")
}

func TestTimeUntilAvailableCascade(t *testing.T) {
	ctx := context.Background()
	lim, adm, fs, _ := newFaultPair(t)
	mustCreate(t, adm, tollgate.Entity{ID: "org"})
	mustCreate(t, adm, tollgate.Entity{ID: "key", ParentID: "org", Cascade: true})
	setLimits(t, adm, tollgate.EntityScope("org", ""), tollgate.PerMinute("rpm", 10))
	setLimits(t, adm, tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 100))
	mustAcquire(t, lim, "key", "api", tollgate.Consume{"rpm": 10})
	fs.resetCounts()

	d, err := lim.TimeUntilAvailable(ctx, "key", "api", tollgate.Consume{"rpm": 2})
	if err != nil || d != 12*time.Second {
		t.Errorf("org drained: %v, %v; want 12s (the org refills 1 per 6s)", d, err)
	}
	sts, err := lim.Available(ctx, "key", "api")
	if err != nil {
		t.Fatal(err)
	}
	want := []tollgate.Status{
		{Entity: "key", Resource: "api", Limit: "rpm", Kind: tollgate.Rate, Capacity: 100, Available: 90, Source: "resource", Window: time.Minute},
		{Entity: "org", Resource: "api", Limit: "rpm", Kind: tollgate.Rate, Capacity: 10, Available: 0, Source: "entity-default", Window: time.Minute},
	}
	if len(sts) != len(want) || sts[0] != want[0] || sts[1] != want[1] {
		t.Errorf("Available = %+v, want %+v", sts, want)
	}
	if n := fs.count(mConsume) + fs.count(mApplyDeltas); n != 0 {
		t.Errorf("Available/TimeUntilAvailable wrote: %d calls", n)
	}
}

func TestAvailable(t *testing.T) {
	ctx := context.Background()
	lim, fs, clk := newFaultLim(t)
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 100), tollgate.ConcurrencyLimit("slots", 3))
	// A bucket never used is reported full, and reading does not create it.
	sts, err := lim.Available(ctx, "k", "api", limits)
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != 2 || sts[0].Available != 100 || sts[1].Available != 3 || sts[1].Kind != tollgate.Concurrency {
		t.Errorf("fresh Available = %+v", sts)
	}
	le := mustAcquire(t, lim, "k", "api", tollgate.Consume{"rpm": 100, "slots": 2}, limits)
	_ = le.Adjust(ctx, tollgate.Consume{"rpm": 30})
	if err := le.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := availableOf(t, lim, "k", "api", "rpm", limits); got != -30 {
		t.Errorf("rpm in debt = %d, want -30", got)
	}
	if got := availableOf(t, lim, "k", "api", "slots", limits); got != 3 {
		t.Errorf("slots after commit = %d, want 3", got)
	}
	clk.Advance(19 * time.Second) // 31.66 tokens
	if got := availableOf(t, lim, "k", "api", "rpm", limits); got != 1 {
		t.Errorf("rpm after 19s = %d, want 1", got)
	}
	fs.resetCounts()
	for i := 0; i < 3; i++ {
		availableOf(t, lim, "k", "api", "rpm", limits)
	}
	if n := fs.count(mConsume) + fs.count(mApplyDeltas); n != 0 {
		t.Errorf("Available wrote: %d calls", n)
	}
	_, err = lim.Available(ctx, "k", "4o", limits)
	wantValidation(t, err, "resource")
	_, err = lim.Available(ctx, "k", "nothing-stored")
	wantValidation(t, err, "limits")
}

// --- Allocations --------------------------------------------------------------

// wantAtMostOneAlloc warms the path up, then requires a whole Acquire+Commit
// to allocate at most once (the lease handle).
func wantAtMostOneAlloc(t *testing.T, lim *tollgate.Limiter, entity string, c tollgate.Consume, opts ...tollgate.AcquireOption) {
	t.Helper()
	ctx := context.Background()
	mustAcquire(t, lim, entity, "api", c, opts...).Commit(ctx)
	allocs := testing.AllocsPerRun(200, func() {
		le, err := lim.Acquire(ctx, entity, "api", c, opts...)
		if err != nil {
			panic(err)
		}
		if err := le.Commit(ctx); err != nil {
			panic(err)
		}
	})
	if allocs > 1 {
		t.Errorf("Acquire+Commit allocates %.1f times, want <= 1", allocs)
	}
}

func TestAcquireCommitAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race (sync.Pool drops items)")
	}
	ctx := context.Background()
	big := tollgate.WithLimits(tollgate.PerMinute("rpm", 1_000_000_000))
	c := tollgate.Consume{"rpm": 1}

	t.Run("explicit limits", func(t *testing.T) {
		lim, _ := newLim(t, memory.New())
		wantAtMostOneAlloc(t, lim, "k", c, big)
	})
	// Three rate limits: a concurrency token would make the lease durable,
	// and its record is allocated (see TestDurableAcquireAllocs).
	t.Run("three limits and a cascade", func(t *testing.T) {
		lim, adm, _ := newPair(t, memory.New())
		setLimits(t, adm, tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 1_000_000_000),
			tollgate.PerMinute("tpm", 1_000_000_000), tollgate.PerSecond("rps", 1_000_000_000), tollgate.ConcurrencyLimit("inflight", 1_000_000))
		for _, e := range []tollgate.Entity{{ID: "org"}, {ID: "key", ParentID: "org", Cascade: true}} {
			if _, err := adm.CreateEntity(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		c3 := tollgate.Consume{"rpm": 1, "tpm": 100, "rps": 1}
		wantAtMostOneAlloc(t, lim, "key", c3)
	})
	t.Run("stored config", func(t *testing.T) {
		lim, adm, _ := newPair(t, memory.New())
		setLimits(t, adm, tollgate.ResourceScope("api"), tollgate.PerMinute("rpm", 1_000_000_000))
		wantAtMostOneAlloc(t, lim, "k", c)
	})
}

// A durable lease allocates its record (once, for up to two buckets and
// four limits; the memory store keeps it as it is), its id, its tombstone
// when it ends (model.TombstoneKeep), and a lease handle every eight
// acquires: a bound, so that the cost does not creep up unnoticed.
func TestDurableAcquireAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race (sync.Pool drops items)")
	}
	ctx := context.Background()
	lim, _ := newLim(t, memory.New())
	opt := tollgate.WithLimits(tollgate.PerMinute("rpm", 1_000_000_000), tollgate.ConcurrencyLimit("inflight", 1_000_000))
	c := tollgate.Consume{"rpm": 1, "inflight": 1}
	mustAcquire(t, lim, "k", "api", c, opt).Commit(ctx)
	allocs := testing.AllocsPerRun(200, func() {
		le, err := lim.Acquire(ctx, "k", "api", c, opt)
		if err != nil {
			panic(err)
		}
		if err := le.Commit(ctx); err != nil {
			panic(err)
		}
	})
	t.Logf("durable Acquire+Commit: %.1f allocations", allocs)
	if allocs > 3.2 {
		t.Errorf("durable Acquire+Commit allocates %.1f times, want <= 3.2", allocs)
	}
}
