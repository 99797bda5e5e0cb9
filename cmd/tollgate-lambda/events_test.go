package main

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/events"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/memory"
)

const emrRules = `rules:
  - source: aws.emr
    detail_type: EMR Cluster State Change
    id: detail.clusterId
    when: {detail.state: [TERMINATED, TERMINATED_WITH_ERRORS]}
`

func emrEvent(id, state string) json.RawMessage {
	return json.RawMessage(`{"version":"0","source":"aws.emr","detail-type":"EMR Cluster State Change","detail":{"clusterId":"` + id + `","state":"` + state + `"}}`)
}

// In events mode, an invocation releases the reservation its event names;
// only a store failure is an error (so that the event is handed again).
func TestEventsHandler(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	cfg, err := configFrom(func(k string) string {
		return map[string]string{"TOLLGATE_TABLE": "t", "TOLLGATE_MODE": "events", "TOLLGATE_EVENT_RULES": emrRules}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := newEventsHandler(st, cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	lim, err := tollgate.New(st)
	if err != nil {
		t.Fatal(err)
	}
	clusters := tollgate.WithLimits(tollgate.ReservedLimit("clusters", 2))
	if _, err := lim.Acquire(ctx, "team", "emr", tollgate.Consume{"clusters": 1}, clusters, tollgate.WithReservation("j-1")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		ev      json.RawMessage
		outcome string
	}{
		{emrEvent("j-1", "RUNNING"), "unmatched"},
		{emrEvent("j-1", "TERMINATED"), "released"},
		{emrEvent("j-1", "TERMINATED"), "not_found"},
		{json.RawMessage(`{"source":"aws.emr","detail-type":"EMR Cluster State Change","detail":{"state":"TERMINATED"}}`), "malformed"},
	}
	for _, c := range cases {
		resp, err := h.handle(ctx, c.ev)
		if err != nil || resp.Outcome != c.outcome {
			t.Errorf("handle(%s) = %+v, %v; want %s", c.ev, resp, err, c.outcome)
		}
	}
	if _, err := lim.Reservation(ctx, "j-1"); !errors.Is(err, tollgate.ErrLeaseNotFound) {
		t.Errorf("the reservation after its event: %v, want not found", err)
	}
	wantReleasedByLambda(t, lim)

	down := &eventsHandler{}
	if down.p, err = events.NewProcessor(cfg.rules, failing{}, quiet()); err != nil {
		t.Fatal(err)
	}
	if _, err := down.handle(ctx, emrEvent("j-2", "TERMINATED")); !errors.Is(err, errStoreDown) {
		t.Errorf("a release the store failed: %v, want the error (the event is handed again)", err)
	}
}

// wantReleasedByLambda checks the audit event of j-1's release: the
// function's principal, and the rule and event it was made on.
func wantReleasedByLambda(t *testing.T, lim *tollgate.Limiter) {
	t.Helper()
	evs, err := lim.AuditEvents(context.Background(), "team", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []tollgate.AuditEvent
	for _, ev := range evs {
		if ev.Action == model.ActionReservationRelease {
			got = append(got, ev)
		}
	}
	if len(got) != 1 || got[0].Principal != principal || got[0].Details["how"] != "event" ||
		got[0].Details["rule"] != "rules[0]" || got[0].Details["source"] != "aws.emr" {
		t.Errorf("release events = %+v, want one by %s on rules[0]'s aws.emr event", got, principal)
	}
}

var errStoreDown = errors.New("store down")

type failing struct{}

func (failing) Release(context.Context, string, ...model.WriteOption) error { return errStoreDown }

func TestConfigEventsMode(t *testing.T) {
	for _, env := range []map[string]string{
		{"TOLLGATE_TABLE": "t", "TOLLGATE_MODE": "events"},
		{"TOLLGATE_TABLE": "t", "TOLLGATE_MODE": "events", "TOLLGATE_EVENT_RULES": "rules: [{id: x}]"},
	} {
		if _, err := configFrom(func(k string) string { return env[k] }); err == nil {
			t.Errorf("%v: no error", env)
		}
	}
	c, err := configFrom(func(k string) string {
		return map[string]string{"TOLLGATE_TABLE": "t", "TOLLGATE_MODE": "events", "TOLLGATE_EVENT_RULES": emrRules, "TOLLGATE_NAMESPACE": "tenant-a"}[k]
	})
	if err != nil || c.namespace != "tenant-a" || len(c.rules.Rules) != 1 {
		t.Errorf("events mode config = %+v, %v", c, err)
	}
}
