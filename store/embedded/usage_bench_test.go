package embedded

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store"
)

// BenchmarkUsage measures the usage calls (docs/embedded.md, section 8):
//
//   - add/1, add/1000: one AddUsage of that many increments, each to its
//     own existing snapshot (one fsynced transaction per call);
//   - list/entity: one entity's last 24 hourly snapshots of each of its 10
//     resources (240), among 90 days of them (21,600);
//   - list/resource: one resource's hourly snapshots of 1,000 entities in
//     one hour (a full page), among 24 hours of them (24,000).
//
// go test -run '^$' -bench BenchmarkUsage -benchmem ./store/embedded/
func BenchmarkUsage(b *testing.B) {
	ctx := context.Background()
	h := store.Hourly.Start(t0)
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("add/%d", n), func(b *testing.B) {
			s := benchStore(b, WithClock(clock.NewFake(time.UnixMilli(t0))))
			batch := make([]store.UsageIncrement, n)
			for i := range batch {
				batch[i] = store.UsageIncrement{Key: hourly(fmt.Sprintf("key-%04d", i), "api", h),
					Consumed: map[string]int64{"rpm": 1000, "tpm": 1500}, Events: 1, Source: "bench", Expires: t0 + 90*24*hourMS}
			}
			seq := 0
			add := func() {
				seq++
				for i := range batch {
					batch[i].Seq = fmt.Sprintf("%016d", seq)
				}
				if err := s.AddUsage(ctx, "bench", batch); err != nil {
					b.Fatal(err)
				}
			}
			add() // the snapshots exist: what is measured is an update
			b.ResetTimer()
			for b.Loop() {
				add()
			}
		})
	}
	b.Run("list/entity", func(b *testing.B) {
		s := benchStore(b, WithClock(clock.NewFake(time.UnixMilli(t0))))
		var batch []store.UsageIncrement
		for r := range 10 {
			for hr := range int64(90 * 24) {
				batch = append(batch, store.UsageIncrement{Key: hourly("key-1", fmt.Sprintf("res-%d", r), h-hr*hourMS),
					Consumed: map[string]int64{"rpm": 1000}, Events: 1, Source: "bench", Seq: "1"})
			}
		}
		benchSeed(b, s, batch)
		q := store.UsageQuery{Entity: "key-1", Window: store.Hourly, From: h - 23*hourMS, To: h + hourMS}
		benchList(b, s, q, 240)
	})
	b.Run("list/resource", func(b *testing.B) {
		s := benchStore(b, WithClock(clock.NewFake(time.UnixMilli(t0))))
		var batch []store.UsageIncrement
		for e := range 1000 {
			for hr := range int64(24) {
				batch = append(batch, store.UsageIncrement{Key: hourly(fmt.Sprintf("key-%04d", e), "api", h-hr*hourMS),
					Consumed: map[string]int64{"rpm": 1000}, Events: 1, Source: "bench", Seq: "1"})
			}
		}
		benchSeed(b, s, batch)
		q := store.UsageQuery{Resource: "api", Window: store.Hourly, From: h - 12*hourMS, To: h - 11*hourMS}
		benchList(b, s, q, 1000)
	})
}

func benchSeed(b *testing.B, s *Store, incs []store.UsageIncrement) {
	for len(incs) > 0 {
		n := min(len(incs), 5000)
		if err := s.AddUsage(context.Background(), "bench", incs[:n]); err != nil {
			b.Fatal(err)
		}
		incs = incs[n:]
	}
}

func benchList(b *testing.B, s *Store, q store.UsageQuery, want int) {
	for b.Loop() {
		got, err := s.ListUsage(context.Background(), "bench", q)
		if err != nil || len(got) != want {
			b.Fatalf("ListUsage = %d snapshots, %v; want %d", len(got), err, want)
		}
	}
}
