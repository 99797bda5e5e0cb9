package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/events"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
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
	adm := newAdmin(t, st)
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
		if r, ok := resp.(eventsResponse); err != nil || !ok || r.Outcome != c.outcome {
			t.Errorf("handle(%s) = %+v, %v; want %s", c.ev, resp, err, c.outcome)
		}
	}
	if _, err := adm.Reservation(ctx, "j-1"); !errors.Is(err, tollgate.ErrLeaseNotFound) {
		t.Errorf("the reservation after its event: %v, want not found", err)
	}
	wantReleasedByLambda(t, adm)

	down := &eventsHandler{}
	if down.p, err = events.NewProcessor(cfg.rules, failing{}, quiet()); err != nil {
		t.Fatal(err)
	}
	if _, err := down.handle(ctx, emrEvent("j-2", "TERMINATED")); !errors.Is(err, errStoreDown) {
		t.Errorf("a release the store failed: %v, want the error (the event is handed again)", err)
	}
}

// sqsBatch is an SQS event as Lambda hands it to a function, of messages
// whose bodies are the events, with message ids m-1, m-2...
func sqsBatch(t *testing.T, bodies ...json.RawMessage) json.RawMessage {
	t.Helper()
	var ev lambdaevents.SQSEvent
	for i, b := range bodies {
		ev.Records = append(ev.Records, lambdaevents.SQSMessage{MessageId: fmt.Sprintf("m-%d", i+1), Body: string(b),
			EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:tollgate-events", AWSRegion: "us-east-1"})
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// In events mode behind an SQS queue, an invocation is a batch of
// messages: each message's event is decided, and the answer is the
// partial batch response naming the messages whose release the store
// failed (once each), so that SQS hands only those again. Malformed,
// unmatched and not found events are not failures.
func TestEventsHandlerSQSBatch(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	lim, err := tollgate.New(st)
	if err != nil {
		t.Fatal(err)
	}
	adm := newAdmin(t, st)
	clusters := tollgate.WithLimits(tollgate.ReservedLimit("clusters", 3))
	for _, id := range []string{"j-1", "j-2", "j-down"} {
		if _, err := lim.Acquire(ctx, "team", "emr", tollgate.Consume{"clusters": 1}, clusters, tollgate.WithReservation(id)); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := events.ParseConfig([]byte(emrRules))
	if err != nil {
		t.Fatal(err)
	}
	h := &eventsHandler{}
	if h.p, err = events.NewProcessor(cfg, downFor{lambdaReleaser{lim}, "j-down"}, quiet()); err != nil {
		t.Fatal(err)
	}
	batch := sqsBatch(t,
		emrEvent("j-1", "TERMINATED"),
		emrEvent("j-down", "TERMINATED"),
		json.RawMessage(`not an event`),
		emrEvent("j-2", "RUNNING"),
		emrEvent("j-down", "TERMINATED_WITH_ERRORS"),
		emrEvent("j-2", "TERMINATED"),
		emrEvent("j-1", "TERMINATED"),
	)
	resp, err := h.handle(ctx, batch)
	if err != nil {
		t.Fatalf("handle: %v, want the failures in the response", err)
	}
	got, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"batchItemFailures":[{"itemIdentifier":"m-2"},{"itemIdentifier":"m-5"}]}`; string(got) != want {
		t.Errorf("response %s, want %s", got, want)
	}
	for id, held := range map[string]bool{"j-1": false, "j-2": false, "j-down": true} {
		if _, err := adm.Reservation(ctx, id); (err == nil) != held {
			t.Errorf("reservation %s after the batch: %v, want held %v", id, err, held)
		}
	}
	// Nothing failed: an empty list, which Lambda reads as all done.
	resp, err = h.handle(ctx, sqsBatch(t, emrEvent("j-1", "TERMINATED")))
	if got, _ := json.Marshal(resp); err != nil || string(got) != `{"batchItemFailures":[]}` {
		t.Errorf("a batch without failures: %s, %v", got, err)
	}
	// A record without a message id cannot be named: the batch fails.
	noID := json.RawMessage(`{"Records":[{"eventSource":"aws:sqs","body":` + strconv.Quote(string(emrEvent("j-down", "TERMINATED"))) + `}]}`)
	if _, err := h.handle(ctx, noID); !errors.Is(err, errStoreDown) {
		t.Errorf("a failed release of a record without an id: %v, want the batch failed", err)
	}
}

// The recorded events as an SQS batch (events/testdata): the
// reservations they name are released, and no message fails.
func TestEventsHandlerRecordedSQSBatch(t *testing.T) {
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
	adm := newAdmin(t, st)
	clusters := tollgate.WithLimits(tollgate.ReservedLimit("clusters", 3))
	for _, id := range []string{"j-2AXXXXXXGAPLF", "j-3BYYYYYYQ7R2M", "j-kept"} {
		if _, err := lim.Acquire(ctx, "team", "emr", tollgate.Consume{"clusters": 1}, clusters, tollgate.WithReservation(id)); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile("../../events/testdata/emr-events-sqs-lambda.json")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h.handle(ctx, raw)
	if r, ok := resp.(lambdaevents.SQSEventResponse); err != nil || !ok || len(r.BatchItemFailures) != 0 {
		t.Fatalf("handle = %+v, %v; want a partial batch response without failures", resp, err)
	}
	rs, _, err := adm.Reservations(ctx, "team", "", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].ID != "j-kept" {
		t.Errorf("reservations left %+v, want j-kept alone", rs)
	}
}

// newAdmin is tollgate.NewAdmin for arguments a test knows to be valid.
func newAdmin(t testing.TB, st store.Store, opts ...tollgate.Option) *tollgate.Admin {
	t.Helper()
	adm, err := tollgate.NewAdmin(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return adm
}

// downFor releases through r, except id, whose release the store fails.
type downFor struct {
	r  events.Releaser
	id string
}

func (d downFor) Release(ctx context.Context, id string, opts ...model.WriteOption) error {
	if id == d.id {
		return errStoreDown
	}
	return d.r.Release(ctx, id, opts...)
}

// wantReleasedByLambda checks the audit event of j-1's release: the
// function's principal, and the rule and event it was made on.
func wantReleasedByLambda(t *testing.T, adm *tollgate.Admin) {
	t.Helper()
	evs, err := adm.AuditEvents(context.Background(), "team", "", 10)
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
