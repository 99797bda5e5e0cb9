package aggregator_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/aggregator"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// 10:59:59.900 UTC: an hour boundary 100 ms away.
var epoch = time.Date(2026, 3, 1, 10, 59, 59, 900_000_000, time.UTC)

type env struct {
	t   *testing.T
	mem *memory.Store
	us  store.UsageStore
	rec *aggregator.Recorder
	lim *tollgate.Limiter
	clk *clock.Fake
	ns  string
}

func newEnv(t *testing.T, us store.UsageStore) *env {
	mem := memory.New()
	if us == nil {
		us = mem
	}
	clk := clock.NewFake(epoch)
	rec := aggregator.NewRecorder(mem, us, aggregator.WithClock(clk), aggregator.WithRetention(48*time.Hour))
	lim, err := tollgate.New(rec, tollgate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	adm, err := tollgate.NewAdmin(rec, tollgate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	must(t, adm.SetLimits(ctx, tollgate.ResourceScope("llm"), tollgate.Config{Limits: []tollgate.Limit{
		tollgate.PerMinute("rpm", 100), tollgate.PerMinute("tpm", 100_000)}}))
	_, err = adm.CreateEntity(ctx, tollgate.Entity{ID: "org"})
	must(t, err)
	_, err = adm.CreateEntity(ctx, tollgate.Entity{ID: "key", ParentID: "org", Cascade: true})
	must(t, err)
	ns, err := mem.GetNamespace(ctx, "default")
	must(t, err)
	return &env{t: t, mem: mem, us: us, rec: rec, lim: lim, clk: clk, ns: ns.ID}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// usage lists an entity's snapshots of one window type as text.
func (e *env) usage(entity string, w store.Window) []string {
	e.t.Helper()
	must(e.t, e.rec.Flush(context.Background()))
	snaps, err := e.mem.ListUsage(context.Background(), e.ns, store.UsageQuery{Entity: entity, Window: w, From: 0, To: 1 << 62})
	must(e.t, err)
	out := make([]string, len(snaps))
	for i, s := range snaps {
		out[i] = fmt.Sprintf("%s %s events=%d rpm=%d tpm=%d", s.Key.Resource, time.UnixMilli(s.Key.Start).UTC().Format("15:04"),
			s.Events, s.Consumed["rpm"], s.Consumed["tpm"])
	}
	return out
}

func expect(t *testing.T, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("usage\n got %q\nwant %q", got, want)
	}
}

// An acquire counts once in each window of each entity it debits, with
// its consumption; adjustments count where and when they happen, whether
// the lease ends through ApplyDeltas (held in memory) or EndLease (durable).
func TestRecorderCountsAcquiresAndNetConsumption(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []tollgate.AcquireOption
	}{
		{"in memory", nil},
		{"durable", []tollgate.AcquireOption{tollgate.WithDurableLease()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, nil)
			ctx := context.Background()
			le, err := e.lim.Acquire(ctx, "key", "llm", tollgate.Consume{"rpm": 1, "tpm": 500}, c.opts...)
			must(t, err)
			e.clk.Advance(200 * time.Millisecond) // into the next hour
			must(t, le.Adjust(ctx, tollgate.Consume{"tpm": 1500}))
			must(t, le.Commit(ctx))
			le, err = e.lim.Acquire(ctx, "key", "llm", tollgate.Consume{"rpm": 1, "tpm": 700}, c.opts...)
			must(t, err)
			must(t, le.Rollback(ctx))
			for _, entity := range []string{"key", "org"} {
				expect(t, e.usage(entity, store.Hourly),
					"llm 10:00 events=1 rpm=1000 tpm=500000",
					"llm 11:00 events=1 rpm=0 tpm=1500000") // the adjustment, and an acquire rolled back
				expect(t, e.usage(entity, store.Daily), "llm 00:00 events=2 rpm=1000 tpm=2000000")
			}
		})
	}
}

func TestRecorderIgnoresRefusals(t *testing.T) {
	e := newEnv(t, nil)
	_, err := e.lim.Acquire(context.Background(), "key", "llm", tollgate.Consume{"tpm": 100_000})
	must(t, err)
	_, err = e.lim.Acquire(context.Background(), "key", "llm", tollgate.Consume{"tpm": 1})
	if !errors.Is(err, tollgate.ErrRateLimited) {
		t.Fatalf("second acquire: %v", err)
	}
	expect(t, e.usage("key", store.Hourly), "llm 10:00 events=1 rpm=0 tpm=100000000")
}

// lossy applies every write but reports the first one lost, as a response
// lost in transit would.
type lossy struct {
	store.UsageStore
	calls int
}

func (l *lossy) AddUsage(ctx context.Context, ns string, incs []store.UsageIncrement) error {
	err := l.UsageStore.AddUsage(ctx, ns, incs)
	if l.calls++; l.calls == 1 {
		return errors.New("connection reset")
	}
	return err
}

// A batch whose write failed is sent again unchanged, and the usage store
// counts it once even though the first write did apply.
func TestRecorderResendsFailedBatchExactlyOnce(t *testing.T) {
	mem := memory.New()
	e := newEnv(t, &lossy{UsageStore: mem})
	e.mem = mem
	ctx := context.Background()
	_, err := e.lim.Acquire(ctx, "key", "llm", tollgate.Consume{"rpm": 1})
	must(t, err)
	if err := e.rec.Flush(ctx); err == nil {
		t.Fatal("the lost write was not reported")
	}
	_, err = e.lim.Acquire(ctx, "key", "llm", tollgate.Consume{"rpm": 1})
	must(t, err)
	must(t, e.rec.Flush(ctx)) // the failed batch again
	expect(t, e.usage("key", store.Hourly), "llm 10:00 events=2 rpm=2000 tpm=0")
}

func TestRecorderRunFlushesOnSchedule(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.rec.Run(ctx, time.Second, func(err error) { t.Error(err) }); close(done) }()
	_, err := e.lim.Acquire(context.Background(), "key", "llm", tollgate.Consume{"rpm": 1})
	must(t, err)
	e.clk.BlockUntilWaiters(1, nil)
	e.clk.Advance(time.Second)
	e.clk.BlockUntilWaiters(1, nil) // flushed, waiting again
	snaps, err := e.mem.ListUsage(context.Background(), e.ns, store.UsageQuery{Entity: "key", Window: store.Hourly, From: 0, To: 1 << 62})
	must(t, err)
	if len(snaps) != 1 || snaps[0].Events != 1 {
		t.Errorf("after one interval: %+v", snaps)
	}
	if want := snaps[0].Key.Start + (time.Hour + 48*time.Hour).Milliseconds(); snaps[0].Expires != want {
		t.Errorf("expires %d, want the window's end plus the retention %d", snaps[0].Expires, want)
	}
	_, err = e.lim.Acquire(context.Background(), "key", "llm", tollgate.Consume{"rpm": 1})
	must(t, err)
	cancel()
	<-done // the final flush
	snaps, err = e.mem.ListUsage(context.Background(), e.ns, store.UsageQuery{Entity: "key", Window: store.Hourly, From: 0, To: 1 << 62})
	must(t, err)
	if len(snaps) != 2 || snaps[0].Events != 1 || snaps[1].Events != 1 { // 10:59:59.9 and 11:00:00.9
		t.Errorf("after stopping: %+v", snaps)
	}
}
