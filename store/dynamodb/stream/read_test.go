package stream

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/aggregator"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/limitertest"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/dynamodb"
	"github.com/tollgate-rl/tollgate/store/dynamodb/internal/schema"
)

// aggregate reads the stream into usage until want reports the usage
// complete (or a minute passes), then stops.
func aggregate(t *testing.T, s *dynamodb.Store, want func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Read(ctx, s, 50*time.Millisecond, func(ctx context.Context, cs []store.Change) error {
			return aggregator.Apply(ctx, s, cs, aggregator.DefaultRetention)
		})
	}()
	deadline := time.Now().Add(time.Minute)
	for !want() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // waiting on DynamoDB Local's stream, not on our own goroutines
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Acquires, adjustments and a cascade reach the usage snapshots through the
// stream, each counted once, and reading the stream again from its start
// changes nothing.
func TestStreamToUsage(t *testing.T) {
	s := newStreamTable(t)
	ctx := context.Background()
	clk := clock.NewFake(time.Now().Truncate(time.Hour).Add(30 * time.Minute))
	lim, adm := limitertest.Planes(t, s, time.Second, tollgate.WithClock(clk))
	if _, err := adm.CreateEntity(ctx, tollgate.Entity{ID: "org"}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateEntity(ctx, tollgate.Entity{ID: "key", ParentID: "org", Cascade: true}); err != nil {
		t.Fatal(err)
	}
	limits := tollgate.WithLimits(tollgate.PerMinute("tpm", 1_000_000))
	before := time.Now()
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
	usageOf := func(entity string) (events, tpm int64) {
		snaps, err := s.ListUsage(ctx, ns.ID, store.UsageQuery{Entity: entity, Window: store.Daily, From: 0, To: 1 << 50})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range snaps {
			events += u.Events
			tpm += u.Consumed["tpm"]
		}
		return events, tpm
	}
	complete := func() bool {
		ek, tk := usageOf("key")
		eo, to := usageOf("org")
		return ek == 5 && tk == 550_000 && eo == 5 && to == 550_000
	}
	aggregate(t, s, complete)
	if !complete() {
		ek, tk := usageOf("key")
		t.Fatalf("usage of key: %d events, %d tpm millitokens; want 5 and 550000", ek, tk)
	}
	// Dated by when the writes happened (the records' creation times): the
	// hour of the writes, which may have crossed into the next one by now.
	after := time.Now()
	for _, w := range []store.Window{store.Hourly, store.Daily} {
		for _, entity := range []string{"key", "org"} {
			snaps, err := s.ListUsage(ctx, ns.ID, store.UsageQuery{Entity: entity, Window: w, From: 0, To: 1 << 50})
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range snaps {
				if from, to := w.Start(before.UnixMilli()), w.Start(after.UnixMilli()); u.Key.Start != from && u.Key.Start != to {
					t.Errorf("%s's %s snapshot starts at %v; the writes were made between %v and %v",
						entity, w, time.UnixMilli(u.Key.Start).UTC(), before.UTC(), after.UTC())
				}
			}
		}
	}
	// Forget the checkpoints: the whole stream is read again, to no effect.
	shards, err := (&streamReader{s: tableOf(s), client: tableOf(s).streamsClient(), arn: mustStreamARN(t, s)}).shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shards {
		if _, err := s.Client().DeleteItem(ctx, &ddb.DeleteItemInput{TableName: aws.String(s.Table()), Key: checkpointKey(aws.ToString(sh.ShardId))}); err != nil {
			t.Fatal(err)
		}
	}
	replayed := false
	aggregate(t, s, func() bool {
		// Done once every shard is checkpointed again.
		for _, sh := range shards {
			if cp, _ := tableOf(s).checkpoint(ctx, aws.ToString(sh.ShardId)); cp.seq == "" && !cp.done {
				return false
			}
		}
		replayed = true
		return true
	})
	if !replayed || !complete() {
		ek, tk := usageOf("key")
		t.Errorf("after a replay: %d events, %d tpm millitokens (replayed %v); want 5 and 550000 unchanged", ek, tk, replayed)
	}
}

func mustStreamARN(t *testing.T, s *dynamodb.Store) string {
	t.Helper()
	d, err := s.Admin().DescribeTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d.StreamARN
}

// A checkpoint's padded sequence number goes back to the Streams API in a
// form it accepts: DynamoDB Local's keep their 21 digits, AWS's come back
// unchanged.
func TestStreamSeqPadding(t *testing.T) {
	for _, seq := range []string{"000000000000000000085", "100000000000000000001", "4421584500000000017450439091"} {
		if got := unpadSeq(padSeq(seq)); got != seq {
			t.Errorf("unpadSeq(padSeq(%s)) = %s", seq, got)
		}
	}
}

// sourceShard is the stream shard of a change's Source (Source):
// shard ids have no slash.
func sourceShard(source string) string {
	shard, _, _ := strings.Cut(source, "/")
	return shard
}

// The reader's Source of a record: the stream shard and the item key, in the
// form the Lambda handler writes too (cmd/tollgate-lambda's TestSource pins
// it, TestSourceMatchesReader compares the two on the same wire records).
func TestStreamSource(t *testing.T) {
	for _, c := range []struct {
		keys map[string]types.AttributeValue
		want string
	}{
		{map[string]types.AttributeValue{"SK": &types.AttributeValueMemberS{Value: "#STATE"}, "PK": &types.AttributeValueMemberS{Value: "ns/BUCKET#a#b#0"}},
			`shardId-1/"PK"=S"ns/BUCKET#a#b#0","SK"=S"#STATE"`},
		{map[string]types.AttributeValue{"id": &types.AttributeValueMemberN{Value: "12"}, "b": &types.AttributeValueMemberB{Value: []byte{0xff}}},
			`shardId-1/"b"=B"/w==","id"=N"12"`},
		// Names in byte order, everything quoted: no key can pass for another.
		{map[string]types.AttributeValue{"é": &types.AttributeValueMemberS{Value: `a"b\c`}, "Z": &types.AttributeValueMemberS{Value: `x","y"=S"z`}, "a": &types.AttributeValueMemberS{Value: "\x01é"}},
			`shardId-1/"Z"=S"x\",\"y\"=S\"z","a"=S"\x01é","é"=S"a\"b\\c"`},
	} {
		got, err := SourceOf("shardId-1", c.keys)
		if err != nil || got != c.want {
			t.Errorf("SourceOf = %q, %v; want %q", got, err, c.want)
		}
	}
	for name, keys := range map[string]map[string]types.AttributeValue{
		"no keys":     nil,
		"boolean key": {"k": &types.AttributeValueMemberBOOL{Value: true}},
	} {
		if got, err := SourceOf("shardId-1", keys); err == nil {
			t.Errorf("%s: SourceOf = %q, want an error", name, got)
		}
	}
	if got, err := Source("", map[string]KeyAttr{"PK": {Type: "S", Text: "x"}}); err == nil {
		t.Errorf("no shard: Source = %q, want an error", got)
	}
	if got, err := Source("s", map[string]KeyAttr{"PK": {Type: "SS", Text: "x"}}); err == nil {
		t.Errorf("type SS: Source = %q, want an error", got)
	}
}

// changeOf is the reader's conversion of one record.
func changeOf(shard string, rec types.Record) (store.Change, bool, error) {
	img, ok := recordImage(rec)
	if !ok {
		return store.Change{}, false, nil
	}
	return changeOfImage(shard, rec, img)
}

// The reader gives bucket changes the Source of their record; other records
// need none, and are dropped even without keys.
func TestStreamChangeSource(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	bucket := map[string]types.AttributeValue{
		schema.AttrPK: s("ns1/BUCKET#key1#api#1"), schema.AttrSK: s(schema.SKState), schema.AttrEntity: s("key1"), schema.AttrResource: s("api"),
		schema.AttrShard: n("1"), "b_rpm_tc": n("3000"), schema.AttrEvents: n("1"),
	}
	keys := map[string]types.AttributeValue{schema.AttrPK: bucket[schema.AttrPK], schema.AttrSK: bucket[schema.AttrSK]}
	rec := func(keys, img map[string]types.AttributeValue) types.Record {
		return types.Record{EventName: types.OperationTypeInsert, Dynamodb: &types.StreamRecord{
			Keys: keys, NewImage: img, SequenceNumber: aws.String("000000000000000000085"),
			ApproximateCreationDateTime: aws.Time(time.Unix(1767261600, 0)),
		}}
	}
	c, ok, err := changeOf("shardId-7", rec(keys, bucket))
	want := `shardId-7/"PK"=S"ns1/BUCKET#key1#api#1","SK"=S"#STATE"`
	if err != nil || !ok || c.Source != want || c.Seq != padSeq("85") || c.Events != 1 || c.Consumed["rpm"] != 3000 || c.Shard != 1 {
		t.Errorf("changeOf = %+v, %v, %v; want Source %q, Seq %s, 1 event, rpm 3000, shard 1", c, ok, err, want, padSeq("85"))
	}
	if _, _, err := changeOf("shardId-7", rec(nil, bucket)); err == nil {
		t.Error("a bucket record without keys: no error")
	}
	meta := map[string]types.AttributeValue{schema.AttrPK: s("ns1/ENTITY#key1"), schema.AttrSK: s("#META")}
	if c, ok, err := changeOf("shardId-7", rec(nil, meta)); ok || err != nil {
		t.Errorf("a record of another item: %+v, %v, %v; want no change and no error", c, ok, err)
	}
}

// Shard lineage: a shard is read once its parent is done (or gone from the
// stream), in the order DescribeStream lists them; done shards are not.
func TestReadableShards(t *testing.T) {
	shard := func(id, parent string) types.Shard {
		sh := types.Shard{ShardId: aws.String(id)}
		if parent != "" {
			sh.ParentShardId = aws.String(parent)
		}
		return sh
	}
	// root -> a -> (a1, a2) after a split; b's parent aged out.
	shards := []types.Shard{shard("root", ""), shard("a", "root"), shard("b", "gone"), shard("a1", "a"), shard("a2", "a")}
	for _, c := range []struct {
		done []string
		want []string
	}{
		{nil, []string{"root", "b"}},
		{[]string{"root"}, []string{"a", "b"}},
		{[]string{"root", "a"}, []string{"b", "a1", "a2"}},
		{[]string{"root", "a", "a1", "b"}, []string{"a2"}},
		{[]string{"root", "a", "a1", "a2", "b"}, nil},
		// A child whose parent is not done waits even if the parent's
		// own parent is.
		{[]string{"a"}, []string{"root", "b", "a1", "a2"}},
	} {
		done := map[string]bool{}
		for _, id := range c.done {
			done[id] = true
		}
		if got := readableShards(shards, done); !slices.Equal(got, c.want) {
			t.Errorf("done %v: readable %v, want %v", c.done, got, c.want)
		}
	}
}

// After a page: no next iterator means the shard is read to its end (done);
// an empty page means caught up on an open shard, but not on a closed one,
// whose empty pages are followed to its end.
func TestNextStep(t *testing.T) {
	for _, c := range []struct {
		records        int
		hasNext, close bool
		want           pageStep
	}{
		{3, true, false, stepMore},
		{0, true, false, stepCaughtUp},
		{3, false, false, stepFinished},
		{0, false, false, stepFinished},
		{0, true, true, stepMore},
		{3, true, true, stepMore},
		{3, false, true, stepFinished},
		{0, false, true, stepFinished},
	} {
		if got := nextStep(c.records, c.hasNext, c.close); got != c.want {
			t.Errorf("nextStep(%d records, next %v, closed %v) = %v, want %v", c.records, c.hasNext, c.close, got, c.want)
		}
	}
}

// A checkpoint older than the stream keeps (TrimmedDataAccessException) is
// read again from the oldest record; an expired iterator is made again from
// the checkpoint; anything else fails the round.
func TestRecoveryFor(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("dynamodb: stream shard s: %w", err) }
	for _, c := range []struct {
		err  error
		want recovery
	}{
		{&types.TrimmedDataAccessException{Message: aws.String("trimmed")}, recoverFromTrimHorizon},
		{wrap(&types.TrimmedDataAccessException{}), recoverFromTrimHorizon},
		{&types.ExpiredIteratorException{}, recoverFromCheckpoint},
		{wrap(&types.ExpiredIteratorException{}), recoverFromCheckpoint},
		{&types.ResourceNotFoundException{}, recoverNone},
		{&types.LimitExceededException{}, recoverNone},
		{context.Canceled, recoverNone},
	} {
		if got := recoveryFor(c.err); got != c.want {
			t.Errorf("recoveryFor(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// A record without a creation time is dated by its image's refill time
// (the same on every replay), never at year 1.
func TestChangeOfWithoutCreationTime(t *testing.T) {
	img := testImage{schema.AttrPK: "ns/BUCKET#k#api#0", schema.AttrSK: schema.SKState, schema.AttrEntity: "k", schema.AttrResource: "api",
		schema.AttrRefilled: "\x001767261600123", schema.LimitAttr("rpm", schema.FieldConsumed): "\x001000", schema.AttrEvents: "\x001"}
	c, ok := ChangeOf(Record{Seq: "1", New: img})
	if !ok || c.Time != 1767261600123 {
		t.Errorf("no creation time: dated %d (%v), want the refill time 1767261600123", c.Time, ok)
	}
	c, _ = ChangeOf(Record{Seq: "1", New: img, Time: time.Unix(1767261700, 0)})
	if c.Time != 1767261700_000 {
		t.Errorf("with a creation time: dated %d, want 1767261700000", c.Time)
	}
	delete(img, schema.AttrRefilled)
	before := time.Now().UnixMilli()
	if c, _ = ChangeOf(Record{Seq: "1", New: img}); c.Time < before {
		t.Errorf("neither: dated %d, want this process's clock (>= %d)", c.Time, before)
	}
}

// The reader hands every batch to the upkeep with the heat of its stream
// shard: through DynamoDB Local's stream, a bucket whose shard 0 took 9
// writes within a second (its writers' meter allows 10 a second) is split.
// DynamoDB Local dates
// records to the minute, which the heat reads as one second; the writes are
// made again on other buckets should they straddle a minute.
func TestStreamUpkeep(t *testing.T) {
	s := newStreamTable(t)
	writers := mustNew(t, localConfig(), s.Table(), []dynamodb.Option{dynamodb.WithWritePressureLimit(10)}, atLocal)
	var hot store.BucketKey
	for try := 0; ; try++ {
		hot = store.BucketKey{Entity: fmt.Sprintf("hot-%d", try), Resource: "api"}
		before := time.Now()
		for range 9 {
			mustConsume(t, writers, "ns", consumeReq(hotEpoch, hotParams, 1_000, hot))
		}
		if before.Truncate(time.Minute).Equal(time.Now().Truncate(time.Minute)) || try == 2 {
			break
		}
	}
	if got := len(shardItems(t, s, "ns", hot)); got != 1 {
		t.Fatalf("the writers split the hot bucket themselves (%d shards)", got)
	}
	var stats Stats
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Read(ctx, s, 50*time.Millisecond, func(context.Context, []store.Change) error { return nil },
			WithUpkeep(NewUpkeep(s)), WithStats(&stats))
	}()
	for deadline := time.Now().Add(time.Minute); stats.Split.Load() == 0; {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // waiting on DynamoDB Local's stream
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := len(shardItems(t, s, "ns", hot)); got != 2 || stats.Split.Load() != 1 {
		t.Errorf("hot bucket has %d shards after %d splits; want 2 after 1", got, stats.Split.Load())
	}
}
