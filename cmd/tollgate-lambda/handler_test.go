package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tollgate-rl/tollgate/aggregator"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

const (
	testShard = "shardId-00000001767225600000-0123abcd"
	testNS    = "ns1"
)

// t0 is 10:00 UTC; records are dated to the second, as stream records are.
var t0 = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)

type attrs = map[string]events.DynamoDBAttributeValue

// bucket is the image of shard `shard` of the bucket of key1 on gpt-4o,
// with the consumed counters of rpm and tpm and the acquire counter.
func bucket(shard int, rpmTC, tpmTC, ev int64) attrs {
	n := func(v int64) events.DynamoDBAttributeValue {
		return events.NewNumberAttribute(strconv.FormatInt(v, 10))
	}
	return attrs{
		"PK":          events.NewStringAttribute(testNS + "/BUCKET#key1#gpt-4o#" + strconv.Itoa(shard)),
		"SK":          events.NewStringAttribute("#STATE"),
		"entity":      events.NewStringAttribute("key1"),
		"resource":    events.NewStringAttribute("gpt-4o"),
		"shard":       n(int64(shard)),
		"b_rpm_tc":    n(rpmTC),
		"b_rpm_tk":    n(60000 - rpmTC), // not a counter: ignored
		"b_tpm_tc":    n(tpmTC),
		"ev":          n(ev),
		"v":           n(ev + 7),
		"shard_count": n(2),
	}
}

func keysOf(img attrs) attrs { return attrs{"PK": img["PK"], "SK": img["SK"]} }

// record is a stream record of the change from old to new (either nil).
func record(seq int64, at time.Time, old, new attrs) events.DynamoDBEventRecord {
	name, keys := events.DynamoDBOperationTypeModify, keysOf(new)
	switch {
	case old == nil:
		name = events.DynamoDBOperationTypeInsert
	case new == nil:
		name, keys = events.DynamoDBOperationTypeRemove, keysOf(old)
	}
	return events.DynamoDBEventRecord{
		AWSRegion: "eu-west-1", EventID: "id" + strconv.FormatInt(seq, 10), EventName: string(name),
		EventSource: "aws:dynamodb", EventVersion: "1.1",
		EventSourceArn: "arn:aws:dynamodb:eu-west-1:123456789012:table/tollgate/stream/2026-01-01T00:00:00.000",
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: at},
			Keys:                        keys, OldImage: old, NewImage: new,
			SequenceNumber: strconv.FormatInt(seq, 10), SizeBytes: 300,
			StreamViewType: string(events.DynamoDBStreamViewTypeNewAndOldImages),
		},
	}
}

// event wraps records as Lambda sends them with a tumbling window: through
// JSON, so that the test reads what the runtime decodes.
func event(t *testing.T, shard string, recs ...events.DynamoDBEventRecord) events.DynamoDBTimeWindowEvent {
	t.Helper()
	ev := events.DynamoDBTimeWindowEvent{DynamoDBEvent: events.DynamoDBEvent{Records: recs}}
	ev.ShardID = shard
	ev.EventSourceARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/tollgate/stream/2026-01-01T00:00:00.000"
	start := t0.Truncate(15 * time.Minute)
	ev.Window = events.Window{Start: events.RFC3339EpochTime{Time: start}, End: events.RFC3339EpochTime{Time: start.Add(15 * time.Minute)}}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var out events.DynamoDBTimeWindowEvent
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.ShardID != shard || len(out.Records) != len(recs) {
		t.Fatalf("event did not survive JSON: %s", b)
	}
	return out
}

type usage struct {
	consumed map[string]int64
	events   int64
}

// listUsage returns key1's snapshots on gpt-4o in window w, by start.
func listUsage(t *testing.T, us store.UsageStore, w store.Window) map[time.Time]usage {
	t.Helper()
	snaps, err := us.ListUsage(context.Background(), testNS, store.UsageQuery{
		Entity: "key1", Resource: "gpt-4o", Window: w, From: 0, To: t0.Add(48 * time.Hour).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	out := map[time.Time]usage{}
	for _, s := range snaps {
		out[time.UnixMilli(s.Key.Start).UTC()] = usage{consumed: s.Consumed, events: s.Events}
	}
	return out
}

func sameUsage[K comparable](a, b map[K]usage) bool {
	return maps.EqualFunc(a, b, func(x, y usage) bool { return x.events == y.events && maps.Equal(x.consumed, y.consumed) })
}

func checkUsage(t *testing.T, us store.UsageStore, w store.Window, want map[time.Time]usage) {
	t.Helper()
	if got := listUsage(t, us, w); !sameUsage(got, want) {
		t.Errorf("%s usage = %v, want %v", w, got, want)
	}
}

func TestHandlerAppliesDifferencesExactlyOnce(t *testing.T) {
	ctx := context.Background()
	us := memory.New()
	h := &handler{usage: us, retention: aggregator.DefaultRetention}

	b0a, b0b, b0c := bucket(0, 3000, 500, 1), bucket(0, 5000, 500, 2), bucket(0, 4000, 900, 2)
	b1a := bucket(1, 1000, 100, 1)
	meta := attrs{"PK": events.NewStringAttribute(testNS + "/ENTITY#key1"), "SK": events.NewStringAttribute("#META"),
		"name": events.NewStringAttribute("key one"), "ev": events.NewNumberAttribute("5")}
	ev := event(t, testShard,
		record(100, t0, nil, b0a),                            // INSERT: all of it, 1 acquire
		record(101, t0.Add(time.Second), b0a, b0b),           // MODIFY: +2000 rpm, 1 acquire
		record(102, t0.Add(2*time.Second), nil, meta),        // not a bucket
		record(103, t0.Add(time.Hour), b0b, b0c),             // next hour: -1000 rpm (a refund), +400 tpm
		record(104, t0.Add(time.Hour), nil, b1a),             // the bucket's other shard: same snapshots
		record(105, t0.Add(time.Hour+time.Second), b1a, nil), // REMOVE: nothing
	)
	resp, err := h.handle(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(resp); !strings.Contains(string(b), `"state":{}`) {
		t.Errorf("response %s has no state: Lambda takes it for a failure under a tumbling window", b)
	}
	hour, next := t0, t0.Add(time.Hour)
	wantHourly := map[time.Time]usage{
		hour: {consumed: map[string]int64{"rpm": 5000, "tpm": 500}, events: 2},
		next: {consumed: map[string]int64{"rpm": -1000 + 1000, "tpm": 400 + 100}, events: 0 + 1},
	}
	wantDaily := map[time.Time]usage{
		t0.Truncate(24 * time.Hour): {consumed: map[string]int64{"rpm": 5000, "tpm": 1000}, events: 3},
	}
	checkUsage(t, us, store.Hourly, wantHourly)
	checkUsage(t, us, store.Daily, wantDaily)

	// Lambda hands the batch again (a retry), and a part of it (a bisected
	// or partially failed batch): nothing moves.
	for _, again := range []events.DynamoDBTimeWindowEvent{ev, event(t, testShard, ev.Records[1:4]...)} {
		if _, err := h.handle(ctx, again); err != nil {
			t.Fatal(err)
		}
		checkUsage(t, us, store.Hourly, wantHourly)
		checkUsage(t, us, store.Daily, wantDaily)
	}
}

// With ParallelizationFactor above 1, Lambda keeps the order of one item's
// records only: a later record of one shard of a bucket may be applied
// before an earlier record of its other shard. Both feed the same
// snapshots, and both must count.
func TestHandlerOrdersPerItem(t *testing.T) {
	ctx := context.Background()
	us := memory.New()
	h := &handler{usage: us, retention: aggregator.DefaultRetention}
	later := event(t, testShard, record(300, t0, nil, bucket(1, 700, 0, 1)))
	earlier := event(t, testShard, record(200, t0, nil, bucket(0, 300, 0, 1)))
	for _, ev := range []events.DynamoDBTimeWindowEvent{later, earlier, later, earlier} {
		if _, err := h.handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	checkUsage(t, us, store.Hourly, map[time.Time]usage{t0: {consumed: map[string]int64{"rpm": 1000}, events: 2}})
}

// Records of different stream shards are different sources even for one
// item: sequence numbers are ordered within a shard only.
func TestHandlerSourcePerShard(t *testing.T) {
	ctx := context.Background()
	us := memory.New()
	h := &handler{usage: us, retention: aggregator.DefaultRetention}
	b1, b2 := bucket(0, 100, 0, 1), bucket(0, 300, 0, 2)
	if _, err := h.handle(ctx, event(t, "shardId-child", record(500, t0.Add(time.Second), b1, b2))); err != nil {
		t.Fatal(err)
	}
	if _, err := h.handle(ctx, event(t, "shardId-parent", record(400, t0, nil, b1))); err != nil {
		t.Fatal(err)
	}
	checkUsage(t, us, store.Hourly, map[time.Time]usage{t0: {consumed: map[string]int64{"rpm": 300}, events: 2}})
}

func TestHandlerRefuses(t *testing.T) {
	ctx := context.Background()
	us := memory.New()
	h := &handler{usage: us, retention: aggregator.DefaultRetention}
	rec := record(100, t0, nil, bucket(0, 3000, 0, 1))

	if _, err := h.handle(ctx, event(t, "", rec)); !errors.Is(err, errNoShard) {
		t.Errorf("no shard id (no tumbling window): err = %v, want errNoShard", err)
	}
	newOnly := rec
	newOnly.Change.StreamViewType = string(events.DynamoDBStreamViewTypeNewImage)
	if _, err := h.handle(ctx, event(t, testShard, newOnly)); err == nil || !strings.Contains(err.Error(), "NEW_AND_OLD_IMAGES") {
		t.Errorf("NEW_IMAGE stream: err = %v, want a view type error", err)
	}
	badSeq := rec
	badSeq.Change.SequenceNumber = "12a"
	if _, err := h.handle(ctx, event(t, testShard, badSeq)); err == nil {
		t.Error("sequence number 12a: no error")
	}
	noKeys := rec
	noKeys.Change.Keys = nil
	if _, err := h.handle(ctx, event(t, testShard, noKeys)); err == nil {
		t.Error("record without keys: no error")
	}
	checkUsage(t, us, store.Hourly, map[time.Time]usage{})

	// A window's final invocation may come without records, and so without
	// anything to refuse.
	if _, err := h.handle(ctx, events.DynamoDBTimeWindowEvent{}); err != nil {
		t.Errorf("empty event: %v", err)
	}
}

// A failed write is returned, so that Lambda hands the batch again.
func TestHandlerReturnsWriteErrors(t *testing.T) {
	h := &handler{usage: failingUsage{memory.New()}, retention: aggregator.DefaultRetention}
	_, err := h.handle(context.Background(), event(t, testShard, record(100, t0, nil, bucket(0, 3000, 0, 1))))
	if !errors.Is(err, errWrite) {
		t.Errorf("err = %v, want the write error", err)
	}
}

var errWrite = errors.New("write failed")

// The aggregator's mark is written after the first batch of an execution
// environment, again after the next if it failed, then never; its
// failure is not the batch's.
func TestHandlerMarksOnce(t *testing.T) {
	var calls int
	h := &handler{usage: memory.New(), retention: aggregator.DefaultRetention, log: slog.New(slog.DiscardHandler),
		mark: func(context.Context) error {
			calls++
			if calls == 1 {
				return errWrite
			}
			return nil
		}}
	for i, want := range []int{1, 2, 2} {
		if _, err := h.handle(context.Background(), event(t, testShard, record(int64(100+i), t0, nil, bucket(0, 3000, int64(i), 1)))); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if calls != want {
			t.Errorf("after batch %d: %d marks, want %d", i, calls, want)
		}
	}
}

type failingUsage struct{ store.UsageStore }

func (failingUsage) AddUsage(context.Context, string, []store.UsageIncrement) error { return errWrite }

func TestSource(t *testing.T) {
	keys := attrs{"SK": events.NewStringAttribute("#STATE"), "PK": events.NewStringAttribute(`ns/BUCKET#a#b#0`)}
	got, err := source("shardId-1", keys)
	want := `shardId-1/"PK"=S"ns/BUCKET#a#b#0","SK"=S"#STATE"`
	if err != nil || got != want {
		t.Errorf("source = %q, %v; want %q (the form must never change)", got, err, want)
	}
	got, err = source("s", attrs{"id": events.NewNumberAttribute("12"), "b": events.NewBinaryAttribute([]byte{0xff})})
	if want := `s/"b"=B"/w==","id"=N"12"`; err != nil || got != want {
		t.Errorf("source = %q, %v; want %q", got, err, want)
	}
	if _, err := source("s", attrs{"k": events.NewBooleanAttribute(true)}); err == nil {
		t.Error("boolean key: no error")
	}
}

func TestConfigFrom(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	c, err := configFrom(env("TOLLGATE_TABLE", "tollgate"))
	if err != nil || c.table != "tollgate" || c.retention != aggregator.DefaultRetention {
		t.Errorf("defaults: %+v, %v", c, err)
	}
	if !c.upkeep {
		t.Errorf("defaults: upkeep %v; want on", c.upkeep)
	}
	c, err = configFrom(env("TOLLGATE_TABLE", "t", "TOLLGATE_RETENTION", "720h", "TOLLGATE_UPKEEP", "false", "TOLLGATE_LOOKAHEAD", "5s"))
	if err != nil || c.retention != 720*time.Hour || c.upkeep {
		t.Errorf("retention 720h, no upkeep, a lookahead (ignored): %+v, %v", c, err)
	}
	c, err = configFrom(env("TOLLGATE_TABLE", "t", "TOLLGATE_REFILL", "false"))
	if err != nil || c.upkeep {
		t.Errorf("TOLLGATE_REFILL, the former name: %+v, %v; want no upkeep", c, err)
	}
	if c.mode != "aggregate" || c.reconcile != defaultReconcileInterval {
		t.Errorf("defaults: mode %q, reconcile every %v; want aggregate, %v", c.mode, c.reconcile, defaultReconcileInterval)
	}
	c, err = configFrom(env("TOLLGATE_TABLE", "t", "TOLLGATE_MODE", "reconcile", "TOLLGATE_RECONCILE_INTERVAL", "0"))
	if err != nil || c.mode != "reconcile" || c.reconcile != 0 {
		t.Errorf("reconcile mode, no reconciling after batches: %+v, %v", c, err)
	}
	for _, bad := range [][]string{{}, {"TOLLGATE_TABLE", "t", "TOLLGATE_RETENTION", "90d"}, {"TOLLGATE_TABLE", "t", "TOLLGATE_RETENTION", "-1h"},
		{"TOLLGATE_TABLE", "t", "TOLLGATE_REFILL", "maybe"}, {"TOLLGATE_TABLE", "t", "TOLLGATE_UPKEEP", "sometimes"},
		{"TOLLGATE_TABLE", "t", "TOLLGATE_MODE", "serve"}, {"TOLLGATE_TABLE", "t", "TOLLGATE_RECONCILE_INTERVAL", "-1m"}} {
		if _, err := configFrom(env(bad...)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
