package client_test

import (
	"context"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/model"
)

// The client carries what the server's audit events of a reservation
// record: a call's principal (WithAudit on Reserve, WithPrincipal on
// Release) over the client's, and the trigger of a release made on an
// event. The server has no keys, so the principal header counts.
func TestReservationAuditThroughTheClient(t *testing.T) {
	c := newEnv(t).client(t, client.WithPrincipal("svc"))
	ctx := context.Background()
	clusters := client.WithLimits(tollgate.ReservedLimit("clusters", 2))
	_, err := c.Reserve(ctx, "team-a", "emr", "j-1", nil, clusters, model.WithAudit(model.WithPrincipal("alice")))
	must(t, "Reserve j-1", err)
	_, err = c.Reserve(ctx, "team-a", "emr", "j-2", nil, clusters)
	must(t, "Reserve j-2", err)
	trigger := model.EventTrigger{Rule: "emr-terminated", Source: "aws.emr", DetailType: "EMR Cluster State Change", EventID: "e-1"}
	must(t, "Release j-1", c.Release(ctx, "j-1", model.WithPrincipal("events"), model.WithTrigger(trigger)))
	must(t, "Release j-2", c.Release(ctx, "j-2"))

	evs, err := c.AuditEvents(ctx, "team-a", "", 10)
	must(t, "AuditEvents", err)
	want := []struct{ action, id, principal, how string }{
		{model.ActionReservationReserve, "j-1", "alice", ""},
		{model.ActionReservationReserve, "j-2", "svc", ""},
		{model.ActionReservationRelease, "j-1", "events", "event"},
		{model.ActionReservationRelease, "j-2", "svc", "released"},
	}
	if len(evs) != len(want) {
		t.Fatalf("audit = %+v, want %d events", evs, len(want))
	}
	for i, w := range want {
		ev := evs[i]
		if ev.Action != w.action || ev.Details["reservation"] != w.id || ev.Principal != w.principal || ev.Details["how"] != w.how {
			t.Errorf("event %d = %+v, want %s of %s by %s (how %q)", i, ev, w.action, w.id, w.principal, w.how)
		}
	}
	if d := evs[2].Details; d["rule"] != "emr-terminated" || d["source"] != "aws.emr" || d["detail_type"] != "EMR Cluster State Change" || d["event_id"] != "e-1" {
		t.Errorf("the release on an event has details %v, want the trigger's", d)
	}
}
