package events_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/events"
)

// The recorded events (testdata/emr-events.jsonl, its JSON lines) in the
// other shapes a stream may take: pretty-printed one after another,
// several on a line, one array, an SQS batch as Lambda hands it to a
// function, and as `aws sqs receive-message` prints it. Whatever the
// shape, the same reservations are released, in the same order, on the
// same events.
func TestRecordedEventsShapes(t *testing.T) {
	for _, file := range []string{
		"emr-events-pretty.json",
		"emr-events-several.jsonl",
		"emr-events-array.json",
		"emr-events-sqs-lambda.json",
		"emr-events-sqs-receive.json",
	} {
		t.Run(file, func(t *testing.T) {
			f, err := os.Open("testdata/" + file)
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
			if got := rel.triggers["j-2AXXXXXXGAPLF"].EventID; got != "c2b1f0a4-5e6d-4f7a-9b8c-1d2e3f4a5b6c" {
				t.Errorf("j-2AXXXXXXGAPLF released on event %q, want its first termination's", got)
			}
			// The nine events of the recording: its line that is not JSON
			// is not in these files.
			if st, want := p.Stats(), (events.Stats{Released: 3, NotFound: 2, Unmatched: 3, Malformed: 1}); st != want {
				t.Errorf("Stats = %+v, want %+v\n%s", st, want, logs.String())
			}
		})
	}
}

// An SQS batch as Lambda hands it: each result names the message its
// event came in, so that a partial batch response can name the messages
// to hand again.
func TestHandleValueSQSBatch(t *testing.T) {
	raw, err := os.ReadFile("testdata/emr-events-sqs-lambda.json")
	if err != nil {
		t.Fatal(err)
	}
	rel := newReleaser("j-2AXXXXXXGAPLF")
	p, err := events.NewProcessor(loadRules(t), rel, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	res := p.HandleValue(t.Context(), raw)
	if len(res) != 9 {
		t.Fatalf("%d results, want one per message (9)", len(res))
	}
	var batch struct{ Records []struct{ MessageID string } }
	if err := json.Unmarshal(raw, &batch); err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if want := batch.Records[i].MessageID; r.MessageID != want || want == "" {
			t.Errorf("result %d names message %q, want %q", i, r.MessageID, want)
		}
	}
	// The fourth message holds j-2AXXXXXXGAPLF's termination.
	if r := res[3]; r.Outcome != events.Released || r.ID != "j-2AXXXXXXGAPLF" {
		t.Errorf("the fourth message: %+v, want j-2AXXXXXXGAPLF released", r)
	}
}

// emrTerminated is an event that releases id.
func emrTerminated(id string) string {
	return `{"source":"aws.emr","detail-type":"EMR Cluster State Change","detail":{"clusterId":"` + id + `","state":"TERMINATED"}}`
}

// A stream goes on past what is not an event: a value that holds none is
// one malformed value; a syntax error is one malformed value, and reading
// resumes on the next line, inside an array if the error was in one.
func TestRunMalformedValues(t *testing.T) {
	ev1, ev2 := emrTerminated("j-1"), emrTerminated("j-2")
	cases := []struct {
		name      string
		in        string
		malformed uint64
		log       string // what the log says of the first
	}{
		{"a line that is not JSON", ev1 + "\nthis is not JSON\n" + ev2, 1, "not JSON at byte " + strconv.Itoa(len(ev1)+2)},
		{"an error mid-line", ev1 + ` {"source": x} ` + ev2 + "\n" + ev2, 1, "not JSON at byte " + strconv.Itoa(len(ev1)+12)},
		{"not events", `{"detail":{}} "text" 42 null true ` + ev1 + "\n" + ev2, 5, "no source"},
		{"an error in an array", "[\n  " + ev1 + ",\n  {\"source\" 1},\n  " + ev2 + "\n]", 1, "not JSON"},
		{"an array inside an array", "[[" + ev1 + "], " + ev1 + ", " + ev2 + "]", 1, "an array inside an array"},
		{"an array not closed", "[" + ev1 + ",\n" + ev2, 1, "the stream ends inside an array"},
		{"a value cut off", ev1 + "\n" + ev2 + "\n" + `{"source": "aws.emr", "detail": {`, 1, "the stream ends inside the value"},
		// The lines after the error are values of their own: the closing
		// brace is one more syntax error.
		{"a damaged pretty-printed event", "{\n  \"source\": \"aws.emr\",\n  \"detail\" {}\n}\n" + ev1 + "\n" + ev2, 2, "not JSON"},
		{"an SQS message whose body is no event", `{"messageId":"m-1","body":"{}"} ` + ev1 + ev2, 1, "message=m-1"},
		{"a record from another source", `{"Records":[{"eventSource":"aws:s3","body":"{}"},{"eventSource":"aws:sqs","body":` + strconv.Quote(ev1) + `}]}` + ev2, 1, "aws:s3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rel := newReleaser("j-1", "j-2")
			var logs bytes.Buffer
			p, err := events.NewProcessor(loadRules(t), rel, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Run(t.Context(), strings.NewReader(c.in)); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if st := p.Stats(); st.Malformed != c.malformed || st.Released != 2 {
				t.Errorf("Stats = %+v, want %d malformed and both released\n%s", st, c.malformed, logs.String())
			}
			if !strings.Contains(logs.String(), c.log) {
				t.Errorf("the log does not say %q:\n%s", c.log, logs.String())
			}
		})
	}
}

// A value larger than MaxValueSize on one line is skipped to the end of
// its line, and read no further than its bound.
func TestRunSkipsOversizedValues(t *testing.T) {
	rel := newReleaser("j-1")
	p, err := events.NewProcessor(loadRules(t), rel, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	big := `{"source":"aws.emr","detail":{"pad":"` + strings.Repeat("x", events.MaxValueSize) + `"}}`
	if err := p.Run(t.Context(), strings.NewReader(big+"\n"+emrTerminated("j-1"))); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Malformed != 1 || st.Released != 1 {
		t.Errorf("Stats = %+v, want 1 malformed and 1 released", st)
	}
}

// Whatever the bytes, Run reads them to the end without an error (a
// strings.Reader never fails), and every release it makes is of an id a
// rule names.
func FuzzRun(f *testing.F) {
	for _, file := range []string{"emr-events.jsonl", "emr-events-pretty.json", "emr-events-array.json", "emr-events-sqs-lambda.json"} {
		data, err := os.ReadFile("testdata/" + file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data[:min(len(data), 2000)]))
	}
	f.Add("[" + emrTerminated("j-1") + ",\n x,\n" + emrTerminated("j-1") + "]]")
	cfg, err := events.ParseConfig([]byte(`rules: [{source: aws.emr, id: detail.clusterId, when: {detail.state: [TERMINATED]}}]`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in string) {
		rel := newReleaser("j-1")
		p, err := events.NewProcessor(cfg, rel, quietLog())
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Run(t.Context(), strings.NewReader(in)); err != nil {
			t.Fatalf("Run(%q): %v", in, err)
		}
		if len(rel.released) > 1 || len(rel.released) == 1 && rel.released[0] != "j-1" {
			t.Fatalf("released %v", rel.released)
		}
	})
}
