package limitertest

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/reconcile"
	"github.com/tollgate-rl/tollgate/store/storetest"
)

// Reservations in the audit log, through the limiter: reserved once
// (however often the holder asks again), released once, whoever ends it,
// and expired by a reconciler.

// reservationLimits are those of the audit cases: 2 clusters, and a rate
// limit debited with each reservation.
var reservationLimits = tollgate.WithLimits(tollgate.ReservedLimit("clusters", 2), tollgate.PerMinute("launches", 100))

// reserve reserves id for entity team on emr with the write options opts.
func (e *env) reserve(lim *tollgate.Limiter, id string, opts ...tollgate.AcquireOption) error {
	all := append([]tollgate.AcquireOption{reservationLimits, tollgate.WithReservation(id)}, opts...)
	_, err := lim.Acquire(e.ctx, "team", "emr", tollgate.Consume{"clusters": 1, "launches": 1}, all...)
	return err
}

// auditOf returns the events of action in entity's audit log, as the
// case's Admin lists them.
func (e *env) auditOf(lim *tollgate.Limiter, entity, action string) []tollgate.AuditEvent {
	e.t.Helper()
	evs, err := e.admin().AuditEvents(e.ctx, entity, "", 100)
	if err != nil {
		e.t.Fatalf("AuditEvents(%s): %v", entity, err)
	}
	var out []tollgate.AuditEvent
	for _, ev := range evs {
		if ev.Action == action {
			out = append(out, ev)
		}
	}
	return out
}

// wantDetails fails the case unless ev has the details want (and maybe
// others).
func wantDetails(t *testing.T, ev tollgate.AuditEvent, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if ev.Details[k] != v {
			t.Errorf("%s event detail %s = %q, want %q (details %v)", ev.Action, k, ev.Details[k], v, ev.Details)
		}
	}
}

// A reservation made is one reservation.reserve event, with the principal
// and what it consumed; asking again for the same id (resumed), a denial
// and a conflict write none.
func testLimiterReserveAudited(t *testing.T, e *env) {
	lim := e.limiter()
	byAlice := tollgate.WithAudit(tollgate.WithPrincipal("alice"))
	if err := e.reserve(lim, "j-1", byAlice, tollgate.WithLeaseTTL(time.Hour)); err != nil {
		t.Fatalf("reserve j-1: %v", err)
	}
	if err := e.reserve(lim, "j-1", byAlice); err != nil {
		t.Fatalf("reserve j-1 again: %v", err)
	}
	if err := e.reserve(lim, "j-2"); err != nil {
		t.Fatalf("reserve j-2: %v", err)
	}
	if err := e.reserve(lim, "j-3"); !errors.Is(err, tollgate.ErrRateLimited) {
		t.Fatalf("reserve j-3 with every cluster reserved: %v, want ErrRateLimited", err)
	}
	_, err := lim.Acquire(e.ctx, "other", "emr", tollgate.Consume{"clusters": 1}, reservationLimits, tollgate.WithReservation("j-1"))
	if !errors.Is(err, tollgate.ErrReservationConflict) {
		t.Fatalf("j-1 by another entity: %v, want ErrReservationConflict", err)
	}
	evs := e.auditOf(lim, "team", model.ActionReservationReserve)
	if len(evs) != 2 {
		t.Fatalf("reserve events of team = %+v, want j-1's and j-2's", evs)
	}
	if ev := evs[0]; ev.Principal != "alice" || ev.Resource != "emr" {
		t.Errorf("j-1's event = %+v, want principal alice on team/emr", ev)
	}
	expires := time.UnixMilli(storetest.T0).Add(time.Hour).UTC().Format(time.RFC3339Nano)
	wantDetails(t, evs[0], map[string]string{"reservation": "j-1", "consumed": "clusters=1,launches=1", "expires": expires})
	if _, ok := evs[1].Details["expires"]; ok || evs[1].Details["reservation"] != "j-2" || evs[1].Details["holder"] == "" {
		t.Errorf("j-2's details = %v, want its id and holder, and no expiry", evs[1].Details)
	}
	if evs := e.auditOf(lim, "other", model.ActionReservationReserve); len(evs) != 0 {
		t.Errorf("reserve events of other = %+v, want none", evs)
	}
}

// A release is one reservation.release event, with its principal and how
// it came: by a call, on an external event, or by the lease's own ending.
// A release that finds nothing writes none.
func testLimiterReleaseAudited(t *testing.T, e *env) {
	lim := e.limiter()
	for _, id := range []string{"j-1", "j-2"} {
		if err := e.reserve(lim, id); err != nil {
			t.Fatalf("reserve %s: %v", id, err)
		}
	}
	if err := lim.Release(e.ctx, "j-1", tollgate.WithPrincipal("bob")); err != nil {
		t.Fatalf("Release j-1: %v", err)
	}
	trigger := tollgate.EventTrigger{Rule: "emr-terminated", Source: "aws.emr", DetailType: "EMR Cluster State Change", EventID: "ev-1"}
	if err := lim.Release(e.ctx, "j-2", tollgate.WithPrincipal("lambda"), tollgate.WithTrigger(trigger)); err != nil {
		t.Fatalf("Release j-2 on an event: %v", err)
	}
	if err := lim.Release(e.ctx, "j-2", tollgate.WithTrigger(trigger)); !errors.Is(err, tollgate.ErrLeaseNotFound) {
		t.Fatalf("Release j-2 again: %v, want ErrLeaseNotFound", err)
	}
	evs := e.auditOf(lim, "team", model.ActionReservationRelease)
	if len(evs) != 2 {
		t.Fatalf("release events = %+v, want j-1's and j-2's", evs)
	}
	if evs[0].Principal != "bob" || evs[1].Principal != "lambda" {
		t.Errorf("release principals = %q, %q; want bob, lambda", evs[0].Principal, evs[1].Principal)
	}
	wantDetails(t, evs[0], map[string]string{"reservation": "j-1", "how": "released"})
	wantDetails(t, evs[1], map[string]string{"reservation": "j-2", "how": "event", "rule": "emr-terminated",
		"source": "aws.emr", "detail_type": "EMR Cluster State Change", "event_id": "ev-1"})

	// The lease's own Rollback of a reservation is audited too.
	le, err := lim.Acquire(e.ctx, "team", "emr", tollgate.Consume{"clusters": 1}, reservationLimits, tollgate.WithReservation("j-3"))
	if err != nil {
		t.Fatalf("reserve j-3: %v", err)
	}
	e.rollback(le)
	if evs := e.auditOf(lim, "team", model.ActionReservationRelease); len(evs) != 3 || evs[2].Details["how"] != "rolled_back" {
		t.Errorf("release events after j-3's rollback = %+v, want a third, rolled_back", evs)
	}
}

// A reservation that expires is ended by a reconciler with its
// lease.expired event, which names the reservation.
func testLimiterReservationExpiryAudited(t *testing.T, e *env) {
	lim := e.limiter()
	if err := e.reserve(lim, "j-1", tollgate.WithLeaseTTL(time.Second)); err != nil {
		t.Fatalf("reserve j-1: %v", err)
	}
	r, err := reconcile.New(e.s, reconcile.WithClock(e.clk), reconcile.WithNamespaces(e.ns), reconcile.WithPrincipal("storetest-reconciler"))
	if err != nil {
		t.Fatal(err)
	}
	e.Advance(1000)
	if n, err := r.Once(e.ctx); n != 1 || err != nil {
		t.Fatalf("reconciler pass = %d, %v; want 1 lease ended", n, err)
	}
	evs := e.auditOf(lim, "team", model.ActionLeaseExpired)
	if len(evs) != 1 || evs[0].Principal != "storetest-reconciler" {
		t.Fatalf("lease.expired events = %+v, want one by the reconciler", evs)
	}
	wantDetails(t, evs[0], map[string]string{"reservation": "j-1", "lease": model.ReservationLeaseID("j-1")})
	if evs := e.auditOf(lim, "team", model.ActionReservationRelease); len(evs) != 0 {
		t.Errorf("release events = %+v, want none (the expiry is its own)", evs)
	}
}
