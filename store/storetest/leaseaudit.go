package storetest

import (
	"errors"
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// An audit event with a leased consume (ConsumeRequest.Event, a
// reservation's): written with the grant and its record, and never
// without them.

// consumeAudited runs Consume with a lease record and ev.
func (e *Env) consumeAudited(id string, ev *model.AuditEvent, buckets ...store.BucketRequest) (bool, error) {
	req := request(T0, buckets...)
	req.Lease = store.NewLeaseRecord(id, "storetest", req, 0)
	req.Event = ev
	return e.s.Consume(e.ctx, e.ns, req)
}

// wantAudit fails the case unless entity's audit log is exactly evs.
func (e *Env) wantAudit(entity string, evs ...model.AuditEvent) {
	e.t.Helper()
	got := e.audit(entity)
	ok := len(got) == len(evs)
	for i := 0; ok && i < len(got); i++ {
		ok = sameEvent(got[i], evs[i])
	}
	if !ok {
		e.t.Errorf("audit of %q = %+v\nwant %+v", entity, got, evs)
	}
}

// A granted consume of a cascade writes its record and its event; the
// event's details come back as they went in.
func testLeaseEventWithGrant(t *testing.T, e *Env) {
	team, org := Key("team", "emr"), Key("org", "emr")
	ev := e.event(model.ActionReservationReserve, "team", "emr")
	ev.Details = map[string]string{"reservation": "j-1", "consumed": "clusters=1", "holder": "storetest"}
	ok, err := e.consumeAudited(leaseID(0), &ev, slot(team, 1), slot(org, 2))
	if !ok || err != nil {
		t.Fatalf("Consume with lease and event = %v, %v; want granted", ok, err)
	}
	if _, err := e.getLease(leaseID(0)); err != nil {
		t.Errorf("GetLease after the grant: %v", err)
	}
	e.wantAudit("team", ev)
	e.wantAudit("org") // the event is the entity's it names, not every bucket's
	e.WantStored(team, "inflight", bucket.State{})
}

// A refused consume writes neither its record nor its event.
func testLeaseEventRefused(t *testing.T, e *Env) {
	k := Key("team", "emr")
	e.grantLease(leaseID(0), 0, T0, slot(k, 1))
	ev := e.event(model.ActionReservationReserve, "team", "emr")
	if ok, err := e.consumeAudited(leaseID(1), &ev, slot(k, 1)); ok || err != nil {
		t.Fatalf("Consume on a full slot = %v, %v; want refused", ok, err)
	}
	e.wantNoLease(leaseID(1))
	e.wantAudit("team")
}

// A record whose id exists makes the consume fail with ErrLeaseExists,
// having debited nothing and written no event: an idempotent reserve
// resumes the first reservation, whose event is the only one.
func testLeaseEventExistingID(t *testing.T, e *Env) {
	k := Key("team", "emr")
	first := e.event(model.ActionReservationReserve, "team", "emr")
	if ok, err := e.consumeAudited(leaseID(0), &first, slot(k, 3)); !ok || err != nil {
		t.Fatalf("first Consume = %v, %v; want granted", ok, err)
	}
	again := e.event(model.ActionReservationReserve, "team", "emr")
	ok, err := e.consumeAudited(leaseID(0), &again, slot(k, 3))
	if ok || !errors.Is(err, model.ErrLeaseExists) {
		t.Fatalf("Consume with a taken id = %v, %v; want ErrLeaseExists", ok, err)
	}
	e.wantAudit("team", first)
	e.WantStored(k, "inflight", bucket.State{Tokens: 2000})
}

// An event without a lease record is bad input: nothing is debited or
// written.
func testLeaseEventNeedsLease(t *testing.T, e *Env) {
	k := Key("team", "emr")
	req := request(T0, slot(k, 1))
	ev := e.event(model.ActionReservationReserve, "team", "emr")
	req.Event = &ev
	if ok, err := e.s.Consume(e.ctx, e.ns, req); ok || !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("Consume with an event and no lease = %v, %v; want ErrInvalid", ok, err)
	}
	e.wantAudit("team")
	if rec := e.Read(k)[0]; rec != nil { // a backend may have created it full, no more
		if i := rec.Find("inflight"); i >= 0 && rec.Limits[i].State.Tokens != 1000 {
			t.Errorf("the refused request debited: %+v", rec)
		}
	}
}
