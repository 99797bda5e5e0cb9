package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/aggregator"
	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// TestUsageAndCapacityMatchTheLibrary reads usage and capacity through the
// client, paging through the server a few snapshots at a time, and checks
// that it gets exactly what the library reads from the same store: every
// snapshot once, in order, and the same summary and capacity.
func TestUsageAndCapacityMatchTheLibrary(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(epoch)
	mem := memory.New()
	rec := aggregator.NewRecorder(mem, mem, aggregator.WithClock(clk))
	srv, err := server.New(rec, server.WithClock(clk), server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); _ = srv.Close(ctx) })
	c := newClient(t, ts.URL)
	adm, err := tollgate.NewAdmin(rec, tollgate.WithClock(clk))
	must(t, "tollgate.NewAdmin", err)

	limits := client.WithLimits(tollgate.PerMinute("tpm", 100_000))
	for hour := range 3 {
		for k := range 4 {
			_, err := c.AcquireAndCommit(ctx, fmt.Sprintf("key-%d", k), "llm", tollgate.Consume{"tpm": int64(100*hour + k + 1)}, limits)
			must(t, "AcquireAndCommit", err)
		}
		clk.Advance(time.Hour)
	}
	must(t, "Flush", rec.Flush(ctx))

	for _, q := range []tollgate.UsageQuery{
		{Resource: "llm", Window: tollgate.Hourly, From: epoch, To: clk.Now()},
		{Entity: "key-2", Window: tollgate.Hourly, From: epoch, To: clk.Now()},
		{Resource: "llm", Window: tollgate.Daily, From: epoch, To: clk.Now()},
	} {
		want, next, err := adm.Usage(ctx, q)
		must(t, "Admin.Usage", err)
		if next != "" || len(want) == 0 {
			t.Fatalf("library: %d snapshots, next %q", len(want), next)
		}
		var got []tollgate.Usage
		pages := 0
		for page := q; ; pages++ {
			page.Limit = 5
			us, next, err := c.Usage(ctx, page)
			must(t, "Client.Usage", err)
			got = append(got, us...)
			if next == "" {
				break
			}
			page.After = next
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: client read\n%+v\nthe library\n%+v", q, got, want)
		}
		if wantPages := (len(want) - 1) / 5; pages != wantPages {
			t.Errorf("%+v: %d snapshots in %d further pages, want %d", q, len(want), pages, wantPages)
		}

		wantSum, err := adm.UsageSummary(ctx, q)
		must(t, "Admin.UsageSummary", err)
		gotSum, err := c.UsageSummary(ctx, q)
		must(t, "Client.UsageSummary", err)
		if !reflect.DeepEqual(gotSum, wantSum) {
			t.Errorf("%+v: client summary %+v, library %+v", q, gotSum, wantSum)
		}
	}

	wantCap, err := adm.Capacity(ctx, "llm")
	must(t, "Admin.Capacity", err)
	gotCap, err := c.Capacity(ctx, "llm")
	must(t, "Client.Capacity", err)
	if !reflect.DeepEqual(gotCap, wantCap) || gotCap.Entities != 4 {
		t.Errorf("client capacity %+v, library %+v (want 4 entities)", gotCap, wantCap)
	}
	_, _, err = c.Usage(ctx, tollgate.UsageQuery{Window: tollgate.Hourly})
	var ve *tollgate.ValidationError
	if !errors.As(err, &ve) || ve.Field == "" {
		t.Errorf("a query without entity or resource: %v, want a *ValidationError naming the field", err)
	}
}

// TopDenied reads the server's entities refused most, filtered as asked.
func TestTopDenied(t *testing.T) {
	ctx := context.Background()
	srv, err := server.New(memory.New(), server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); _ = srv.Close(ctx) })
	c := newClient(t, ts.URL)
	limits := client.WithLimits(tollgate.PerMinute("rpm", 1))
	for _, e := range []string{"a", "a", "a", "b", "b"} { // a refused twice, b once
		if le, err := c.Acquire(ctx, e, "api", tollgate.Consume{"rpm": 1}, limits); err == nil {
			must(t, "Commit", le.Commit(ctx))
		}
	}
	got, err := c.TopDenied(ctx, "api", "rpm", 5)
	must(t, "TopDenied", err)
	if len(got) != 2 || got[0].Entity != "a" || got[0].Count != 2 || got[1].Entity != "b" || got[1].Count != 1 {
		t.Errorf("TopDenied = %+v, want a twice then b once", got)
	}
	if got, err := c.TopDenied(ctx, "other", "", 5); err != nil || len(got) != 0 {
		t.Errorf("TopDenied of another resource = %+v, %v; want none", got, err)
	}
	var ve *tollgate.ValidationError
	if _, err := c.TopDenied(ctx, "", "", 0); !errors.As(err, &ve) || ve.Field != "n" {
		t.Errorf("n = 0: %v, want a *ValidationError naming n", err)
	}
}
