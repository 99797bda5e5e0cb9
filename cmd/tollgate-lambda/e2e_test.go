package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/aggregator"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/internal/ddblocal"
	"github.com/tollgate-rl/tollgate/limitertest"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
	"github.com/tollgate-rl/tollgate/store/dynamodb/stream"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// endpoint is the DynamoDB Local of this test binary, set by TestMain.
var endpoint string

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m, &endpoint)) }

// newDynamo is dynamodb.New for arguments a test knows to be valid.
func newDynamo(t testing.TB, cfg aws.Config, table string, opts []dynamodb.Option, optFns ...func(*awsdynamodb.Options)) *dynamodb.Store {
	t.Helper()
	s, err := dynamodb.New(cfg, table, opts, optFns...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func localConfig() aws.Config {
	return aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("tollgate", "local", "")}
}

// The stream of a real table, handed to the handler as Lambda would hand it
// (batch by batch, with the shard id of a tumbling window), gives the same
// usage as the stream reader of `tollgate aggregator`, and handing it all
// again changes nothing.
func TestStreamThroughHandler(t *testing.T) {
	if endpoint == "" {
		t.Skip(ddblocal.Help)
	}
	ctx := context.Background()
	s := newDynamo(t, localConfig(), "tollgate-lambda-"+time.Now().Format("150405.000000"), nil,
		func(o *awsdynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
	if err := s.Admin().CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Admin().DeleteTable(context.Background()) })

	clk := clock.NewFake(time.Now().Truncate(time.Hour).Add(30 * time.Minute))
	lim, adm := limitertest.Planes(t, s, time.Second, tollgate.WithClock(clk))
	if _, err := adm.CreateEntity(ctx, tollgate.Entity{ID: "org"}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateEntity(ctx, tollgate.Entity{ID: "key", ParentID: "org", Cascade: true}); err != nil {
		t.Fatal(err)
	}
	limits := tollgate.WithLimits(tollgate.PerMinute("tpm", 1_000_000))
	for i := range 5 {
		le, err := lim.Acquire(ctx, "key", "llm", tollgate.Consume{"tpm": 100}, limits)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := le.Adjust(ctx, tollgate.Consume{"tpm": 50}); err != nil {
				t.Fatal(err)
			}
		}
		if err := le.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ns, err := s.GetNamespace(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}

	batches := streamBatches(t, s)
	h := &handler{usage: s, retention: aggregator.DefaultRetention, mark: markAs(s, "fn")}
	for _, ev := range batches {
		if _, err := h.handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	// The function marked the table as one an aggregator runs on.
	if m, ok, err := stream.ReadAggregatorMark(ctx, s); err != nil || !ok || m.By != "tollgate-lambda fn" {
		t.Errorf("the aggregator's mark: %+v, %v, %v; want the function's", m, ok, err)
	}
	got := snapshots(t, s, ns.ID)
	for _, entity := range []string{"key", "org"} {
		for _, w := range []store.Window{store.Hourly, store.Daily} {
			if ev, tpm := total(got, entity, w); ev != 5 || tpm != 550_000 {
				t.Errorf("%s usage of %s: %d acquires, %d tpm millitokens; want 5 and 550000", w, entity, ev, tpm)
			}
		}
	}

	// The stream reader's usage of the same stream, into memory.
	mem := memory.New()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- stream.Read(rctx, s, 50*time.Millisecond, func(ctx context.Context, cs []store.Change) error {
			return aggregator.Apply(ctx, mem, cs, aggregator.DefaultRetention)
		})
	}()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if sameUsage(snapshots(t, mem, ns.ID), got) {
			break
		}
		time.Sleep(50 * time.Millisecond) // waiting on DynamoDB Local's stream
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := snapshots(t, mem, ns.ID); !sameUsage(got, want) {
		t.Errorf("through the handler: %v; through the stream reader: %v", got, want)
	}

	// Lambda retries every batch: nothing moves.
	for _, ev := range slices.Backward(batches) {
		if _, err := h.handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if again := snapshots(t, s, ns.ID); !sameUsage(again, got) {
		t.Errorf("after handing every batch again: %v, want %v", again, got)
	}
}

// snapshots returns the snapshots of key and org on llm, by
// "entity/window/start".
func snapshots(t *testing.T, us store.UsageStore, ns string) map[string]usage {
	t.Helper()
	out := map[string]usage{}
	for _, entity := range []string{"key", "org"} {
		for _, w := range []store.Window{store.Hourly, store.Daily} {
			snaps, err := us.ListUsage(context.Background(), ns, store.UsageQuery{Entity: entity, Resource: "llm", Window: w, From: 0, To: 1 << 50})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range snaps {
				out[fmt.Sprintf("%s/%s/%d", entity, w, s.Key.Start)] = usage{consumed: s.Consumed, events: s.Events}
			}
		}
	}
	return out
}

// total sums the snapshots of one entity and window.
func total(snaps map[string]usage, entity string, w store.Window) (events, tpm int64) {
	for k, u := range snaps {
		if strings.HasPrefix(k, entity+"/"+string(w)+"/") {
			events += u.events
			tpm += u.consumed["tpm"]
		}
	}
	return events, tpm
}

// streamBatches reads the table's whole stream, one Lambda event per
// GetRecords page of a shard (of 7 records).
func streamBatches(t *testing.T, s *dynamodb.Store) []events.DynamoDBTimeWindowEvent {
	t.Helper()
	return streamPages(t, s, 7)
}

// streamPages reads the table's whole stream, one Lambda event per
// GetRecords page of a shard, of at most size records.
func streamPages(t *testing.T, s *dynamodb.Store, size int32) []events.DynamoDBTimeWindowEvent {
	t.Helper()
	ctx := context.Background()
	desc, err := s.Admin().DescribeTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	client := dynamodbstreams.New(dynamodbstreams.Options{Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("tollgate", "local", ""), BaseEndpoint: aws.String(endpoint)})
	d, err := client.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: &desc.StreamARN})
	if err != nil {
		t.Fatal(err)
	}
	var out []events.DynamoDBTimeWindowEvent
	for _, sh := range d.StreamDescription.Shards {
		it, err := client.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: &desc.StreamARN,
			ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		for iter := it.ShardIterator; iter != nil; {
			page, err := client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(size)})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Records) == 0 {
				break
			}
			var recs []events.DynamoDBEventRecord
			for _, r := range page.Records {
				recs = append(recs, lambdaRecord(r))
			}
			out = append(out, event(t, aws.ToString(sh.ShardId), recs...))
			iter = page.NextShardIterator
		}
	}
	if len(out) == 0 {
		t.Fatal("the stream is empty")
	}
	return out
}

// lambdaRecord is r as Lambda hands it.
func lambdaRecord(r types.Record) events.DynamoDBEventRecord {
	sr := r.Dynamodb
	return events.DynamoDBEventRecord{
		AWSRegion: aws.ToString(r.AwsRegion), EventID: aws.ToString(r.EventID), EventName: string(r.EventName),
		EventSource: aws.ToString(r.EventSource), EventVersion: aws.ToString(r.EventVersion),
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: aws.ToTime(sr.ApproximateCreationDateTime)},
			Keys:                        lambdaMap(sr.Keys), OldImage: lambdaMap(sr.OldImage), NewImage: lambdaMap(sr.NewImage),
			SequenceNumber: aws.ToString(sr.SequenceNumber), SizeBytes: aws.ToInt64(sr.SizeBytes),
			StreamViewType: string(sr.StreamViewType),
		},
	}
}

func lambdaMap(m map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(m))
	for k, v := range m {
		out[k] = lambdaValue(v)
	}
	return out
}

func lambdaValue(v types.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *types.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	case *types.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value)
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = lambdaValue(e)
		}
		return events.NewListAttribute(l)
	case *types.AttributeValueMemberM:
		return events.NewMapAttribute(lambdaMap(v.Value))
	}
	return events.NewNullAttribute()
}

// The function and `tollgate aggregator` are interchangeable: they give a
// record the same Source, so one applying what the other already applied
// changes nothing. The process reader applies the first part of a stream;
// the function is then handed the whole stream (what the reader applied
// and what it did not, as a mapping at TRIM_HORIZON would be); then the
// reader goes on from its checkpoint over records the function applied.
// Every acquire counts exactly once, and each snapshot holds one sequence
// attribute per Source that fed it, whoever wrote it.
func TestReaderAndHandlerInterchangeable(t *testing.T) {
	if endpoint == "" {
		t.Skip(ddblocal.Help)
	}
	ctx := context.Background()
	s := newDynamo(t, localConfig(), "tollgate-swap-"+time.Now().Format("150405.000000"), nil,
		func(o *awsdynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
	if err := s.Admin().CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Admin().DeleteTable(context.Background()) })
	lim, adm := limitertest.Planes(t, s, time.Second)
	if _, err := adm.CreateEntity(ctx, tollgate.Entity{ID: "org"}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateEntity(ctx, tollgate.Entity{ID: "key", ParentID: "org", Cascade: true}); err != nil {
		t.Fatal(err)
	}
	acquired := 0
	acquire := func(n int) {
		t.Helper()
		for range n {
			le, err := lim.Acquire(ctx, "key", "llm", tollgate.Consume{"tpm": 100}, tollgate.WithLimits(tollgate.PerMinute("tpm", 1_000_000)))
			if err != nil {
				t.Fatal(err)
			}
			if acquired == 0 {
				if err := le.Adjust(ctx, tollgate.Consume{"tpm": 50}); err != nil { // a delta: no acquire
					t.Fatal(err)
				}
			}
			if err := le.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			acquired++
		}
	}
	ns, err := s.GetNamespace(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	exact := func() bool {
		got := snapshots(t, s, ns.ID)
		for _, entity := range []string{"key", "org"} {
			for _, w := range []store.Window{store.Hourly, store.Daily} {
				if ev, tpm := total(got, entity, w); ev != int64(acquired) || tpm != int64(acquired)*100_000+50_000 {
					return false
				}
			}
		}
		return true
	}
	check := func(when string) {
		t.Helper()
		if !exact() {
			got := snapshots(t, s, ns.ID)
			ev, tpm := total(got, "key", store.Daily)
			t.Fatalf("%s: key's daily usage %d acquires, %d tpm millitokens; want %d and %d (all: %v)",
				when, ev, tpm, acquired, acquired*100_000+50_000, got)
		}
	}
	// read runs the process reader into the table's snapshots until done
	// reports it has gone far enough; it returns the (Source, Seq) of every
	// change it handled.
	read := func(done func(handled map[[2]string]bool) bool) map[[2]string]bool {
		t.Helper()
		var mu sync.Mutex
		handled := map[[2]string]bool{}
		rctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			errc <- stream.Read(rctx, s, 50*time.Millisecond, func(ctx context.Context, cs []store.Change) error {
				if err := aggregator.Apply(ctx, s, cs, aggregator.DefaultRetention); err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				for _, c := range cs {
					handled[[2]string{c.Source, c.Seq}] = true
				}
				return nil
			})
		}()
		deadline := time.Now().Add(time.Minute)
		for {
			mu.Lock()
			ok := done(handled)
			mu.Unlock()
			if ok || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond) // waiting on DynamoDB Local's stream
		}
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		return handled
	}
	h := &handler{usage: s, retention: aggregator.DefaultRetention}
	// deliver hands the whole stream to the function, and returns the
	// (Source, Seq) of every change in it.
	deliver := func() map[[2]string]bool {
		t.Helper()
		all := map[[2]string]bool{}
		for _, ev := range streamBatches(t, s) {
			cs, err := changesOf(ev)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				all[[2]string{c.Source, c.Seq}] = true
			}
			if _, err := h.handle(ctx, ev); err != nil {
				t.Fatal(err)
			}
		}
		return all
	}

	// 1. The process applies the first part.
	acquire(4)
	byReader := read(func(map[[2]string]bool) bool { return exact() })
	check("after the process reader")

	// 2. The function gets everything, the first part again.
	acquire(3)
	byFunction := deliver()
	check("after the function, handed what the process had applied")
	for k := range byReader {
		if !byFunction[k] {
			t.Errorf("the process read change %q, which the function does not see under that Source", k)
		}
	}

	// 3. The process goes on from its checkpoint, over what the function
	// applied.
	acquire(2)
	byFunction = deliver()
	check("after the function, handed the whole stream again")
	var wantRead [][2]string
	for k := range byFunction {
		if !byReader[k] {
			wantRead = append(wantRead, k)
		}
	}
	again := read(func(handled map[[2]string]bool) bool {
		for _, k := range wantRead {
			if !handled[k] {
				return false
			}
		}
		return true
	})
	for _, k := range wantRead {
		if !again[k] {
			t.Fatalf("the process reader did not read change %q of the function's", k)
		}
	}
	check("after the process read what the function had applied")

	// One sequence attribute per Source in each snapshot: the two consumers
	// never added one of their own.
	sources := map[string]map[string]bool{} // key's daily snapshot start -> Sources
	for _, ev := range streamBatches(t, s) {
		cs, _ := changesOf(ev)
		for _, c := range cs {
			if c.Key.Entity == "key" {
				start := usageSK(store.Daily, store.Daily.Start(c.Time))
				if sources[start] == nil {
					sources[start] = map[string]bool{}
				}
				sources[start][c.Source] = true
			}
		}
	}
	db := awsdynamodb.NewFromConfig(localConfig(), func(o *awsdynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
	for sk, srcs := range sources {
		out, err := db.GetItem(ctx, &awsdynamodb.GetItemInput{TableName: aws.String(s.Table()), ConsistentRead: aws.Bool(true),
			Key: map[string]ddbtypes.AttributeValue{
				"PK": &ddbtypes.AttributeValueMemberS{Value: ns.ID + "/ENTITY#key"},
				"SK": &ddbtypes.AttributeValueMemberS{Value: sk},
			}})
		if err != nil {
			t.Fatal(err)
		}
		var seqs []string
		for name := range out.Item {
			if strings.HasPrefix(name, "seq") {
				seqs = append(seqs, name)
			}
		}
		if len(seqs) != len(srcs) {
			t.Errorf("snapshot %s holds %d sequence attributes %v; want %d, one per Source %v", sk, len(seqs), seqs, len(srcs), srcs)
		}
	}
}

// usageSK is the sort key of key's snapshot on llm (store/dynamodb/usage.go).
func usageSK(w store.Window, start int64) string {
	return fmt.Sprintf("#USAGE#llm#%s#%020d", w, start)
}

// The function splits with the process's code (stream.Upkeep), its
// memory of the shard's recent writes carried from invocation to
// invocation in the tumbling window's state. Handed a real stream one
// record per invocation: a bucket whose shard 0 took 9 writes within a
// second (its writers' meter allows 10 a second) is split only when the
// state is carried, and a drained one is left alone (a stored full tick
// needs no proactive refill). DynamoDB Local dates records to the minute,
// which the upkeep reads as one second; the writes are made again on other
// buckets should they straddle a minute.
func TestHandlerUpkeep(t *testing.T) {
	if endpoint == "" {
		t.Skip(ddblocal.Help)
	}
	ctx := context.Background()
	atLocal := func(o *awsdynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) }
	s := newDynamo(t, localConfig(), "tollgate-upkeep-"+time.Now().Format("150405.000000"), nil, atLocal)
	if err := s.Admin().CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Admin().DeleteTable(context.Background()) })
	// Writers with a meter of 10 writes a second, dated long ago.
	writers := newDynamo(t, localConfig(), s.Table(), []dynamodb.Option{dynamodb.WithWritePressureLimit(10)}, atLocal)
	lim, err := tollgate.New(writers, tollgate.WithClock(clock.NewFake(time.Now().Add(-time.Hour))))
	if err != nil {
		t.Fatal(err)
	}
	acquire := func(entity string, n int, l tollgate.Limit) {
		t.Helper()
		for range n {
			le, err := lim.Acquire(ctx, entity, "llm", tollgate.Consume{l.Name: 1}, tollgate.WithLimits(l))
			if err != nil {
				t.Fatal(err)
			}
			if err := le.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	var hot, drained string
	for try := 0; ; try++ {
		hot, drained = fmt.Sprintf("hot-%d", try), fmt.Sprintf("drained-%d", try)
		before := time.Now()
		acquire(hot, 9, tollgate.PerSecond("rps", 1_000))
		acquire(drained, 5, tollgate.PerSecond("tps", 5)) // 5 writes: below a split
		if before.Truncate(time.Minute).Equal(time.Now().Truncate(time.Minute)) || try == 2 {
			break
		}
	}
	ns, err := s.GetNamespace(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	db := awsdynamodb.NewFromConfig(localConfig(), atLocal)
	read := func(entity, attr string) int64 {
		t.Helper()
		out, err := db.GetItem(ctx, &awsdynamodb.GetItemInput{TableName: aws.String(s.Table()), ConsistentRead: aws.Bool(true),
			Key: map[string]ddbtypes.AttributeValue{
				"PK": &ddbtypes.AttributeValueMemberS{Value: ns.ID + "/BUCKET#" + entity + "#llm#0"},
				"SK": &ddbtypes.AttributeValueMemberS{Value: "#STATE"},
			}})
		if err != nil || out.Item == nil {
			t.Fatalf("read %s: %v", entity, err)
		}
		v, _ := out.Item[attr].(*ddbtypes.AttributeValueMemberN)
		if v == nil {
			t.Fatalf("%s has no %s", entity, attr)
		}
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	// run hands the stream to a function, one record per invocation
	// (usage into memory, to keep the stream short).
	run := func(carry bool) {
		t.Helper()
		h := &handler{usage: memory.New(), retention: aggregator.DefaultRetention, upkeep: stream.NewUpkeep(s),
			log: slog.New(slog.DiscardHandler)}
		state := map[string]string{}
		for _, ev := range streamPages(t, s, 1) {
			if carry {
				ev.State = state
			}
			resp, err := h.handle(ctx, ev)
			if err != nil {
				t.Fatal(err)
			}
			state = resp.State
		}
	}

	drainedRF := read(drained, "rf")
	run(false)
	if rf := read(drained, "rf"); rf != drainedRF {
		t.Errorf("drained item written by the upkeep (rf %d, was %d)", rf, drainedRF)
	}
	if n := read(hot, "shard_count"); n != 1 {
		t.Errorf("state not carried, one write an invocation: the hot bucket split to %d shards", n)
	}
	run(true)
	if n := read(hot, "shard_count"); n != 2 {
		t.Errorf("state carried: the hot bucket has %d shards, want 2", n)
	}
}
