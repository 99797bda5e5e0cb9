package dynamodb

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/aggregator"
	"github.com/tollgate-rl/tollgate/store"
)

// BenchmarkStreamToUsage measures the stream aggregator: how many stream
// records per second it turns into usage snapshots (2 conditional
// UpdateItems each, hour and day), reading DynamoDB Local's stream.
func BenchmarkStreamToUsage(b *testing.B) {
	const records = 400
	for b.Loop() {
		b.StopTimer()
		s := New(localConfig(), "tollgate-bench-"+randomHex(6), nil, atLocal)
		ctx := context.Background()
		if err := s.CreateTable(ctx); err != nil {
			b.Fatal(err)
		}
		now := time.Now().UnixMilli()
		for i := range records {
			k := store.BucketKey{Entity: "key-" + strconv.Itoa(i%20), Resource: "api"}
			if ok, err := s.Consume(ctx, "ns", consumeReq(now, hotParams, 1_000, k)); err != nil || !ok {
				b.Fatalf("Consume: %v %v", ok, err)
			}
		}
		b.StartTimer()
		start := time.Now()
		var seen int
		rctx, cancel := context.WithCancel(ctx)
		err := s.ReadChanges(rctx, 10*time.Millisecond, func(ctx context.Context, cs []store.Change) error {
			if err := aggregator.Apply(ctx, s, cs, aggregator.DefaultRetention); err != nil {
				return err
			}
			if seen += len(cs); seen >= records {
				cancel()
			}
			return nil
		})
		elapsed := time.Since(start)
		cancel()
		b.StopTimer()
		if err != nil || seen != records {
			b.Fatalf("read %d of %d records: %v", seen, records, err)
		}
		b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
		_ = s.DeleteTable(ctx)
		b.StartTimer()
	}
}
