package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Durable leases (store.Leases): a record is written with its grant and
// only then, and every ending deletes it and gives back what it held,
// together, exactly once.
func leaseCases() []testCase {
	return []testCase{
		{"RecordWrittenIffGranted", testLeaseRecordIffGranted},
		{"ExistingIDDebitsNothing", testLeaseExistingID},
		{"CommitGivesConcurrencyBack", testLeaseCommit},
		{"RollbackGivesEverythingBack", testLeaseRollback},
		{"PendingAdjustmentsOnCommit", testLeasePending},
		{"UpdateIsVersioned", testLeaseUpdateVersioned},
		{"EndingIsVersioned", testLeaseEndVersioned},
		{"ExpiredByIsRespected", testLeaseExpiredBy},
		{"CascadeEndsEveryBucket", testLeaseCascade},
		{"EndedOnceUnderRace", testLeaseEndRace},
		{"AuditEventWithEnding", testLeaseAudit},
		{"AuditEventWithGrant", testLeaseEventWithGrant},
		{"AuditEventNotWhenRefused", testLeaseEventRefused},
		{"AuditEventNotWhenIDExists", testLeaseEventExistingID},
		{"AuditEventNeedsLease", testLeaseEventNeedsLease},
		{"List", testLeaseList},
		{"NamespacesApart", testLeaseNamespaces},
		{"PurgeRemovesLeases", testLeasePurge},
		{"BoundUnderExpiry", testLeaseBoundUnderExpiry},
		{"TombstoneSaysHowItEnded", testLeaseTombstone},
		{"EndingWithoutKeepDeletes", testLeaseEndingDeletes},
		{"TombstoneRefusesAReusedID", testLeaseTombstoneReusedID},
		{"ReusedIDBeforeRefusal", testLeaseReusedIDBeforeRefusal},
		{"BornEnded", testLeaseBornEnded},
		{"ReconcilerLeavesTombstone", testLeaseExpiredTombstone},
	}
}

// leaseID returns a lease id unique to the case.
func leaseID(n int) string { return fmt.Sprintf("%032x", n+1) }

// slot is a bucket request for one concurrency token of "inflight" (capacity
// cp tokens) and, unchecked, a rate limit "rpm" of 100/min.
func slot(k store.BucketKey, cp int64) store.BucketRequest {
	return breq(k, checked("inflight", conc(cp*1000), 1000), unchecked("rpm", rate(100_000, 100_000, 60_000)))
}

// consumeLease runs Consume with a lease record for the request's grant.
func (e *Env) consumeLease(id string, expires int64, now int64, buckets ...store.BucketRequest) (bool, *store.LeaseRecord, error) {
	req := request(now, buckets...)
	rec := store.NewLeaseRecord(id, "storetest", req, expires)
	req.Lease = rec
	ok, err := e.s.Consume(e.ctx, e.ns, req)
	return ok, rec, err
}

// grantLease runs consumeLease and fails the case unless it is granted.
func (e *Env) grantLease(id string, expires int64, now int64, buckets ...store.BucketRequest) *store.LeaseRecord {
	e.t.Helper()
	ok, rec, err := e.consumeLease(id, expires, now, buckets...)
	if err != nil || !ok {
		e.t.Fatalf("Consume with lease %s = %v, %v; want granted", id, ok, err)
	}
	return rec
}

func (e *Env) getLease(id string) (store.LeaseRecord, error) {
	return e.s.GetLease(e.ctx, e.ns, id)
}

func (e *Env) endLease(rec *store.LeaseRecord, end store.LeaseEnd) error {
	return e.s.EndLease(e.ctx, e.ns, store.LeaseEnding{ID: rec.ID, Version: rec.Version, Deltas: rec.EndDeltas(end)})
}

func (e *Env) wantNoLease(id string) {
	e.t.Helper()
	if rec, err := e.getLease(id); !errors.Is(err, model.ErrLeaseNotFound) {
		e.t.Errorf("GetLease(%s) = %+v, %v; want ErrLeaseNotFound", id, rec, err)
	}
}

func testLeaseRecordIffGranted(t *testing.T, e *Env) {
	k := Key("job", "emr")
	rec := e.grantLease(leaseID(0), T0+60_000, T0, slot(k, 1))
	got, err := e.getLease(rec.ID)
	if err != nil {
		t.Fatalf("GetLease: %v", err)
	}
	if !reflect.DeepEqual(got, *rec) {
		t.Errorf("GetLease = %+v\nwant %+v", got, *rec)
	}
	ok, _, err := e.consumeLease(leaseID(1), T0+60_000, T0, slot(k, 1))
	if ok || err != nil {
		t.Fatalf("second lease on a capacity of 1 = %v, %v; want denied", ok, err)
	}
	e.wantNoLease(leaseID(1))
	e.WantStored(k, "inflight", bucket.State{})
}

func testLeaseExistingID(t *testing.T, e *Env) {
	k := Key("job", "emr")
	rec := e.grantLease(leaseID(0), T0+60_000, T0, slot(k, 3))
	ok, _, err := e.consumeLease(rec.ID, T0+90_000, T0, slot(k, 3))
	if ok || !errors.Is(err, model.ErrLeaseExists) {
		t.Fatalf("Consume with a taken lease id = %v, %v; want ErrLeaseExists", ok, err)
	}
	e.WantStored(k, "inflight", bucket.State{Tokens: 2000})
	if got, _ := e.getLease(rec.ID); got.Expires != T0+60_000 {
		t.Errorf("the existing record changed: expires %+d", got.Expires-T0)
	}
}

func testLeaseCommit(t *testing.T, e *Env) {
	k := Key("job", "emr")
	req := breq(k, checked("inflight", conc(2000), 1000), checked("rpm", rate(100_000, 100_000, 60_000), 1000))
	rec := e.grantLease(leaseID(0), T0+60_000, T0, req)
	e.WantStored(k, "inflight", bucket.State{Tokens: 1000})
	if err := e.endLease(rec, store.Commit); err != nil {
		t.Fatalf("EndLease: %v", err)
	}
	e.WantStored(k, "inflight", bucket.State{Tokens: 2000})
	e.WantStored(k, "rpm", bucket.State{Tokens: 99_000})
	e.wantNoLease(rec.ID)
	if err := e.endLease(rec, store.Commit); !errors.Is(err, model.ErrLeaseNotFound) {
		t.Errorf("second EndLease = %v, want ErrLeaseNotFound", err)
	}
	e.WantStored(k, "inflight", bucket.State{Tokens: 2000})
}

func testLeaseRollback(t *testing.T, e *Env) {
	k := Key("job", "emr")
	req := breq(k, checked("inflight", conc(2000), 1000), checked("rpm", rate(100_000, 100_000, 60_000), 5000))
	rec := e.grantLease(leaseID(0), T0+60_000, T0, req)
	if err := e.endLease(rec, store.Rollback); err != nil {
		t.Fatalf("EndLease: %v", err)
	}
	e.WantStored(k, "inflight", bucket.State{Tokens: 2000})
	e.WantStored(k, "rpm", bucket.State{Tokens: 100_000})
	e.wantNoLease(rec.ID)
}

func testLeasePending(t *testing.T, e *Env) {
	k := Key("job", "llm")
	req := breq(k, checked("inflight", conc(2000), 1000), checked("tpm", rate(100_000, 100_000, 60_000), 10_000))
	rec := e.grantLease(leaseID(0), T0+60_000, T0, req)
	up := rec.Clone()
	up.Version++
	up.Pending = []store.LeaseDelta{{Limit: "tpm", Amount: 25_000}}
	if err := e.s.UpdateLease(e.ctx, e.ns, up); err != nil {
		t.Fatalf("UpdateLease: %v", err)
	}
	got, err := e.getLease(rec.ID)
	if err != nil || !reflect.DeepEqual(got, up) {
		t.Fatalf("GetLease after update = %+v, %v; want %+v", got, err, up)
	}
	e.WantStored(k, "tpm", bucket.State{Tokens: 90_000}) // pending is not written yet
	if err := e.endLease(&got, store.Commit); err != nil {
		t.Fatalf("EndLease: %v", err)
	}
	e.WantStored(k, "tpm", bucket.State{Tokens: 65_000})
	e.WantStored(k, "inflight", bucket.State{Tokens: 2000})
}

func testLeaseUpdateVersioned(t *testing.T, e *Env) {
	rec := e.grantLease(leaseID(0), T0+60_000, T0, slot(Key("job", "emr"), 1))
	ls := e.s
	for _, v := range []int64{1, 3} { // stored is 1: an update must carry 2
		up := rec.Clone()
		up.Version, up.Expires = v, T0+1
		if err := ls.UpdateLease(e.ctx, e.ns, up); !errors.Is(err, model.ErrLeaseConflict) {
			t.Errorf("UpdateLease with version %d over 1 = %v, want ErrLeaseConflict", v, err)
		}
	}
	missing := rec.Clone()
	missing.ID, missing.Version = leaseID(9), 2
	if err := ls.UpdateLease(e.ctx, e.ns, missing); !errors.Is(err, model.ErrLeaseNotFound) {
		t.Errorf("UpdateLease of no record = %v, want ErrLeaseNotFound", err)
	}
	if got, _ := e.getLease(rec.ID); got.Version != 1 || got.Expires != T0+60_000 {
		t.Errorf("record after refused updates: version %d, expires %+d; want 1, +60000", got.Version, got.Expires-T0)
	}
}

func testLeaseEndVersioned(t *testing.T, e *Env) {
	k := Key("job", "emr")
	rec := e.grantLease(leaseID(0), T0+60_000, T0, slot(k, 1))
	up := rec.Clone()
	up.Version = 2
	if err := e.s.UpdateLease(e.ctx, e.ns, up); err != nil {
		t.Fatalf("UpdateLease: %v", err)
	}
	if err := e.endLease(rec, store.Commit); !errors.Is(err, model.ErrLeaseConflict) {
		t.Fatalf("EndLease with the stale version = %v, want ErrLeaseConflict", err)
	}
	e.WantStored(k, "inflight", bucket.State{})
	if err := e.endLease(&up, store.Commit); err != nil {
		t.Fatalf("EndLease with the current version: %v", err)
	}
	e.WantStored(k, "inflight", bucket.State{Tokens: 1000})
}

func testLeaseExpiredBy(t *testing.T, e *Env) {
	k := Key("job", "emr")
	rec := e.grantLease(leaseID(0), T0+60_000, T0, slot(k, 2))
	never := e.grantLease(leaseID(1), 0, T0, slot(k, 2))
	ls := e.s
	expire := func(r *store.LeaseRecord, by int64) error {
		return ls.EndLease(e.ctx, e.ns, store.LeaseEnding{ID: r.ID, Version: r.Version, ExpiredBy: by, Deltas: r.EndDeltas(store.Expire)})
	}
	if err := expire(rec, T0+59_999); !errors.Is(err, model.ErrLeaseConflict) {
		t.Errorf("expiring a lease before its expiry = %v, want ErrLeaseConflict", err)
	}
	if err := expire(never, T0+1_000_000_000); !errors.Is(err, model.ErrLeaseConflict) {
		t.Errorf("expiring a lease without expiry = %v, want ErrLeaseConflict", err)
	}
	e.WantStored(k, "inflight", bucket.State{})
	if err := expire(rec, T0+60_000); err != nil {
		t.Fatalf("expiring at its expiry: %v", err)
	}
	e.WantStored(k, "inflight", bucket.State{Tokens: 1000})
}

func testLeaseCascade(t *testing.T, e *Env) {
	child, parent := Key("key-1", "gpu"), Key("org-1", "gpu")
	rec := e.grantLease(leaseID(0), T0+60_000, T0, slot(child, 1), slot(parent, 2))
	if len(rec.Buckets) != 2 {
		t.Fatalf("record has %d buckets, want 2", len(rec.Buckets))
	}
	e.WantStored(parent, "inflight", bucket.State{Tokens: 1000})
	if err := e.endLease(rec, store.Commit); err != nil {
		t.Fatalf("EndLease: %v", err)
	}
	e.WantStored(child, "inflight", bucket.State{Tokens: 1000})
	e.WantStored(parent, "inflight", bucket.State{Tokens: 2000})
}

// Many enders race for one lease (its holder, servers, reconcilers): one
// wins, and the tokens come back once.
func testLeaseEndRace(t *testing.T, e *Env) {
	const leases, enders = 200, 8
	k := Key("job", "emr")
	recs := make([]*store.LeaseRecord, leases)
	for i := range recs {
		recs[i] = e.grantLease(leaseID(i), T0+1, T0, slot(k, leases))
	}
	e.WantStored(k, "inflight", bucket.State{})
	var won, lost atomic.Int64
	ls := e.s
	start := make(chan struct{})
	go func() { close(start) }()
	Parallel(enders, func(g int) {
		<-start
		for _, rec := range recs {
			end := store.LeaseEnding{ID: rec.ID, Version: rec.Version, Deltas: rec.EndDeltas(store.Commit)}
			if g%2 == 1 {
				end.ExpiredBy, end.Deltas = T0+2, rec.EndDeltas(store.Expire)
			}
			switch err := ls.EndLease(e.ctx, e.ns, end); {
			case err == nil:
				won.Add(1)
			case errors.Is(err, model.ErrLeaseNotFound):
				lost.Add(1)
			default:
				t.Errorf("EndLease: %v", err)
			}
		}
	})
	if won.Load() != leases || lost.Load() != leases*(enders-1) {
		t.Errorf("%d endings won, %d lost; want %d and %d", won.Load(), lost.Load(), leases, leases*(enders-1))
	}
	e.WantStored(k, "inflight", bucket.State{Tokens: leases * 1000})
}

func testLeaseAudit(t *testing.T, e *Env) {
	k := Key("job", "emr")
	rec := e.grantLease(leaseID(0), T0+1, T0, slot(k, 1))
	ev := e.event(model.ActionLeaseExpired, "job", "emr")
	err := e.s.EndLease(e.ctx, e.ns, store.LeaseEnding{ID: rec.ID, Version: 1, ExpiredBy: T0 + 1, Deltas: rec.EndDeltas(store.Expire), Event: &ev})
	if err != nil {
		t.Fatalf("EndLease: %v", err)
	}
	evs := e.audit("job")
	if len(evs) != 1 || !sameEvent(evs[0], ev) {
		t.Errorf("audit of job = %+v, want the ending's event", evs)
	}
	// A refused ending writes no event.
	ev2 := e.event(model.ActionLeaseExpired, "job", "emr")
	err = e.s.EndLease(e.ctx, e.ns, store.LeaseEnding{ID: rec.ID, Version: 1, Event: &ev2})
	if !errors.Is(err, model.ErrLeaseNotFound) {
		t.Fatalf("second EndLease = %v, want ErrLeaseNotFound", err)
	}
	if evs := e.audit("job"); len(evs) != 1 {
		t.Errorf("audit after a refused ending has %d events, want 1", len(evs))
	}
}

func testLeaseList(t *testing.T, e *Env) {
	ls := e.s
	var all []string
	for i := range 7 {
		entity := "a"
		if i%2 == 1 {
			entity = "b"
		}
		rec := e.grantLease(leaseID(i), T0+int64(i)*1000, T0, slot(Key(entity, "gpu"), 10))
		all = append(all, rec.ID)
	}
	e.grantLease(leaseID(7), T0+500, T0, slot(Key("a", "cpu"), 10))
	all = append(all, leaseID(7))
	slices.Sort(all)
	list := func(q store.LeaseQuery) []string {
		t.Helper()
		var ids []string
		for {
			recs, next, err := ls.ListLeases(e.ctx, e.ns, q)
			if err != nil {
				t.Fatalf("ListLeases(%+v): %v", q, err)
			}
			if len(recs) > q.Limit {
				t.Fatalf("ListLeases returned %d records, limit %d", len(recs), q.Limit)
			}
			for _, r := range recs {
				ids = append(ids, r.ID)
			}
			if next == "" {
				return ids
			}
			q.After = next
		}
	}
	cases := []struct {
		name string
		q    store.LeaseQuery
		want []string
	}{
		{"all", store.LeaseQuery{Limit: 3}, all},
		{"entity", store.LeaseQuery{Entity: "b", Limit: 2}, []string{leaseID(1), leaseID(3), leaseID(5)}},
		{"bucket", store.LeaseQuery{Entity: "a", Resource: "cpu", Limit: 10}, []string{leaseID(7)}},
		{"expired", store.LeaseQuery{ExpiredBy: T0 + 2000, Limit: 1}, []string{leaseID(0), leaseID(1), leaseID(2), leaseID(7)}},
	}
	for _, c := range cases {
		if got := list(c.q); !slices.Equal(got, c.want) {
			t.Errorf("%s: ListLeases = %v, want %v", c.name, got, c.want)
		}
	}
	for _, q := range []store.LeaseQuery{{Limit: 0}, {Limit: store.MaxLeasePage + 1}, {Resource: "gpu", Limit: 1}} {
		if _, _, err := ls.ListLeases(e.ctx, e.ns, q); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("ListLeases(%+v) = %v, want ErrInvalid", q, err)
		}
	}
}

func testLeaseNamespaces(t *testing.T, e *Env) {
	rec := e.grantLease(leaseID(0), T0+1, T0, slot(Key("job", "emr"), 1))
	other := newNamespace(t)
	ls := e.s
	if _, err := ls.GetLease(e.ctx, other, rec.ID); !errors.Is(err, model.ErrLeaseNotFound) {
		t.Errorf("GetLease in another namespace = %v, want ErrLeaseNotFound", err)
	}
	err := ls.EndLease(e.ctx, other, store.LeaseEnding{ID: rec.ID, Version: 1, Deltas: rec.EndDeltas(store.Commit)})
	if !errors.Is(err, model.ErrLeaseNotFound) {
		t.Errorf("EndLease in another namespace = %v, want ErrLeaseNotFound", err)
	}
	if recs, _, err := ls.ListLeases(e.ctx, other, store.LeaseQuery{Limit: 10}); err != nil || len(recs) != 0 {
		t.Errorf("ListLeases in another namespace = %d records, %v; want none", len(recs), err)
	}
	if _, err := e.getLease(rec.ID); err != nil {
		t.Errorf("GetLease in its own namespace: %v", err)
	}
}

func testLeasePurge(t *testing.T, e *Env) {
	e.RegisterNamespace()
	rec := e.grantLease(leaseID(0), T0+1, T0, slot(Key("job", "emr"), 1))
	if err := e.s.SetNamespaceDeleted(e.ctx, e.ns, e.clk.Now()); err != nil {
		t.Fatalf("SetNamespaceDeleted: %v", err)
	}
	if err := e.s.PurgeNamespace(e.ctx, e.ns, nil); err != nil {
		t.Fatalf("PurgeNamespace: %v", err)
	}
	e.wantNoLease(rec.ID)
}

// Holders acquire and end leases while some leases are abandoned and
// reconcilers expire them: the slots in use never exceed the capacity, and
// every slot comes back once.
func testLeaseBoundUnderExpiry(t *testing.T, e *Env) {
	const capacity, holders, rounds, reconcilers = 4, 8, 30, 2
	k := Key("job", "emr")
	ls := e.s
	var inUse, peak, grants, reclaimed atomic.Int64
	var seq atomic.Int64
	now := T0
	done := make(chan struct{})
	rnd := NewRand(t)
	seeds := make([]uint64, holders)
	for i := range seeds {
		seeds[i] = rnd.Uint64()
	}
	var stop atomic.Bool
	var claimed sync.Map
	go func() {
		defer close(done)
		Parallel(reconcilers, func(int) {
			for !stop.Load() {
				recs, _, err := ls.ListLeases(e.ctx, e.ns, store.LeaseQuery{ExpiredBy: now + 1, Limit: 100})
				if err != nil {
					t.Errorf("ListLeases: %v", err)
					return
				}
				for _, r := range recs {
					// One reconciler ends each lease, and counts its slot
					// free before the store frees it (EndedOnceUnderRace
					// races enders; this case checks the bound).
					if _, taken := claimed.LoadOrStore(r.ID, true); taken {
						continue
					}
					inUse.Add(-1)
					err := ls.EndLease(e.ctx, e.ns, store.LeaseEnding{ID: r.ID, Version: r.Version, ExpiredBy: now + 1, Deltas: r.EndDeltas(store.Expire)})
					if err != nil {
						t.Errorf("EndLease by a reconciler: %v", err)
					}
					reclaimed.Add(1)
				}
				runtime.Gosched()
			}
		})
	}()
	// Abandoned leases expire at now+1 (already, to the reconcilers); held
	// ones never, and are ended by their holders.
	Parallel(holders, func(g int) {
		r := rand.New(rand.NewPCG(seeds[g], 7))
		for range rounds {
			abandon := r.IntN(3) == 0
			expires := int64(0)
			if abandon {
				expires = now + 1
			}
			id := leaseID(int(seq.Add(1)))
			ok, rec, err := e.consumeLease(id, expires, now, slot(k, capacity))
			if err != nil || !ok {
				if err != nil {
					t.Errorf("Consume: %v", err)
				}
				runtime.Gosched()
				continue
			}
			// Counted after the grant and released before the store
			// frees the slot, the count is never above the truth (a
			// reconciler may even release an abandoned slot first).
			cur := inUse.Add(1)
			grants.Add(1)
			for p := peak.Load(); cur > p && !peak.CompareAndSwap(p, cur); p = peak.Load() {
			}
			if abandon {
				continue // the reconcilers give it back
			}
			runtime.Gosched()
			inUse.Add(-1)
			if err := ls.EndLease(e.ctx, e.ns, store.LeaseEnding{ID: id, Version: 1, Deltas: rec.EndDeltas(store.Commit)}); err != nil {
				t.Errorf("EndLease by its holder: %v", err)
			}
		}
	})
	// Let the reconcilers take the rest, then stop them. A store whose
	// endings fail leaves leases open for good: the test fails, not hangs.
	deadline := time.Now().Add(time.Minute)
	for {
		recs, _, err := ls.ListLeases(e.ctx, e.ns, store.LeaseQuery{Limit: 1})
		if err != nil {
			t.Fatalf("ListLeases: %v", err)
		}
		if len(recs) == 0 {
			break
		}
		if t.Failed() || time.Now().After(deadline) {
			stop.Store(true)
			<-done
			t.Fatalf("leases still open (%s first): the reconcilers did not end them", recs[0].ID)
		}
		runtime.Gosched()
	}
	stop.Store(true)
	<-done
	if p := peak.Load(); p > capacity {
		t.Errorf("peak slots in use %d, capacity %d", p, capacity)
	}
	if grants.Load() == 0 {
		t.Error("no grants")
	}
	e.WantStored(k, "inflight", bucket.State{Tokens: capacity * 1000})
	t.Logf("%d grants, %d reclaimed, peak %d", grants.Load(), reclaimed.Load(), peak.Load())
}
