package dynamodb

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/aggregator"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store"
)

// newStreamTable is newTable with the stream the aggregator reads.
func newStreamTable(t *testing.T) *Store {
	t.Helper()
	if endpoint == "" {
		t.Skip("DynamoDB Local is not running")
	}
	s := New(localConfig(), "tollgate-stream-"+randomHex(6), nil, atLocal)
	if err := s.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.DeleteTable(context.Background()) })
	return s
}

// aggregate reads the stream into usage until want reports the usage
// complete (or a minute passes), then stops.
func aggregate(t *testing.T, s *Store, want func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.ReadChanges(ctx, 50*time.Millisecond, func(ctx context.Context, cs []store.Change) error {
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
	lim, err := tollgate.New(s, tollgate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lim.CreateEntity(ctx, tollgate.Entity{ID: "org"}); err != nil {
		t.Fatal(err)
	}
	if _, err := lim.CreateEntity(ctx, tollgate.Entity{ID: "key", ParentID: "org", Cascade: true}); err != nil {
		t.Fatal(err)
	}
	limits := tollgate.WithLimits(tollgate.PerMinute("tpm", 1_000_000))
	for i := range 5 {
		le, err := lim.Acquire(ctx, "key", "llm", tollgate.Consume{"tpm": 100}, limits)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := le.Adjust(tollgate.Consume{"tpm": 50}); err != nil {
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
	// Forget the checkpoints: the whole stream is read again, to no effect.
	shards, err := (&streamReader{s: s, client: s.streamsClient(), arn: mustStreamARN(t, s)}).shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shards {
		if _, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: checkpointKey(aws.ToString(sh.ShardId))}); err != nil {
			t.Fatal(err)
		}
	}
	replayed := false
	aggregate(t, s, func() bool {
		// Done once every shard is checkpointed again.
		for _, sh := range shards {
			if cp, _ := s.checkpoint(ctx, aws.ToString(sh.ShardId)); cp.seq == "" && !cp.done {
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

func mustStreamARN(t *testing.T, s *Store) string {
	t.Helper()
	d, err := s.DescribeTable(context.Background())
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
