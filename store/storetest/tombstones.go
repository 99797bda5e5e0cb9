package storetest

import (
	"errors"
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// Tombstones (store.Leases): an ending with KeepUntil leaves the record
// behind, saying how the lease ended, until then; it is never listed,
// changed or ended again.

// endKept ends rec as end at now, keeping its tombstone until keep.
func (e *Env) endKept(rec *store.LeaseRecord, end store.LeaseEnd, now, keep int64) error {
	return e.s.EndLease(e.ctx, e.ns, store.LeaseEnding{ID: rec.ID, Version: rec.Version, Deltas: rec.EndDeltas(end),
		As: end, At: now, KeepUntil: keep, Record: rec})
}

func testLeaseTombstone(t *testing.T, e *Env) {
	k := Key("job", "emr")
	rec := e.grantLease(leaseID(0), T0+60_000, T0, slot(k, 2))
	upd := rec.Clone()
	upd.Version++
	upd.Pending = []store.LeaseDelta{{Limit: "rpm", Amount: 3000}}
	if err := e.s.UpdateLease(e.ctx, e.ns, upd); err != nil {
		t.Fatal(err)
	}
	if err := e.endKept(&upd, store.Commit, T0+1000, T0+600_000); err != nil {
		t.Fatalf("EndLease: %v", err)
	}
	got, err := e.getLease(rec.ID)
	if err != nil {
		t.Fatalf("GetLease of the tombstone: %v", err)
	}
	if !got.Ended() || got.EndedAt != T0+1000 || got.EndedAs != store.Commit || got.KeepUntil != T0+600_000 ||
		got.Version != upd.Version+1 || len(got.Buckets) != 1 || len(got.Pending) != 1 || got.Pending[0].Amount != 3000 {
		t.Errorf("tombstone = %+v", got)
	}
	e.WantStored(k, "inflight", bucket.State{Tokens: 2000}) // the slot came back with the ending
	recs, _, err := e.s.ListLeases(e.ctx, e.ns, store.LeaseQuery{Limit: 10})
	if err != nil || len(recs) != 0 {
		t.Errorf("ListLeases = %+v, %v; want no tombstone", recs, err)
	}
	recs, _, err = e.s.ListLeases(e.ctx, e.ns, store.LeaseQuery{Entity: "job", Limit: 10})
	if err != nil || len(recs) != 0 {
		t.Errorf("ListLeases of the entity = %+v, %v; want no tombstone", recs, err)
	}
	again := got.Clone()
	again.Version++
	if err := e.s.UpdateLease(e.ctx, e.ns, again); !errors.Is(err, model.ErrLeaseConflict) {
		t.Errorf("UpdateLease of a tombstone: %v, want ErrLeaseConflict", err)
	}
	for _, v := range []int64{upd.Version, got.Version} {
		err := e.s.EndLease(e.ctx, e.ns, store.LeaseEnding{ID: rec.ID, Version: v, Deltas: got.EndDeltas(store.Rollback),
			As: store.Rollback, At: T0 + 2000, KeepUntil: T0 + 600_000})
		if !errors.Is(err, model.ErrLeaseConflict) {
			t.Errorf("EndLease of a tombstone at version %d: %v, want ErrLeaseConflict", v, err)
		}
	}
	e.WantStored(k, "inflight", bucket.State{Tokens: 2000}) // nothing given back twice
}

func testLeaseEndingDeletes(t *testing.T, e *Env) {
	rec := e.grantLease(leaseID(0), 0, T0, slot(Key("job", "emr"), 1))
	if err := e.endKept(rec, store.Commit, T0+1000, 0); err != nil {
		t.Fatal(err)
	}
	e.wantNoLease(rec.ID)
}

func testLeaseTombstoneReusedID(t *testing.T, e *Env) {
	k := Key("job", "emr")
	rec := e.grantLease(leaseID(0), T0+60_000, T0, slot(k, 2))
	if err := e.endKept(rec, store.Commit, T0+1000, T0+600_000); err != nil {
		t.Fatal(err)
	}
	retry := func(now int64) (bool, error) {
		req := request(now, slot(k, 2))
		req.Lease, req.ReusedID = store.NewLeaseRecord(rec.ID, "storetest", req, now+60_000), true
		return e.s.Consume(e.ctx, e.ns, req)
	}
	if ok, err := retry(T0 + 2000); ok || !errors.Is(err, model.ErrLeaseExists) {
		t.Fatalf("Consume of a tombstone's id = %v, %v; want ErrLeaseExists", ok, err)
	}
	e.WantStored(k, "inflight", bucket.State{Tokens: 2000})
	// Past KeepUntil the tombstone is as good as gone: the id is free.
	if ok, err := retry(T0 + 600_000); !ok || err != nil {
		t.Fatalf("Consume after the tombstone's KeepUntil = %v, %v; want granted", ok, err)
	}
	got, err := e.getLease(rec.ID)
	if err != nil || got.Ended() {
		t.Errorf("GetLease = %+v, %v; want the new open record", got, err)
	}
}

func testLeaseBornEnded(t *testing.T, e *Env) {
	k := Key("k", "api")
	req := request(T0, breq(k, checked("rpm", rate(10_000, 10_000, 60_000), 4000)))
	rec := store.NewLeaseRecord(leaseID(0), "storetest", req, 0)
	rec.EndedAt, rec.EndedAs, rec.KeepUntil = T0, store.Commit, T0+600_000
	req.Lease, req.ReusedID = rec, true
	if ok, err := e.s.Consume(e.ctx, e.ns, req); !ok || err != nil {
		t.Fatalf("Consume with a record born ended = %v, %v", ok, err)
	}
	e.WantStored(k, "rpm", bucket.State{Tokens: 6000})
	got, err := e.getLease(rec.ID)
	if err != nil || !got.Ended() || got.EndedAs != store.Commit || got.Buckets[0].Limits[0].Amount != 4000 {
		t.Errorf("GetLease = %+v, %v; want the tombstone with its consumption", got, err)
	}
	if recs, _, err := e.s.ListLeases(e.ctx, e.ns, store.LeaseQuery{Limit: 10}); err != nil || len(recs) != 0 {
		t.Errorf("ListLeases = %+v, %v; want none", recs, err)
	}
	req2 := request(T0+1000, breq(k, checked("rpm", rate(10_000, 10_000, 60_000), 4000)))
	req2.Lease, req2.ReusedID = store.NewLeaseRecord(rec.ID, "storetest", req2, 0), true
	if ok, err := e.s.Consume(e.ctx, e.ns, req2); ok || !errors.Is(err, model.ErrLeaseExists) {
		t.Errorf("a retry of the same id = %v, %v; want ErrLeaseExists", ok, err)
	}
}

func testLeaseExpiredTombstone(t *testing.T, e *Env) {
	k := Key("job", "emr")
	rec := e.grantLease(leaseID(0), T0+60_000, T0, slot(k, 1))
	err := e.s.EndLease(e.ctx, e.ns, store.LeaseEnding{ID: rec.ID, Version: rec.Version, ExpiredBy: T0 + 60_000,
		Deltas: rec.EndDeltas(store.Expire), As: store.Expire, At: T0 + 60_000, KeepUntil: T0 + 660_000})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.getLease(rec.ID)
	if err != nil || got.EndedAs != store.Expire {
		t.Errorf("GetLease = %+v, %v; want a tombstone of an expiry", got, err)
	}
	if recs, _, err := e.s.ListLeases(e.ctx, e.ns, store.LeaseQuery{ExpiredBy: T0 + 120_000, Limit: 10}); err != nil || len(recs) != 0 {
		t.Errorf("expired leases listed = %+v, %v; want none: the tombstone is no lease to reclaim", recs, err)
	}
}

// A retry of a reused id whose first request emptied the bucket finds the
// id taken (open or kept as a tombstone) rather than the bucket empty:
// ErrLeaseExists comes before the refusal, so an idempotent acquire is
// replayed, not refused.
func testLeaseReusedIDBeforeRefusal(t *testing.T, e *Env) {
	k := Key("k", "api")
	hourly := rate(1_000, 1_000, 3_600_000)
	for i, bornEnded := range []bool{false, true} {
		k.Entity = "k" + itoa(int64(i))
		req := request(T0, breq(k, checked("rph", hourly, 1_000)))
		rec := store.NewLeaseRecord(leaseID(i), "storetest", req, T0+60_000)
		if bornEnded {
			rec.EndedAt, rec.EndedAs, rec.KeepUntil = T0, store.Commit, T0+600_000
		}
		req.Lease, req.ReusedID = rec, true
		if ok, err := e.s.Consume(e.ctx, e.ns, req); !ok || err != nil {
			t.Fatalf("first Consume = %v, %v", ok, err)
		}
		retry := request(T0+1000, breq(k, checked("rph", hourly, 1_000)))
		retry.Lease, retry.ReusedID = store.NewLeaseRecord(rec.ID, "storetest", retry, T0+61_000), true
		if ok, err := e.s.Consume(e.ctx, e.ns, retry); ok || !errors.Is(err, model.ErrLeaseExists) {
			t.Errorf("retry of an id that emptied its bucket (born ended %v) = %v, %v; want ErrLeaseExists", bornEnded, ok, err)
		}
		e.WantStored(k, "rph", bucket.State{})
	}
}
