package limitertest

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/storetest"
)

func limiterCases() []testCase {
	return []testCase{
		{"CapacityThenExactRefill", testLimiterCapacityThenRefill},
		{"WriteOnEnter", testLimiterWriteOnEnter},
		{"AdjustDebt", testLimiterAdjustDebt},
		{"AdjustRefund", testLimiterAdjustRefund},
		{"RollbackRestores", testLimiterRollbackRestores},
		{"ConcurrencyLimit", testLimiterConcurrencyLimit},
		{"StoredLimitResolution", testLimiterResolution},
		{"StoredLimitChangesAdopted", testLimiterLimitChanges},
		{"CancelledContext", testLimiterCancelledContext},
		{"Reservations", testLimiterReservations},
		{"ReserveAudited", testLimiterReserveAudited},
		{"ReleaseAudited", testLimiterReleaseAudited},
		{"ReservationExpiryAudited", testLimiterReservationExpiryAudited},
		{"LeasesListed", testLimiterLeasesListed},
		{"Saturation", testLimiterSaturation},
		{"SaturationProperty", testLimiterSaturationProperty},
		{"SlotRetryAfter", testLimiterSlotRetryAfter},
		{"ShadowLimits", testLimiterShadow},
		{"Versions", testLimiterVersions},
		{"DecisionsAndAlerts", testLimiterDecisionsAndAlerts},
		{"ReservationDecisionsCountedOnce", testLimiterReservationDecisions},
		{"CalendarQuota", testLimiterCalendar},
		{"IdempotentRetryOfTheLastToken", testLimiterIdempotentLastToken},
		{"RetriesAcrossReplicas", testLimiterRetriesAcrossReplicas},
		{"AbandonedAcquires", testLimiterAbandonedAcquires},
		{"ChangesReachAnotherProcess", testLimiterChangesReachAnotherProcess},
		{"CalendarQuotaPerCall", testLimiterCalendarPerCall},
		{"DenyCacheExact", testLimiterDenyCacheExact},
		{"DenyCacheQuota", testLimiterDenyCacheQuota},
	}
}

// Reservations through the limiter: an id reserved once, idempotent for its
// holder and a conflict for anyone else, even when the reserved limit is
// full (the store's answer to a taken lease id must not hide behind a
// denial), listed, found and released by id alone.
func testLimiterReservations(t *testing.T, e *env) {
	lim := e.limiter()
	limits := tollgate.WithLimits(tollgate.ReservedLimit("clusters", 2), tollgate.PerMinute("rpm", 100))
	reserve := func(entity, id string) error {
		_, err := lim.Acquire(e.ctx, entity, "emr", tollgate.Consume{"clusters": 1, "rpm": 1}, limits, tollgate.WithReservation(id))
		return err
	}
	steps := []struct {
		name, entity, id string
		release          bool
		want             error // nil: granted
	}{
		{"reserve a", "team", "j-a", false, nil},
		{"reserve b", "team", "j-b", false, nil},
		{"c denied", "team", "j-c", false, tollgate.ErrRateLimited},
		{"a again, full", "team", "j-a", false, nil},
		{"a by another entity", "other", "j-a", false, tollgate.ErrReservationConflict},
		{"release a", "", "j-a", true, nil},
		{"release a again", "", "j-a", true, tollgate.ErrLeaseNotFound},
		{"c now", "team", "j-c", false, nil},
	}
	for _, s := range steps {
		var err error
		if s.release {
			err = lim.Release(e.ctx, s.id)
		} else {
			err = reserve(s.entity, s.id)
		}
		if (s.want == nil) != (err == nil) || s.want != nil && !errors.Is(err, s.want) {
			t.Fatalf("%s: %v, want %v", s.name, err, s.want)
		}
	}
	// Two reservations held, three acquires granted (the idempotent one
	// debited nothing), and nothing debited for the other entity.
	e.wantAvailable(lim, "team", "emr", "clusters", 0, limits)
	e.wantAvailable(lim, "team", "emr", "rpm", 97, limits)
	e.wantAvailable(lim, "other", "emr", "rpm", 100, limits)
	rs, next, err := e.admin().Reservations(e.ctx, "team", "emr", "", 10)
	if err != nil || next != "" || len(rs) != 2 || rs[0].ID != "j-b" || rs[1].ID != "j-c" {
		t.Errorf("Reservations = %+v, %q, %v; want j-b and j-c", rs, next, err)
	}
	if r, err := e.admin().Reservation(e.ctx, "j-c"); err != nil || r.Entity != "team" || r.Resource != "emr" || !r.Expires.IsZero() {
		t.Errorf("Reservation(j-c) = %+v, %v", r, err)
	}
}

// Open durable leases acquired through the limiter, listed by the Admin
// with what each holds, page by page, by entity and resource, without the
// reservations; an ended lease is gone from the list.
func testLimiterLeasesListed(t *testing.T, e *env) {
	lim := e.limiter()
	limits := tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", 10), tollgate.ReservedLimit("clusters", 10))
	var leases []*tollgate.Lease
	for _, entity := range []string{"key-1", "key-1", "key-2"} {
		le, err := lim.Acquire(e.ctx, entity, "jobs", tollgate.Consume{"slots": 2}, limits)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, le)
	}
	if _, err := lim.Acquire(e.ctx, "key-1", "jobs", tollgate.Consume{"clusters": 1}, limits, tollgate.WithReservation("j-1")); err != nil {
		t.Fatal(err)
	}
	var all []tollgate.LeaseInfo
	for after := ""; ; {
		page, next, err := e.admin().Leases(e.ctx, "", "", after, 2)
		if err != nil || len(page) > 2 {
			t.Fatalf("Leases after %q: %d, %v", after, len(page), err)
		}
		all = append(all, page...)
		if next == "" {
			break
		}
		after = next
	}
	if len(all) != 3 {
		t.Fatalf("listed %+v, want the 3 leases", all)
	}
	for i, l := range all {
		if l.Consumed["slots"] != 2 || l.Expires.IsZero() || i > 0 && all[i-1].ID >= l.ID {
			t.Errorf("lease %d: %+v, want 2 slots, an expiry, ids in order", i, l)
		}
	}
	e.commit(leases[2])
	if got, _, err := e.admin().Leases(e.ctx, "key-2", "jobs", "", 10); err != nil || len(got) != 0 {
		t.Errorf("key-2's leases after its commit: %+v, %v", got, err)
	}
	if got, _, err := e.admin().Leases(e.ctx, "key-1", "", "", 10); err != nil || len(got) != 2 {
		t.Errorf("key-1's leases: %+v, %v; want 2", got, err)
	}
}

func testLimiterCapacityThenRefill(t *testing.T, e *env) {
	lim := e.limiter()
	opt := tollgate.WithLimits(tollgate.PerMinute("rpm", 100))
	one := tollgate.Consume{"rpm": 1}

	for i := range 100 {
		le, err := lim.Acquire(e.ctx, "key-1", "api", one, opt)
		if err != nil {
			t.Fatalf("acquire %d of 100: %v", i+1, err)
		}
		e.commit(le)
	}
	ex := e.denied(lim, "key-1", "api", one, opt)
	if ex.RetryAfter != 600*time.Millisecond {
		t.Errorf("RetryAfter = %v, want 600ms", ex.RetryAfter)
	}
	p := ex.Primary()
	want := model.Status{Entity: "key-1", Resource: "api", Limit: "rpm", Kind: model.Rate, Capacity: 100,
		Available: 0, Requested: 1, Exceeded: true, RetryAfter: 600 * time.Millisecond, RetryAfterMS: 600, Source: model.SourceCall, Window: time.Minute}
	if p != want {
		t.Errorf("Primary = %+v, want %+v", p, want)
	}
	if len(ex.Statuses) != 1 {
		t.Errorf("Statuses = %+v, want one", ex.Statuses)
	}
	if d, err := lim.TimeUntilAvailable(e.ctx, "key-1", "api", one, opt); err != nil || d != 600*time.Millisecond {
		t.Errorf("TimeUntilAvailable = %v, %v; want 600ms", d, err)
	}

	// 599 ms give 998 millitokens and a remainder: 1 ms short.
	e.Advance(599)
	if ex := e.denied(lim, "key-1", "api", one, opt); ex.RetryAfter != time.Millisecond {
		t.Errorf("RetryAfter after 599ms = %v, want 1ms", ex.RetryAfter)
	}
	e.Advance(1)
	e.commit(e.acquire(lim, "key-1", "api", one, opt))
	if ex := e.denied(lim, "key-1", "api", one, opt); ex.RetryAfter != 600*time.Millisecond {
		t.Errorf("RetryAfter = %v, want 600ms", ex.RetryAfter)
	}

	// A minute refills exactly the capacity, no more.
	e.Advance(60_000)
	e.wantAvailable(lim, "key-1", "api", "rpm", 100, opt)
	n := 0
	for ; n < 200; n++ {
		le, err := lim.Acquire(e.ctx, "key-1", "api", one, opt)
		if err != nil {
			if !errors.Is(err, tollgate.ErrRateLimited) {
				t.Fatal(err)
			}
			break
		}
		e.commit(le)
	}
	if n != 100 {
		t.Errorf("%d grants after a minute, want 100", n)
	}
}

func testLimiterWriteOnEnter(t *testing.T, e *env) {
	lim, other := e.limiter(), e.limiter()
	opt := tollgate.WithLimits(tollgate.PerMinute("rpm", 100), tollgate.PerMinute("tpm", 10_000))
	le := e.acquire(lim, "key-1", "gpt", tollgate.Consume{"rpm": 1, "tpm": 500}, opt)

	// Before Commit, this limiter and another one on the same store see it.
	for _, l := range []*tollgate.Limiter{lim, other} {
		e.wantAvailable(l, "key-1", "gpt", "rpm", 99, opt)
		e.wantAvailable(l, "key-1", "gpt", "tpm", 9_500, opt)
	}
	rpm, _ := e.Limit(storetest.Key("key-1", "gpt"), "rpm")
	tpm, _ := e.Limit(storetest.Key("key-1", "gpt"), "tpm")
	if rpm.State.Tokens != 99_000 || tpm.State.Tokens != 9_500_000 {
		t.Errorf("stored rpm %d tpm %d, want 99000 9500000", rpm.State.Tokens, tpm.State.Tokens)
	}
	st := le.Statuses()
	if s := status(t, st, "key-1", "tpm"); s.Available != 9_500 || s.Requested != 500 || s.Exceeded {
		t.Errorf("lease status tpm = %+v", s)
	}
	e.commit(le)
	e.wantAvailable(other, "key-1", "gpt", "rpm", 99, opt)
	e.wantAvailable(other, "key-1", "gpt", "tpm", 9_500, opt)
	if err := le.Commit(e.ctx); !errors.Is(err, tollgate.ErrLeaseClosed) {
		t.Errorf("second Commit = %v, want ErrLeaseClosed", err)
	}
	if err := le.Rollback(e.ctx); !errors.Is(err, tollgate.ErrLeaseClosed) {
		t.Errorf("Rollback after Commit = %v, want ErrLeaseClosed", err)
	}
	if err := le.Adjust(e.ctx, tollgate.Consume{"tpm": 1}); !errors.Is(err, tollgate.ErrLeaseClosed) {
		t.Errorf("Adjust after Commit = %v, want ErrLeaseClosed", err)
	}
	e.wantAvailable(other, "key-1", "gpt", "tpm", 9_500, opt)
}

func testLimiterAdjustDebt(t *testing.T, e *env) {
	lim := e.limiter()
	opt := tollgate.WithLimits(tollgate.PerMinute("tpm", 1_000))

	le := e.acquire(lim, "key-1", "gpt", tollgate.Consume{"tpm": 500}, opt)
	e.wantAvailable(lim, "key-1", "gpt", "tpm", 500, opt)
	if err := le.Adjust(e.ctx, tollgate.Consume{"tpm": 1_500}); err != nil {
		t.Fatal(err)
	}
	if got := le.Consumed(); !maps.Equal(got, tollgate.Consume{"tpm": 2_000}) {
		t.Errorf("Consumed = %v, want tpm 2000", got)
	}
	e.wantAvailable(lim, "key-1", "gpt", "tpm", 500, opt) // adjustments are written by Commit
	e.commit(le)
	e.wantAvailable(lim, "key-1", "gpt", "tpm", -1_000, opt)
	e.WantStored(storetest.Key("key-1", "gpt"), "tpm", bucket.State{Tokens: -1_000_000})

	// In debt, even 1 token waits until the debt is repaid: 1001 tokens at
	// 1000 per minute.
	if ex := e.denied(lim, "key-1", "gpt", tollgate.Consume{"tpm": 1}, opt); ex.RetryAfter != 60_060*time.Millisecond {
		t.Errorf("RetryAfter in debt = %v, want 1m0.06s", ex.RetryAfter)
	}
	e.Advance(59_999)
	e.wantAvailable(lim, "key-1", "gpt", "tpm", -1, opt) // -16.67 millitokens floor to -1
	e.Advance(1)
	e.wantAvailable(lim, "key-1", "gpt", "tpm", 0, opt)
	e.denied(lim, "key-1", "gpt", tollgate.Consume{"tpm": 1}, opt)
	e.Advance(59)
	e.wantAvailable(lim, "key-1", "gpt", "tpm", 0, opt)
	e.Advance(1)
	e.wantAvailable(lim, "key-1", "gpt", "tpm", 1, opt)
	e.commit(e.acquire(lim, "key-1", "gpt", tollgate.Consume{"tpm": 1}, opt))
	e.wantAvailable(lim, "key-1", "gpt", "tpm", 0, opt)
}

func testLimiterAdjustRefund(t *testing.T, e *env) {
	lim := e.limiter()
	opt := tollgate.WithLimits(tollgate.PerMinute("rpm", 10), tollgate.PerMinute("tpm", 1_000))
	le := e.acquire(lim, "key-1", "gpt", tollgate.Consume{"rpm": 1, "tpm": 800}, opt)
	if err := le.Adjust(e.ctx, tollgate.Consume{"tpm": -500}); err != nil {
		t.Fatal(err)
	}
	if err := le.Adjust(e.ctx, tollgate.Consume{"tpm": 200}); err != nil {
		t.Fatal(err)
	}
	if got := le.Consumed(); !maps.Equal(got, tollgate.Consume{"rpm": 1, "tpm": 500}) {
		t.Errorf("Consumed = %v, want rpm 1 tpm 500", got)
	}
	if err := le.Adjust(e.ctx, tollgate.Consume{"nope": 1}); !errors.Is(err, tollgate.ErrInvalid) {
		t.Errorf("Adjust of an unknown limit = %v, want ErrInvalid", err)
	}
	e.commit(le)
	e.wantAvailable(lim, "key-1", "gpt", "tpm", 500, opt)
	e.wantAvailable(lim, "key-1", "gpt", "rpm", 9, opt)

	// A lease gives back at most what it took; a refund landing on a
	// bucket refilled in the meantime is clamped to the capacity.
	le = e.acquire(lim, "key-1", "gpt", tollgate.Consume{"tpm": 100}, opt)
	if err := le.Adjust(e.ctx, tollgate.Consume{"tpm": -101}); !errors.Is(err, tollgate.ErrInvalid) {
		t.Errorf("Adjust below zero net = %v, want ErrInvalid", err)
	}
	e.Advance(60_000)
	if err := le.Adjust(e.ctx, tollgate.Consume{"tpm": -100}); err != nil {
		t.Fatal(err)
	}
	e.commit(le)
	e.wantAvailable(lim, "key-1", "gpt", "tpm", 1_000, opt)
	e.commit(e.acquire(lim, "key-1", "gpt", tollgate.Consume{"tpm": 1_000}, opt))
	e.denied(lim, "key-1", "gpt", tollgate.Consume{"tpm": 1}, opt)
}

// testLimiterRollbackRestores checks that Rollback gives back exactly what the
// lease took, in every bucket of a cascade, leaving the stored records as
// they were before the acquire (the clock is frozen).
func testLimiterRollbackRestores(t *testing.T, e *env) {
	lim := e.limiter()
	for _, ent := range []tollgate.Entity{{ID: "org"}, {ID: "proj", ParentID: "org", Cascade: true}, {ID: "key", ParentID: "proj", Cascade: true}} {
		if _, err := e.admin().CreateEntity(e.ctx, ent); err != nil {
			t.Fatal(err)
		}
	}
	opt := tollgate.WithLimits(tollgate.PerMinute("rpm", 100), tollgate.PerMinute("tpm", 10_000).WithBurst(12_000),
		tollgate.ConcurrencyLimit("inflight", 5))
	// Bring the buckets to partly used states with remainders.
	e.commit(e.acquire(lim, "proj", "gpt", tollgate.Consume{"rpm": 3, "tpm": 2_000}, opt))
	e.commit(e.acquire(lim, "key", "gpt", tollgate.Consume{"rpm": 1, "tpm": 1_000, "inflight": 0}, opt))
	e.Advance(7)
	held := e.acquire(lim, "key", "gpt", tollgate.Consume{"inflight": 2}, opt)
	e.Advance(13)
	keys := []store.BucketKey{storetest.Key("key", "gpt"), storetest.Key("proj", "gpt"), storetest.Key("org", "gpt")}
	e.commit(e.acquire(lim, "key", "gpt", tollgate.Consume{"rpm": 0}, opt)) // refill to now
	before := e.Read(keys...)
	avBefore, err := lim.Available(e.ctx, "key", "gpt", opt)
	if err != nil {
		t.Fatal(err)
	}

	le := e.acquire(lim, "key", "gpt", tollgate.Consume{"rpm": 1, "tpm": 700, "inflight": 1}, opt)
	if got := le.Consumed(); !maps.Equal(got, tollgate.Consume{"rpm": 1, "tpm": 700, "inflight": 1}) {
		t.Errorf("Consumed over 3 levels = %v, want what was asked, once", got)
	}
	if err := le.Adjust(e.ctx, tollgate.Consume{"tpm": 300}); err != nil {
		t.Fatal(err)
	}
	if got := e.available(lim, "key", "gpt", "org", "tpm", opt); got != status(t, avBefore, "org", "tpm").Available-700 {
		t.Errorf("org tpm during the lease = %d, want %d", got, status(t, avBefore, "org", "tpm").Available-700)
	}
	e.rollback(le)

	after := e.Read(keys...)
	for i, k := range keys {
		if !reflect.DeepEqual(normalize(before[i]), normalize(after[i])) {
			t.Errorf("bucket %v after rollback = %+v, want %+v", k, after[i], before[i])
		}
	}
	avAfter, err := lim.Available(e.ctx, "key", "gpt", opt)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(avBefore, avAfter) {
		t.Errorf("Available after rollback = %+v\nwant %+v", avAfter, avBefore)
	}
	if err := le.Rollback(e.ctx); !errors.Is(err, tollgate.ErrLeaseClosed) {
		t.Errorf("second Rollback = %v, want ErrLeaseClosed", err)
	}
	e.rollback(held)
	for _, id := range []string{"key", "proj", "org"} {
		if got := e.available(lim, "key", "gpt", id, "inflight", opt); got != 5 {
			t.Errorf("%s inflight after all leases = %d, want 5", id, got)
		}
	}
}

// normalized is a record with its limits keyed by name, so that records
// compare equal whatever order a backend keeps the limits in.
type normalized struct {
	Refilled int64
	Limits   map[string]store.LimitState
}

func normalize(r *store.Record) *normalized {
	if r == nil {
		return nil
	}
	n := &normalized{Refilled: r.Refilled, Limits: make(map[string]store.LimitState)}
	for _, l := range r.Limits {
		n.Limits[l.Name] = l
	}
	return n
}

func testLimiterConcurrencyLimit(t *testing.T, e *env) {
	lim := e.limiter(tollgate.WithConcurrencyRetryAfter(250 * time.Millisecond))
	opt := tollgate.WithLimits(tollgate.ConcurrencyLimit("inflight", 3))
	one := tollgate.Consume{"inflight": 1}

	var leases []*tollgate.Lease
	for range 3 {
		leases = append(leases, e.acquire(lim, "job", "emr", one, opt))
	}
	// The slots come back at the latest when their leases expire.
	ex := e.denied(lim, "job", "emr", one, opt)
	if ex.RetryAfter != tollgate.DefaultLeaseTTL || ex.Waits() != tollgate.WaitsExpiry {
		t.Errorf("RetryAfter of a concurrency denial = %v, %q; want %v, the holders' expiry", ex.RetryAfter, ex.Waits(), tollgate.DefaultLeaseTTL)
	}
	if p := ex.Primary(); p.Kind != model.Concurrency || p.Available != 0 || p.Capacity != 3 {
		t.Errorf("Primary = %+v", p)
	}
	// Time does not return slots; once their leases have expired (no
	// reconciler runs here), only the hint is left.
	e.Advance(3_600_000)
	if ex := e.denied(lim, "job", "emr", one, opt); ex.RetryAfter != 250*time.Millisecond || ex.Waits() != tollgate.WaitsRelease {
		t.Errorf("RetryAfter, the holders expired = %v, %q; want the 250ms hint", ex.RetryAfter, ex.Waits())
	}

	// Concurrency tokens are held for the whole lease: no adjustments.
	if err := leases[0].Adjust(e.ctx, tollgate.Consume{"inflight": 2}); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("Adjust of a concurrency limit: err = %v, want ErrInvalid", err)
	}
	// Commit returns a slot.
	e.commit(leases[0])
	e.wantAvailable(lim, "job", "emr", "inflight", 1, opt)
	leases[0] = e.acquire(lim, "job", "emr", one, opt)
	e.denied(lim, "job", "emr", one, opt)
	// Rollback returns one too.
	e.rollback(leases[1])
	leases[1] = e.acquire(lim, "job", "emr", one, opt)
	e.denied(lim, "job", "emr", one, opt)

	for i, le := range leases {
		if i%2 == 0 {
			e.commit(le)
		} else {
			e.rollback(le)
		}
	}
	e.wantAvailable(lim, "job", "emr", "inflight", 3, opt)
	e.WantStored(storetest.Key("job", "emr"), "inflight", bucket.State{Tokens: 3_000})
	// A lease of 3 at once fits; 4 is more than the capacity, never grantable.
	e.commit(e.acquire(lim, "job", "emr", tollgate.Consume{"inflight": 3}, opt))
	if _, err := lim.Acquire(e.ctx, "job", "emr", tollgate.Consume{"inflight": 4}, opt); !errors.Is(err, tollgate.ErrInvalid) {
		t.Errorf("Acquire above capacity = %v, want ErrInvalid", err)
	}
	e.wantAvailable(lim, "job", "emr", "inflight", 3, opt)
}

func testLimiterCancelledContext(t *testing.T, e *env) {
	lim := e.limiter()
	opt := tollgate.WithLimits(tollgate.PerMinute("rpm", 10))
	e.commit(e.acquire(lim, "e1", "api", tollgate.Consume{"rpm": 1}, opt))
	le := e.acquire(lim, "e1", "api", tollgate.Consume{"rpm": 2}, opt)

	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if le2, err := lim.Acquire(ctx, "e1", "api", tollgate.Consume{"rpm": 1}, opt); !errors.Is(err, context.Canceled) || le2 != nil {
		t.Errorf("Acquire with a cancelled context = %v, %v; want context.Canceled", le2, err)
	}
	if err := le.Rollback(ctx); err == nil {
		t.Errorf("Rollback with a cancelled context succeeded")
	}
	e.wantAvailable(lim, "e1", "api", "rpm", 7, opt)
	// The lease stays open and can be rolled back later.
	e.rollback(le)
	e.wantAvailable(lim, "e1", "api", "rpm", 9, opt)
}
