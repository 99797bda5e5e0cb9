package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// exampleServer starts a Tollgate server on a frozen clock, for examples.
func exampleServer() (url string, stop func()) {
	srv, _ := server.New(memory.New(), // valid options: no error
		server.WithClock(clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))),
		server.WithLogger(slog.New(slog.DiscardHandler)))
	ts := httptest.NewServer(srv)
	return ts.URL, func() {
		ts.Close()
		_ = srv.Close(context.Background())
	}
}

func ExampleNew() {
	c, err := client.New("https://tollgate.internal:8080",
		client.WithAPIKey("tg_..."),       // Authorization: Bearer
		client.WithNamespace("tenant-a"),  // or the API key's namespace
		client.WithTimeout(2*time.Second)) // per call
	if err != nil {
		panic(err)
	}
	_ = c
}

func ExampleClient_Acquire() {
	url, stop := exampleServer()
	defer stop()
	c, _ := client.New(url)
	ctx := context.Background()
	limits := client.WithLimits(tollgate.PerMinute("rpm", 100), tollgate.PerMinute("tpm", 10_000))

	lease, err := c.Acquire(ctx, "key-1", "openai/gpt-4o", tollgate.Consume{"rpm": 1, "tpm": 500}, limits)
	if err != nil {
		panic(err)
	}
	// The real cost turned out to be 2,000 tokens.
	if err := lease.Adjust(ctx, tollgate.Consume{"tpm": 1_500}); err != nil {
		panic(err)
	}
	fmt.Println("consumed tpm:", lease.Consumed()["tpm"])
	if err := lease.Commit(ctx); err != nil {
		panic(err)
	}
	sts, _ := c.Available(ctx, "key-1", "openai/gpt-4o", limits)
	for _, s := range sts {
		fmt.Printf("%s: %d of %d left\n", s.Limit, s.Available, s.Capacity)
	}
	// Output:
	// consumed tpm: 2000
	// rpm: 99 of 100 left
	// tpm: 8000 of 10000 left
}

func ExampleClient_Acquire_denied() {
	url, stop := exampleServer()
	defer stop()
	c, _ := client.New(url)
	ctx := context.Background()
	limits := client.WithLimits(tollgate.PerMinute("rpm", 2))

	for range 3 {
		_, err := c.AcquireAndCommit(ctx, "key-1", "search", tollgate.Consume{"rpm": 1}, limits)
		var denied *tollgate.RateLimitExceeded
		if errors.As(err, &denied) {
			fmt.Println("denied; retry in", denied.RetryAfter)
			continue
		}
		fmt.Println("granted", err)
	}
	// Output:
	// granted <nil>
	// granted <nil>
	// denied; retry in 30s
}

func ExampleClient_SetLimits() {
	url, stop := exampleServer()
	defer stop()
	c, _ := client.New(url, client.WithPrincipal("ops"))
	ctx := context.Background()

	perKey, _ := tollgate.ParseLimits([]string{"rpm:100", "tpm:10000:15000"})
	_ = c.SetLimits(ctx, tollgate.ResourceScope("openai/gpt-4o"), tollgate.Config{Limits: perKey})
	cfg, err := c.GetLimits(ctx, tollgate.ResourceScope("openai/gpt-4o"))
	if err != nil {
		panic(err)
	}
	for _, l := range cfg.Limits {
		fmt.Println(l)
	}
	_ = c.DeleteLimits(ctx, tollgate.ResourceScope("openai/gpt-4o"))
	_, err = c.GetLimits(ctx, tollgate.ResourceScope("openai/gpt-4o"))
	fmt.Println(errors.Is(err, tollgate.ErrNotFound))
	// Output:
	// rpm:100/min
	// tpm:10000/min:15000
	// true
}

func ExampleClient_Wait() {
	url, stop := exampleServer()
	defer stop()
	c, _ := client.New(url)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// Sleeps the exact retry-after when denied; gives up at once if ctx's
	// deadline would pass first.
	lease, err := c.Wait(ctx, "key-1", "batch", tollgate.Consume{"rpm": 1},
		client.WithLimits(tollgate.PerMinute("rpm", 10)))
	if err != nil {
		panic(err)
	}
	fmt.Println(lease.Commit(ctx))
	// Output: <nil>
}
