package stream

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
// UpdateItems each, hour and day), reading DynamoDB Local's stream; and the
// same with the upkeep (refill and split) deciding on every batch, which
// here writes nothing (no bucket is short or hot): its cost of deciding.
func BenchmarkStreamToUsage(b *testing.B) {
	b.Run("usage", func(b *testing.B) { benchStreamToUsage(b, false) })
	b.Run("usage+upkeep", func(b *testing.B) { benchStreamToUsage(b, true) })
}

func benchStreamToUsage(b *testing.B, upkeep bool) {
	const records = 400
	for b.Loop() {
		b.StopTimer()
		s := mustNew(b, localConfig(), "tollgate-bench-"+randomHex(6), nil, atLocal)
		ctx := context.Background()
		if err := s.Admin().CreateTable(ctx); err != nil {
			b.Fatal(err)
		}
		now := time.Now().UnixMilli()
		for i := range records {
			k := store.BucketKey{Entity: "key-" + strconv.Itoa(i%20), Resource: "api"}
			if ok, err := s.Consume(ctx, "ns", consumeReq(now, hotParams, 1_000, k)); err != nil || !ok {
				b.Fatalf("Consume: %v %v", ok, err)
			}
		}
		var opts []Option
		var stats Stats
		if upkeep {
			opts = append(opts, WithUpkeep(NewUpkeep(s)), WithStats(&stats))
		}
		b.StartTimer()
		start := time.Now()
		var seen int
		rctx, cancel := context.WithCancel(ctx)
		err := Read(rctx, s, 10*time.Millisecond, func(ctx context.Context, cs []store.Change) error {
			if err := aggregator.Apply(ctx, s, cs, aggregator.DefaultRetention); err != nil {
				return err
			}
			if seen += len(cs); seen >= records {
				cancel()
			}
			return nil
		}, opts...)
		elapsed := time.Since(start)
		cancel()
		b.StopTimer()
		if err != nil || seen != records {
			b.Fatalf("read %d of %d records: %v", seen, records, err)
		}
		if n := stats.Split.Load(); n != 0 {
			b.Fatalf("the upkeep wrote %d times; this measures its decisions alone", n)
		}
		b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
		_ = s.Admin().DeleteTable(ctx)
		b.StartTimer()
	}
}

// BenchmarkUpkeepDecide measures the upkeep's decisions alone, without
// DynamoDB: noting 1,000 records of 20 bucket items in their shard's heat
// and planning splits from it (none due), per record.
func BenchmarkUpkeepDecide(b *testing.B) {
	u := NewUpkeep(mustNew(b, localConfig(), "unused", nil))
	seq := 0
	var ws []*writer
	for i := range 20 {
		ws = append(ws, newWriter(store.BucketKey{Entity: "key-" + strconv.Itoa(i), Resource: "api"}, hotParams, 1000, 1_000, &seq))
	}
	recs := make([]Record, 1000)
	for i := range recs {
		recs[i] = ws[i%20].write(hotEpoch + int64(i))
	}
	for b.Loop() {
		heat := NewHeat()
		if splits := u.plan(heat, heat.noteAll(recs)); len(splits) != 0 {
			b.Fatal("splits planned")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}
