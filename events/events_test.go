package events_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-rl/tollgate/events"
	"github.com/tollgate-rl/tollgate/model"
)

// fakeReleaser holds reservations by id; Release of an id it does not hold
// is ErrLeaseNotFound, of an id in fail the error there.
type fakeReleaser struct {
	mu       sync.Mutex
	held     map[string]bool
	released []string
	fail     map[string]error
	// triggers are the write options' triggers of each release, by id.
	triggers map[string]model.EventTrigger
}

func newReleaser(ids ...string) *fakeReleaser {
	r := &fakeReleaser{held: map[string]bool{}, fail: map[string]error{}, triggers: map[string]model.EventTrigger{}}
	for _, id := range ids {
		r.held[id] = true
	}
	return r
}

func (r *fakeReleaser) Release(_ context.Context, id string, opts ...model.WriteOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.fail[id]; err != nil {
		return err
	}
	if !r.held[id] {
		return model.ErrLeaseNotFound
	}
	delete(r.held, id)
	r.released = append(r.released, id)
	r.triggers[id] = model.WriteSettingsOf(opts...).Trigger
	return nil
}

func loadRules(t *testing.T) *events.Config {
	t.Helper()
	f, err := os.Open("testdata/emr-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := events.LoadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// The recorded events: a cluster's life (starting, running, terminated
// twice: delivered twice), another cluster failing, an EC2 event, a batch
// job, a cluster never reserved, an event without its id, and a line that
// is not JSON.
func TestRecordedEvents(t *testing.T) {
	f, err := os.Open("testdata/emr-events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rel := newReleaser("j-2AXXXXXXGAPLF", "j-3BYYYYYYQ7R2M", "4c7b1d5e-8f2a-4e3b-9c6d-1a2b3c4d5e6f", "j-kept")
	var logs bytes.Buffer
	p, err := events.NewProcessor(loadRules(t), rel, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(t.Context(), f); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []string{"j-2AXXXXXXGAPLF", "j-3BYYYYYYQ7R2M", "4c7b1d5e-8f2a-4e3b-9c6d-1a2b3c4d5e6f"}
	if !slices.Equal(rel.released, want) {
		t.Errorf("released %v, want %v", rel.released, want)
	}
	if !rel.held["j-kept"] {
		t.Error("a reservation no event named was released")
	}
	// Each release names its rule and the event that made it: the first
	// of a cluster's two termination events.
	wantTriggers := map[string]model.EventTrigger{
		"j-2AXXXXXXGAPLF":                      {Rule: "emr-terminated", Source: "aws.emr", DetailType: "EMR Cluster State Change", EventID: "c2b1f0a4-5e6d-4f7a-9b8c-1d2e3f4a5b6c"},
		"4c7b1d5e-8f2a-4e3b-9c6d-1a2b3c4d5e6f": {Rule: "batch-done", Source: "aws.batch", DetailType: "Batch Job State Change", EventID: "5f4e3d2c-1b0a-4987-b6a5-c4d3e2f1a0b9"},
	}
	for id, want := range wantTriggers {
		if got := rel.triggers[id]; got != want {
			t.Errorf("trigger of %s = %+v, want %+v", id, got, want)
		}
	}
	wantStats := events.Stats{Released: 3, NotFound: 2, Unmatched: 3, Malformed: 2}
	if st := p.Stats(); st != wantStats {
		t.Errorf("Stats = %+v, want %+v", st, wantStats)
	}
	// The line that is not JSON is named by the offset of the error.
	for _, why := range []string{"no string at detail.clusterId", "not JSON at byte 3209"} {
		if !strings.Contains(logs.String(), why) {
			t.Errorf("log does not say %q:\n%s", why, logs.String())
		}
	}
}

func TestHandleOutcomes(t *testing.T) {
	down := errors.New("store down")
	rel := newReleaser("j-1", "j-2")
	rel.fail["j-down"] = down
	rel.fail["bad id"] = model.Invalid("reservation", "bad id", "contains ' '")
	p, err := events.NewProcessor(loadRules(t), rel, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	emr := func(id, state string) string {
		return `{"source":"aws.emr","detail-type":"EMR Cluster State Change","detail":{"clusterId":"` + id + `","state":"` + state + `"}}`
	}
	cases := []struct {
		name  string
		event string
		want  events.Outcome
		err   error
	}{
		{"terminated", emr("j-1", "TERMINATED"), events.Released, nil},
		{"terminated with errors", emr("j-2", "TERMINATED_WITH_ERRORS"), events.Released, nil},
		{"again", emr("j-1", "TERMINATED"), events.NotFound, nil},
		{"still running", emr("j-3", "RUNNING"), events.Unmatched, nil},
		{"other detail-type", `{"source":"aws.emr","detail-type":"EMR Step Status Change","detail":{"clusterId":"j-3","state":"TERMINATED"}}`, events.Unmatched, nil},
		{"state a number", `{"source":"aws.emr","detail-type":"EMR Cluster State Change","detail":{"clusterId":"j-3","state":7}}`, events.Unmatched, nil},
		{"id a number", `{"source":"aws.emr","detail-type":"EMR Cluster State Change","detail":{"clusterId":42,"state":"TERMINATED"}}`, events.Malformed, nil},
		{"id empty", emr("", "TERMINATED"), events.Malformed, nil},
		{"an array", `[1,2]`, events.Malformed, nil},
		{"no source", `{"detail-type":"EMR Cluster State Change","detail":{"clusterId":"j-1","state":"TERMINATED"}}`, events.Malformed, nil},
		{"an SQS message", `{"messageId":"m-1","body":"{}"}`, events.Malformed, nil},
		{"store down", emr("j-down", "TERMINATED"), events.Failed, down},
		{"invalid id", emr("bad id", "TERMINATED"), events.Malformed, model.ErrInvalid},
	}
	for _, c := range cases {
		res := p.Handle(t.Context(), []byte(c.event))
		if res.Outcome != c.want || c.err != nil && !errors.Is(res.Err, c.err) {
			t.Errorf("%s: %v (%v), want %v (%v)", c.name, res.Outcome, res.Err, c.want, c.err)
		}
	}
	if res := p.Handle(t.Context(), bytes.Repeat([]byte(" "), events.MaxEventSize+1)); res.Outcome != events.Malformed {
		t.Errorf("an event beyond MaxEventSize: %v, want malformed", res.Outcome)
	}
}

func TestPathsIntoArrays(t *testing.T) {
	cfg := &events.Config{Rules: []events.Rule{{Source: "aws.batch", ID: "resources.1", When: map[string][]string{"detail.attempt": {"3"}, "detail.final": {"true"}}}}}
	rel := newReleaser("arn-b")
	p, err := events.NewProcessor(cfg, rel, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	ev := `{"source":"aws.batch","resources":["arn-a","arn-b"],"detail":{"attempt":3,"final":true}}`
	if res := p.Handle(t.Context(), []byte(ev)); res.Outcome != events.Released || res.ID != "arn-b" {
		t.Errorf("Handle = %+v, want arn-b released", res)
	}
	if res := p.Handle(t.Context(), []byte(strings.Replace(ev, `"attempt":3`, `"attempt":2`, 1))); res.Outcome != events.Unmatched {
		t.Errorf("attempt 2: %v, want unmatched", res.Outcome)
	}
}

// An event's fields past model.MaxTriggerFieldLen (not EventBridge's:
// its detail-type is at most 128 characters) are cut for the release's
// audit, on a character boundary, and never stop the release.
func TestTriggerFieldsClipped(t *testing.T) {
	cfg := &events.Config{Rules: []events.Rule{{Name: "any-detail", Source: "test", ID: "detail.id"}}}
	rel := newReleaser("r-1")
	p, err := events.NewProcessor(cfg, rel, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	long := "x" + strings.Repeat("é", model.MaxTriggerFieldLen) // 1 + 2 bytes each: no boundary at the bound
	ev := `{"id":"e-1","source":"test","detail-type":"` + long + `","detail":{"id":"r-1"}}`
	if res := p.Handle(t.Context(), []byte(ev)); res.Outcome != events.Released {
		t.Fatalf("Handle = %+v, want released", res)
	}
	got := rel.triggers["r-1"]
	if want := long[:model.MaxTriggerFieldLen-1]; got.DetailType != want || got.Rule != "any-detail" || got.EventID != "e-1" {
		t.Errorf("trigger = %+v, want the detail-type cut to %d bytes", got, len(want))
	}
	if err := got.Validate(); err != nil {
		t.Errorf("the trigger is out of bounds: %v", err)
	}
}

// A line longer than an event may be is skipped, and the stream goes on.
func TestRunSkipsOversizedLines(t *testing.T) {
	rel := newReleaser("j-1")
	p, err := events.NewProcessor(loadRules(t), rel, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	in := strings.Repeat("x", events.MaxEventSize+10) + "\n" +
		`{"source":"aws.emr","detail-type":"EMR Cluster State Change","detail":{"clusterId":"j-1","state":"TERMINATED"}}`
	if err := p.Run(t.Context(), strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Malformed != 1 || st.Released != 1 {
		t.Errorf("Stats = %+v, want 1 malformed and 1 released", st)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := map[string]struct{ yaml, field string }{
		"no rules":        {"rules: []", "rules"},
		"no source":       {"rules: [{id: detail.x}]", "rules[0].source"},
		"no id":           {"rules: [{source: aws.emr}]", "rules[0].id"},
		"empty segment":   {"rules: [{source: aws.emr, id: detail..x}]", "rules[0].id"},
		"duplicate name":  {"rules: [{name: a, source: s, id: x}, {name: a, source: s, id: y}]", "rules[1].name"},
		"when no values":  {"rules: [{source: s, id: x, when: {detail.state: []}}]", "rules[0].when.detail.state"},
		"unknown key":     {"rules: [{source: s, id: x, detailtype: y}]", ""},
		"deep path":       {"rules: [{source: s, id: " + strings.Repeat("a.", 16) + "a}]", "rules[0].id"},
		"not yaml at all": {"rules: [", ""},
	}
	for name, c := range cases {
		_, err := events.ParseConfig([]byte(c.yaml))
		var ce *events.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, model.ErrInvalid) {
			t.Errorf("%s: %v, want a ConfigError at %q", name, err, c.field)
		}
	}
	big := strings.NewReader("#" + strings.Repeat("x", events.MaxConfigSize))
	if _, err := events.LoadConfig(big); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("an oversized file: %v, want ErrInvalid", err)
	}
}

// Whatever the bytes, Handle decides without panicking, and releases only
// what a rule names.
func FuzzHandle(f *testing.F) {
	data, err := os.ReadFile("testdata/emr-events.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		f.Add(line)
	}
	cfg, err := events.ParseConfig([]byte(`rules: [{source: aws.emr, id: detail.clusterId, when: {detail.state: [TERMINATED]}}]`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		rel := newReleaser()
		p, err := events.NewProcessor(cfg, rel, quietLog())
		if err != nil {
			t.Fatal(err)
		}
		res := p.Handle(context.Background(), raw)
		if res.Outcome > events.Failed || res.Outcome == events.Released || res.Outcome == events.Failed {
			t.Fatalf("outcome %v for %q (nothing is held, nothing fails)", res.Outcome, raw)
		}
		if (res.Outcome == events.NotFound) != (res.ID != "") {
			t.Fatalf("outcome %v with id %q", res.Outcome, res.ID)
		}
	})
}
