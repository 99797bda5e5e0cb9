package tollgate_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// charge is written once against Acquirer and runs in process or through
// a server.
func charge[L tollgate.Held](ctx context.Context, a tollgate.Acquirer[L], key string) error {
	return a.Do(ctx, key, "openai/gpt-4o", tollgate.Consume{"rpm": 1}, func(ctx context.Context, l L) error {
		return l.Adjust(ctx, tollgate.Consume{"tpm": 500}) // the real cost, known after the call
	}, tollgate.WithLimits(tollgate.PerMinute("rpm", 100), tollgate.PerMinute("tpm", 10_000)))
}

// The same function over a Limiter (limits in this process) and over a
// client of a tollgate serve (limits in the server's store).
func ExampleAcquirer() {
	ctx := context.Background()
	lim, _ := tollgate.New(memory.New())
	fmt.Println("in process:", charge(ctx, lim, "key-1"))

	srv, _ := server.New(memory.New(), server.WithLogger(slog.New(slog.DiscardHandler)))
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c, _ := client.New(ts.URL)
	fmt.Println("through a server:", charge(ctx, c, "key-1"))
	// Output:
	// in process: <nil>
	// through a server: <nil>
}
