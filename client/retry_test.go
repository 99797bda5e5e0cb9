package client_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/client"
)

// lossyTransport delivers requests but loses the next n answers, as a
// connection reset after the server acted would; it counts the requests
// and the idempotency keys they carried.
type lossyTransport struct {
	rt   http.RoundTripper
	lose atomic.Int32
	sent atomic.Int32
	keys []string
}

func (l *lossyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	l.sent.Add(1)
	l.keys = append(l.keys, r.Header.Get(api.IdempotencyKeyHeader))
	resp, err := l.rt.RoundTrip(r)
	if err == nil && l.lose.Add(-1) >= 0 {
		resp.Body.Close()
		return nil, errors.New("connection reset by peer")
	}
	return resp, err
}

// An acquire whose answer is lost is sent again with the same key: the
// server grants once and the retry's answer is the first grant, replayed.
// A commit or rollback whose answer is lost is sent again too, and is
// done; an adjust is not (it adds up).
func TestRetriesAfterLostAnswers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	lt := &lossyTransport{rt: http.DefaultTransport}
	c := e.client(t, client.WithHTTPClient(&http.Client{Transport: lt}))
	limits := client.WithLimits(tollgate.PerMinute("rpm", 10))
	avail := func() int64 { return available(t, e.client(t), "k", "api", limits)["rpm"] }

	lt.lose.Store(1)
	g, err := c.AcquireAndCommit(ctx, "k", "api", tollgate.Consume{"rpm": 3}, limits)
	must(t, "AcquireAndCommit with its answer lost once", err)
	if !g.Replayed || g.Consumed["rpm"] != 3 || lt.sent.Load() != 2 || lt.keys[0] == "" || lt.keys[0] != lt.keys[1] {
		t.Errorf("grant %+v after %d sends with keys %q, want the first replayed, one key", g, lt.sent.Load(), lt.keys)
	}
	if got := avail(); got != 7 {
		t.Errorf("rpm = %d, want 7: debited once", got)
	}

	le, err := c.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 2}, limits)
	must(t, "Acquire", err)
	lt.lose.Store(1)
	must(t, "Commit with its answer lost once", le.Commit(ctx))
	le, err = c.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 2}, limits)
	must(t, "Acquire", err)
	lt.lose.Store(1)
	must(t, "Rollback with its answer lost once", le.Rollback(ctx))
	if got := avail(); got != 5 {
		t.Errorf("rpm = %d, want 5: 3 and 2 committed, 2 rolled back", got)
	}

	le, err = c.Acquire(ctx, "k", "api", tollgate.Consume{"rpm": 1}, limits)
	must(t, "Acquire", err)
	lt.lose.Store(1)
	before := lt.sent.Load()
	if err := le.Adjust(ctx, tollgate.Consume{"rpm": 1}); !errors.Is(err, tollgate.ErrUnavailable) || lt.sent.Load() != before+1 {
		t.Errorf("Adjust with its answer lost: %v after %d sends, want one send and an unreachable server", err, lt.sent.Load()-before)
	}
}

// Without idempotency keys the client sends none, and retries no acquire.
func TestWithoutIdempotencyKeys(t *testing.T) {
	e := newEnv(t)
	lt := &lossyTransport{rt: http.DefaultTransport}
	c := e.client(t, client.WithHTTPClient(&http.Client{Transport: lt}), client.WithoutIdempotencyKeys())
	lt.lose.Store(1)
	_, err := c.AcquireAndCommit(context.Background(), "k", "api", tollgate.Consume{"rpm": 1}, client.WithLimits(tollgate.PerMinute("rpm", 10)))
	if !errors.Is(err, tollgate.ErrUnavailable) || lt.sent.Load() != 1 || lt.keys[0] != "" {
		t.Errorf("%v after %d sends with key %q, want one send without a key", err, lt.sent.Load(), lt.keys[0])
	}
}
