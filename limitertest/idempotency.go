package limitertest

import (
	"testing"

	"github.com/tollgate-rl/tollgate"
)

// A retried acquire whose first try took the bucket's last token is
// replayed, not refused: the idempotency key's lease is found before the
// empty bucket, whether the first try was committed at once or left open.
func testLimiterIdempotentLastToken(t *testing.T, e *env) {
	lim := e.limiter()
	opt := tollgate.WithLimits(tollgate.PerHour("rph", 1))
	key := tollgate.WithIdempotencyKey("last-token")
	for range 2 {
		if _, err := lim.AcquireAndCommit(e.ctx, "k", "api", tollgate.Consume{"rph": 1}, opt, key); err != nil {
			t.Fatalf("AcquireAndCommit with a key: %v", err)
		}
	}
	open := tollgate.WithIdempotencyKey("last-token-open")
	for i := range 2 {
		if _, err := lim.Acquire(e.ctx, "k2", "api", tollgate.Consume{"rph": 1}, opt, open); err != nil {
			t.Fatalf("Acquire %d with a key: %v", i, err)
		}
	}
	e.wantAvailable(lim, "k", "api", "rph", 0, opt)
	e.wantAvailable(lim, "k2", "api", "rph", 0, opt)
	e.denied(lim, "k", "api", tollgate.Consume{"rph": 1}, opt)
}
