package cli

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store/embedded"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// reservationsOut decodes `reservations list -o json`.
func reservationsOut(t *testing.T, out string) []string {
	t.Helper()
	var v struct {
		Reservations []reservationJSON `json:"reservations"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	var ids []string
	for _, r := range v.Reservations {
		ids = append(ids, r.ID)
	}
	return ids
}

// target runs tollgate with the arguments against one backend and checks
// the exit code; it returns standard output.
type target func(code int, args ...string) string

// testServer starts a server over a memory store and returns its URL.
func testServer(t *testing.T) string {
	t.Helper()
	srv, err := server.New(memory.New(), server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); _ = srv.Close(context.Background()) })
	return ts.URL
}

// serverTarget is a target through a server over a memory store.
func serverTarget(t *testing.T) target {
	t.Helper()
	return serverAt(t, testServer(t))
}

// serverAt is a target through the server at url.
func serverAt(t *testing.T, url string) target {
	return func(code int, args ...string) string {
		t.Helper()
		got, out, errOut := run(t, "", append(args, "--server", url)...)
		if got != code {
			t.Fatalf("tollgate %s --server: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, code, out, errOut)
		}
		return out
	}
}

// targets make a store and a server target, for the commands that work
// on both.
var targets = map[string]func(t *testing.T) target{
	"store":  func(t *testing.T) target { return newCLI(t).want },
	"server": serverTarget,
}

func TestReservationsCommands(t *testing.T) {
	for name, newTarget := range targets {
		t.Run(name, func(t *testing.T) { testReservationsCommands(t, newTarget(t)) })
	}
}

func testReservationsCommands(t *testing.T, want target) {
	want(ExitOK, "limits", "set", "--resource", "emr", "clusters:2/reserved", "rpm:100/min")
	reserve := func(code int, id string, extra ...string) string {
		t.Helper()
		return want(code, append([]string{"reservations", "reserve", id, "-e", "team-a", "-r", "emr", "-c", "clusters=1", "-c", "rpm=1"}, extra...)...)
	}
	steps := []struct {
		name string
		run  func() string
		want []string // team-a's reservations after the step
	}{
		{"reserve j-1", func() string {
			if out := reserve(ExitOK, "j-1"); strings.Contains(out, "already held") {
				t.Errorf("a new reservation says:\n%s", out)
			}
			return ""
		}, []string{"j-1"}},
		{"reserve j-2 with an expiry", func() string { return reserve(ExitOK, "j-2", "--ttl", "8h") }, []string{"j-1", "j-2"}},
		{"j-1 again: the same", func() string {
			if out := reserve(ExitOK, "j-1"); !strings.Contains(out, "j-1 was already held by team-a/emr: nothing debited again") {
				t.Errorf("reserve j-1 again says:\n%s", out)
			}
			return ""
		}, []string{"j-1", "j-2"}},
		{"j-3: full", func() string { return reserve(ExitRateLimited, "j-3") }, []string{"j-1", "j-2"}},
		{"j-1 for another entity", func() string {
			return want(ExitFailure, "reservations", "reserve", "j-1", "-e", "team-b", "-r", "emr", "-c", "clusters=1")
		}, []string{"j-1", "j-2"}},
		{"release j-1", func() string { return want(ExitOK, "reservations", "release", "j-1") }, []string{"j-2"}},
		{"release j-1 again", func() string { return want(ExitFailure, "reservations", "release", "j-1") }, []string{"j-2"}},
		{"reserve j-3 now", func() string { return reserve(ExitOK, "j-3") }, []string{"j-2", "j-3"}},
	}
	for _, s := range steps {
		s.run()
		if got := reservationsOut(t, want(ExitOK, "reservations", "list", "-e", "team-a", "-o", "json")); !slices.Equal(got, s.want) {
			t.Errorf("%s: listed %v, want %v", s.name, got, s.want)
		}
	}
	if out := reserve(ExitOK, "j-3", "-o", "json"); !strings.Contains(out, `"holder"`) || strings.Contains(out, `"expires"`) || strings.Contains(out, "already held") {
		t.Errorf("reserve -o json:\n%s", out)
	}
	if out := want(ExitOK, "reservations", "list", "-e", "team-a", "-o", "json"); strings.Count(out, `"expires"`) != 1 {
		t.Errorf("only j-2 expires:\n%s", out)
	}
	table := want(ExitOK, "reservations", "list", "-e", "team-a", "-r", "emr")
	if !strings.Contains(table, "HOLDER") || !strings.Contains(table, "j-3") || strings.Count(table, "\n") != 3 {
		t.Errorf("table:\n%s", table)
	}
	if got := want(ExitOK, "reservations", "list", "-e", "team-a", "-r", "other", "-o", "json"); len(reservationsOut(t, got)) != 0 {
		t.Errorf("another resource lists %s", got)
	}
	want(ExitUsage, "reservations", "reserve", "j-4", "-e", "team-a", "-r", "emr", "-c", "clusters=1", "--expiry", "-1s")
	wantReservationAudit(t, want(ExitOK, "audit", "list", "-e", "team-a", "-o", "json"))
	// Scripts tell the errors apart by the HTTP API's codes.
	for _, c2 := range []struct {
		args       []string
		code, body string
	}{
		{[]string{"reservations", "release", "j-none"}, `"error": "not_found"`, `"reason": "lease_not_found"`},
		{[]string{"reservations", "reserve", "j-2", "-e", "team-b", "-r", "emr", "-c", "clusters=1"}, `"error": "conflict"`, `"reason": "reservation_conflict"`},
		{[]string{"reservations", "release", "j#1"}, `"error": "invalid_argument"`, `"field": "`}, // reservation_id, id over HTTP
	} {
		out := want(ExitFailure, append(c2.args, "-o", "json")...)
		if !strings.Contains(out, c2.code) || !strings.Contains(out, c2.body) {
			t.Errorf("tollgate %s -o json:\n%s", strings.Join(c2.args, " "), out)
		}
	}
}

func TestPenalizeCommand(t *testing.T) {
	for name, newTarget := range targets {
		t.Run(name, func(t *testing.T) { testPenalizeCommand(t, newTarget(t)) })
	}
}

func testPenalizeCommand(t *testing.T, want target) {
	want(ExitOK, "limits", "set", "--resource", "llm", "rpm:10/min", "tpm:1000/min", "slots:2/concurrent")
	penalize := []string{"penalize", "-e", "team-a", "-r", "llm", "--limits", "rpm,tpm", "--reason", "vendor 429"}
	out := want(ExitOK, append(penalize, "--for", "30s", "-o", "json")...)
	var got struct {
		Until  time.Time `json:"until"`
		Limits []string  `json:"limits"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || time.Until(got.Until) <= 20*time.Second || !slices.Equal(got.Limits, []string{"rpm", "tpm"}) {
		t.Errorf("penalize -o json: %s (%v)", out, err)
	}
	want(ExitRateLimited, "acquire", "-e", "team-a", "-r", "llm", "-c", "rpm=1")
	want(ExitOK, "acquire", "-e", "team-b", "-r", "llm", "-c", "rpm=1") // another entity's limits are its own
	until := time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	if out := want(ExitOK, append(penalize, "--until", until)...); !strings.Contains(out, until) {
		t.Errorf("penalize --until: %s", out)
	}
	if out := want(ExitOK, "audit", "list", "-e", "team-a", "-o", "json"); strings.Count(out, "limit.penalize") != 2 || !strings.Contains(out, "vendor 429") {
		t.Errorf("audit:\n%s", out)
	}
	for _, c := range []struct {
		extra []string
		code  int
	}{
		{nil, ExitUsage}, // neither --for nor --until
		{[]string{"--for", "1s", "--until", until}, ExitUsage},
		{[]string{"--for", "-1s"}, ExitUsage},
		{[]string{"--until", "tomorrow"}, ExitUsage},
		{[]string{"--for", "48h"}, ExitFailure},
		{[]string{"--until", "2020-01-01T00:00:00Z"}, ExitFailure},
	} {
		want(c.code, append(penalize, c.extra...)...)
	}
	if out := want(ExitFailure, "penalize", "-e", "team-a", "-r", "llm", "--limits", "slots", "--for", "1s", "-o", "json"); !strings.Contains(out, `"field": "limits"`) {
		t.Errorf("penalize a concurrency limit:\n%s", out)
	}
}

// The events command releases through a server as through a store.
func TestEventsThroughServer(t *testing.T) {
	url := testServer(t)
	want := serverAt(t, url)
	want(ExitOK, "limits", "set", "--resource", "emr", "clusters:3/reserved")
	for _, id := range []string{"j-2AXXXXXXGAPLF", "j-3BYYYYYYQ7R2M", "j-kept"} {
		want(ExitOK, "reservations", "reserve", id, "-e", "team-a", "-r", "emr", "-c", "clusters=1")
	}
	recorded, err := os.ReadFile("../../events/testdata/emr-events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	// The recording's two malformed values make the exit code 1, after
	// every event was processed.
	code, out, errOut := run(t, string(recorded), "events", "--rules", "../../events/testdata/emr-rules.yaml", "--server", url, "-o", "json")
	var counts map[string]uint64
	if code != ExitFailure || json.Unmarshal([]byte(out), &counts) != nil || counts["released"] != 2 || counts["not_found"] != 3 || counts["failed"] != 0 {
		t.Fatalf("events --server: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := reservationsOut(t, want(ExitOK, "reservations", "list", "-e", "team-a", "-o", "json")); !slices.Equal(got, []string{"j-kept"}) {
		t.Errorf("left %v, want [j-kept]", got)
	}
	wantEventReleases(t, want(ExitOK, "audit", "list", "-e", "team-a", "-o", "json"))
}

// wantReservationAudit checks the audit log of testReservationsCommands:
// the reservations made (j-1, j-2, j-3) and the one released (j-1), each
// once and by the command's principal.
func wantReservationAudit(t *testing.T, out string) {
	t.Helper()
	var audit api.AuditResponse
	decode(t, out, &audit)
	var got []string
	for _, ev := range audit.Events {
		if !strings.HasPrefix(ev.Action, "reservation.") {
			continue
		}
		got = append(got, ev.Action+" "+ev.Details["reservation"])
		if !strings.HasPrefix(ev.Principal, "cli:") {
			t.Errorf("%s of %s by %q, want the cli's principal", ev.Action, ev.Details["reservation"], ev.Principal)
		}
	}
	want := []string{"reservation.reserve j-1", "reservation.reserve j-2", "reservation.release j-1", "reservation.reserve j-3"}
	if !slices.Equal(got, want) {
		t.Errorf("reservation events %v, want %v", got, want)
	}
}

// wantEventReleases checks the audit log (audit list -o json) of the
// recorded events' releases: the two clusters', by the command's
// principal, each with the rule and the event.
func wantEventReleases(t *testing.T, out string) {
	t.Helper()
	var audit api.AuditResponse
	decode(t, out, &audit)
	var got []string
	for _, ev := range audit.Events {
		if ev.Action != model.ActionReservationRelease {
			continue
		}
		got = append(got, ev.Details["reservation"])
		if !strings.HasPrefix(ev.Principal, "cli:") || ev.Details["how"] != "event" || ev.Details["rule"] != "emr-terminated" || ev.Details["event_id"] == "" {
			t.Errorf("release event %+v, want one by the cli on an emr-terminated event", ev)
		}
	}
	if !slices.Equal(got, []string{"j-2AXXXXXXGAPLF", "j-3BYYYYYYQ7R2M"}) {
		t.Errorf("release events of %v, want the two clusters terminated", got)
	}
}

// The recorded events on standard input release the reservations they name.
func TestEventsCommand(t *testing.T) {
	c := newCLI(t)
	c.want(ExitOK, "limits", "set", "--resource", "emr", "clusters:3/reserved")
	for _, id := range []string{"j-2AXXXXXXGAPLF", "j-3BYYYYYYQ7R2M", "j-kept"} {
		c.want(ExitOK, "reservations", "reserve", id, "-e", "team-a", "-r", "emr", "-c", "clusters=1")
	}
	recorded, err := os.ReadFile("../../events/testdata/emr-events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	rules := "../../events/testdata/emr-rules.yaml"
	// Every event is processed, and the two malformed values (a line
	// that is not JSON, an event without its id) make the exit code 1.
	code, out, errOut := run(t, string(recorded), "events", "--rules", rules, "--store", c.store, "-o", "json")
	if code != ExitFailure || !strings.Contains(errOut, "2 values were malformed") {
		t.Fatalf("events: exit %d, want %d and the malformed values said\n%s\n%s", code, ExitFailure, out, errOut)
	}
	var counts map[string]uint64
	if err := json.Unmarshal([]byte(out), &counts); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	// The batch job was not reserved here: one more not found than with
	// every reservation held.
	want := map[string]uint64{"released": 2, "not_found": 3, "unmatched": 3, "malformed": 2, "failed": 0}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, counts[k], v, counts)
		}
	}
	if !strings.Contains(errOut, "malformed event skipped") {
		t.Errorf("the malformed events are not logged:\n%s", errOut)
	}
	if got := reservationsOut(t, c.want(ExitOK, "reservations", "list", "-e", "team-a", "-o", "json")); !slices.Equal(got, []string{"j-kept"}) {
		t.Errorf("left %v, want [j-kept]", got)
	}
	wantEventReleases(t, c.want(ExitOK, "audit", "list", "-e", "team-a", "-o", "json"))
	// The table form, and bad rules files.
	if code, out, _ := run(t, "", "events", "--rules", rules, "--store", c.store); code != ExitOK || !strings.Contains(out, "NOT FOUND") {
		t.Errorf("events table: exit %d\n%s", code, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("rules: [{source: aws.emr}]"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{bad, filepath.Join(t.TempDir(), "missing.yaml")} {
		if code, _, errOut := run(t, "", "events", "--rules", path, "--store", c.store); code != ExitUsage {
			t.Errorf("events --rules %s: exit %d, want %d\n%s", path, code, ExitUsage, errOut)
		}
	}
}

// The recorded events in every shape the events package reads (pretty-
// printed, several on a line, an array, SQS batches) release the same
// reservations; the exit code is 1 for the one event without its id, and
// 0 for input that is all events.
func TestEventsCommandShapes(t *testing.T) {
	rules := "../../events/testdata/emr-rules.yaml"
	for _, file := range []string{"emr-events-pretty.json", "emr-events-several.jsonl", "emr-events-array.json", "emr-events-sqs-lambda.json", "emr-events-sqs-receive.json"} {
		t.Run(file, func(t *testing.T) {
			c := newCLI(t)
			c.want(ExitOK, "limits", "set", "--resource", "emr", "clusters:3/reserved")
			for _, id := range []string{"j-2AXXXXXXGAPLF", "j-3BYYYYYYQ7R2M", "j-kept"} {
				c.want(ExitOK, "reservations", "reserve", id, "-e", "team-a", "-r", "emr", "-c", "clusters=1")
			}
			in, err := os.ReadFile("../../events/testdata/" + file)
			if err != nil {
				t.Fatal(err)
			}
			code, out, errOut := run(t, string(in), "events", "--rules", rules, "--store", c.store, "-o", "json")
			var counts map[string]uint64
			if err := json.Unmarshal([]byte(out), &counts); err != nil || code != ExitFailure || !strings.Contains(errOut, "1 value was malformed") {
				t.Fatalf("events: exit %d, want %d and the malformed value said\n%s\n%s", code, ExitFailure, out, errOut)
			}
			want := map[string]uint64{"released": 2, "not_found": 3, "unmatched": 3, "malformed": 1, "failed": 0}
			if !maps.Equal(counts, want) {
				t.Errorf("counts %v, want %v", counts, want)
			}
			if got := reservationsOut(t, c.want(ExitOK, "reservations", "list", "-e", "team-a", "-o", "json")); !slices.Equal(got, []string{"j-kept"}) {
				t.Errorf("left %v, want [j-kept]", got)
			}
		})
	}
	c := newCLI(t)
	c.want(ExitOK, "limits", "set", "--resource", "emr", "clusters:3/reserved")
	c.want(ExitOK, "reservations", "reserve", "j-1", "-e", "team-a", "-r", "emr", "-c", "clusters=1")
	in := `{
  "source": "aws.emr",
  "detail-type": "EMR Cluster State Change",
  "detail": {"clusterId": "j-1", "state": "TERMINATED"}
}
{"messageId": "m-1", "body": "{\"source\":\"aws.emr\",\"detail-type\":\"EMR Cluster State Change\",\"detail\":{\"clusterId\":\"j-1\",\"state\":\"TERMINATED\"}}"}
`
	if code, out, errOut := run(t, in, "events", "--rules", rules, "--store", c.store, "-o", "json"); code != ExitOK || !strings.Contains(out, `"released": 1`) || !strings.Contains(out, `"not_found": 1`) {
		t.Errorf("events, all events: exit %d, want %d\n%s\n%s", code, ExitOK, out, errOut)
	}
}

// `leases list` shows the open durable leases, not reservations, on a store
// and through a server.
func TestLeasesListCommand(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "t.db")
	st, err := embedded.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := tollgate.New(st)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	limits := tollgate.WithLimits(tollgate.ConcurrencyLimit("slots", 5), tollgate.ReservedLimit("clusters", 5))
	var ids []string
	byEntity := map[string]string{}
	for _, e := range []string{"key-1", "key-2"} {
		le, err := lim.Acquire(ctx, e, "jobs", tollgate.Consume{"slots": 2}, limits)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, le.ID())
		byEntity[e] = le.ID()
	}
	if _, err := lim.Acquire(ctx, "key-1", "jobs", tollgate.Consume{"clusters": 1}, limits, tollgate.WithReservation("j-1")); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	want := (&cli{t: t, store: "embedded:" + db}).want
	var v struct {
		Leases []leaseJSON `json:"leases"`
	}
	if err := json.Unmarshal([]byte(want(ExitOK, "leases", "list", "-o", "json")), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Leases) != 2 || v.Leases[0].ID != ids[0] || v.Leases[1].ID != ids[1] || v.Leases[0].Consumed["slots"] != 2 || v.Leases[0].Expires == "" {
		t.Fatalf("leases: %+v, want %v with 2 slots each", v.Leases, ids)
	}
	table := want(ExitOK, "leases", "list", "-e", "key-2", "-r", "jobs")
	if !strings.Contains(table, byEntity["key-2"]) || strings.Contains(table, byEntity["key-1"]) || !strings.Contains(table, "slots=2") {
		t.Errorf("key-2's table:\n%s", table)
	}
	want(ExitFailure, "leases", "list", "-r", "jobs")

	url := testServer(t)
	c, err := client.New(url)
	if err != nil {
		t.Fatal(err)
	}
	le, err := c.Acquire(ctx, "key-3", "jobs", tollgate.Consume{"slots": 1}, limits)
	if err != nil {
		t.Fatal(err)
	}
	if out := serverAt(t, url)(ExitOK, "leases", "list", "-e", "key-3"); !strings.Contains(out, le.ID()) || !strings.Contains(out, "slots=1") {
		t.Errorf("through the server:\n%s", out)
	}
}
