package tollgate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/aggregator"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

func TestUsageQueriesAndSummary(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	mem := memory.New()
	rec := aggregator.NewRecorder(mem, mem, aggregator.WithClock(clk))
	lim, err := tollgate.New(rec, tollgate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	adm, err := tollgate.NewAdmin(rec, tollgate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	limits := tollgate.WithLimits(tollgate.PerMinute("tpm", 1_000_000))
	for h, amounts := range [][]int64{{100, 200}, {}, {700}} { // 09:00, 10:00 (idle), 11:00
		for _, a := range amounts {
			for _, key := range []string{"key-a", "key-b"} {
				if _, err := lim.Acquire(ctx, key, "llm", tollgate.Consume{"tpm": a}, limits); err != nil {
					t.Fatal(err)
				}
			}
		}
		if h < 2 {
			clk.Advance(time.Hour)
		}
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	q := tollgate.UsageQuery{Entity: "key-a", Window: tollgate.Hourly, From: start, To: start.Add(3 * time.Hour)}
	got, next, err := adm.Usage(ctx, q)
	if err != nil || next != "" || len(got) != 2 || got[0].Consumed["tpm"] != 300 || got[0].Events != 2 || !got[1].Start.Equal(start.Add(2*time.Hour)) {
		t.Fatalf("Usage = %+v, %q, %v", got, next, err)
	}
	q.Limit = 1
	page, next, err := adm.Usage(ctx, q)
	if err != nil || len(page) != 1 || next == "" {
		t.Fatalf("first page %+v, next %q, %v", page, next, err)
	}
	q.After = next
	if page, next, err = adm.Usage(ctx, q); err != nil || len(page) != 1 || page[0].Consumed["tpm"] != 700 {
		t.Fatalf("second page %+v, next %q, %v", page, next, err)
	}

	sum, err := adm.UsageSummary(ctx, tollgate.UsageQuery{Resource: "llm", Window: tollgate.Hourly, From: start, To: start.Add(3 * time.Hour), Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	tpm := sum.Limits["tpm"]
	if sum.Windows != 3 || sum.Events != 6 || tpm.Total != 2000 || tpm.Peak != 1400 || !tpm.PeakStart.Equal(start.Add(2*time.Hour)) || tpm.Average != 2000.0/3 {
		t.Errorf("summary %+v, tpm %+v", sum, tpm)
	}
	if _, _, err := adm.Usage(ctx, tollgate.UsageQuery{Window: tollgate.Hourly, From: start, To: start.Add(time.Hour)}); !errors.Is(err, tollgate.ErrInvalid) {
		t.Errorf("query without entity or resource: %v", err)
	}
	plain, err := tollgate.NewAdmin(struct{ store.Store }{memory.New()}) // keeps no usage
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := plain.Usage(ctx, q); !errors.Is(err, tollgate.ErrUsageUnsupported) {
		t.Errorf("a store without usage: %v", err)
	}
}

// TestUsageSummarySumsMillitokens checks that the summary adds snapshots
// before rounding: three windows of half a token each are one and a half
// tokens, reported as 1 (rounded down) with an average of 0.5, not 0.
func TestUsageSummarySumsMillitokens(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	mem := memory.New()
	adm, err := tollgate.NewAdmin(mem, tollgate.WithClock(clock.NewFake(start.Add(3*time.Hour))))
	if err != nil {
		t.Fatal(err)
	}
	// The admin registers the default namespace on first use.
	q := tollgate.UsageQuery{Entity: "key-a", Window: tollgate.Hourly, From: start, To: start.Add(3 * time.Hour)}
	if _, _, err := adm.Usage(ctx, q); err != nil {
		t.Fatal(err)
	}
	ns, err := mem.GetNamespace(ctx, tollgate.DefaultNamespace)
	if err != nil {
		t.Fatal(err)
	}
	var incs []store.UsageIncrement
	for h, milli := range []int64{500, 500, 700} {
		key := store.UsageKey{Entity: "key-a", Resource: "llm", Window: store.Hourly, Start: start.Add(time.Duration(h) * time.Hour).UnixMilli()}
		incs = append(incs, store.UsageIncrement{Key: key, Consumed: map[string]int64{"tpm": milli}, Events: 1, Source: "test", Seq: "1"})
	}
	if err := mem.AddUsage(ctx, ns.ID, incs); err != nil {
		t.Fatal(err)
	}
	sum, err := adm.UsageSummary(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	want := tollgate.LimitUsage{Total: 1, Average: 1.7 / 3, Peak: 0, PeakStart: start.Add(2 * time.Hour)}
	if got := sum.Limits["tpm"]; got != want || sum.Events != 3 {
		t.Errorf("summary %+v, tpm %+v; want tpm %+v", sum, got, want)
	}
}
