package limitertest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/reconcile"
)

// Retries are safe across processes (docs/semantics.md 16, issue 21 item
// 2): two limiters with change watches of their own stand for two
// replicas over one store. An acquire retried on the other replica with
// its idempotency key is the first grant again and debits once; a commit
// sent again (through a handle resumed before the first commit) answers
// how the lease ended, with the first commit's consumption; a rollback,
// an adjustment or an extension of an ended lease says how it ended
// (committed, rolled back, expired by a reconciler), an id never seen is
// ErrLeaseNotFound; an AcquireAndCommit's key is remembered for
// model.TombstoneKeep (10 minutes) after its grant.
func testLimiterRetriesAcrossReplicas(t *testing.T, e *env) {
	a := e.limiter()
	b := e.limiterOver(e.s) // another process: its own change watch
	limits := tollgate.WithLimits(tollgate.PerHour("rph", 10), tollgate.ConcurrencyLimit("slots", 3))
	three := tollgate.Consume{"rph": 3, "slots": 1}
	key := tollgate.WithIdempotencyKey("order-1")

	first := e.acquire(a, "k", "api", three, limits, key)
	again := e.acquire(b, "k", "api", three, limits, key)
	if first.Replayed() || !again.Replayed() || again.ID() != first.ID() || again.Consumed()["rph"] != 3 {
		t.Errorf("retry on another replica: replayed %v/%v, ids %s/%s, consumed %v; want the first grant replayed",
			first.Replayed(), again.Replayed(), first.ID(), again.ID(), again.Consumed())
	}
	e.wantAvailable(b, "k", "api", "rph", 7, limits)
	e.wantAvailable(b, "k", "api", "slots", 2, limits)
	if _, err := b.Acquire(e.ctx, "k", "api", tollgate.Consume{"rph": 4, "slots": 1}, limits, key); !errors.Is(err, tollgate.ErrIdempotencyConflict) {
		t.Errorf("the key with another request: %v, want ErrIdempotencyConflict", err)
	}

	// A commit whose answer was lost, sent again through another handle.
	id := first.ID() // a handle forgets its id once it has ended
	resumed, err := b.ResumeLease(e.ctx, id)
	if err != nil {
		t.Fatalf("ResumeLease on B: %v", err)
	}
	if err := first.Adjust(e.ctx, tollgate.Consume{"rph": 1}); err != nil {
		t.Fatal(err)
	}
	if err := first.Commit(e.ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	ended := wantEnded(t, "commit again", resumed.Commit(e.ctx), model.EndedCommitted)
	if ended != nil && (ended.Consumed["rph"] != 4 || ended.ID != id) {
		t.Errorf("commit again: consumed %v, id %s; want the first commit's consumption (rph 4)", ended.Consumed, ended.ID)
	}
	_, err = b.ResumeLease(e.ctx, id)
	wantEnded(t, "resume a committed lease", err, model.EndedCommitted)
	_, err = b.Acquire(e.ctx, "k", "api", three, limits, key)
	wantEnded(t, "the key of a committed lease", err, model.EndedCommitted)
	e.wantAvailable(a, "k", "api", "rph", 6, limits)
	e.wantAvailable(a, "k", "api", "slots", 3, limits)

	// A rollback: the other handle's adjustment, extension, rollback and
	// commit all say so, and nothing is given back twice.
	second := e.acquire(a, "k", "api", three, limits)
	id = second.ID()
	other, err := b.ResumeLease(e.ctx, id)
	if err != nil {
		t.Fatalf("ResumeLease on B: %v", err)
	}
	e.rollback(second)
	wantEnded(t, "extend a rolled-back lease", other.Extend(e.ctx, time.Minute), model.EndedRolledBack)
	if other, err = b.ResumeLease(e.ctx, id); err == nil {
		t.Fatalf("ResumeLease of a rolled-back lease: %v", other)
	}
	wantEnded(t, "resume a rolled-back lease", err, model.EndedRolledBack)
	adjusting := e.acquire(a, "k", "api", three, limits)
	late, err := b.ResumeLease(e.ctx, adjusting.ID())
	if err != nil {
		t.Fatal(err)
	}
	e.rollback(adjusting)
	if err := late.Adjust(e.ctx, tollgate.Consume{"rph": 1}); err == nil {
		wantEnded(t, "adjust a rolled-back lease, synced", late.Sync(e.ctx), model.EndedRolledBack)
	} else {
		wantEnded(t, "adjust a rolled-back lease", err, model.EndedRolledBack)
	}
	e.wantAvailable(a, "k", "api", "rph", 6, limits)
	e.wantAvailable(a, "k", "api", "slots", 3, limits)

	// Expired, ended by a reconciler: the holder learns it, on any replica.
	held := e.acquire(a, "k", "api", three, limits, tollgate.WithLeaseTTL(time.Minute))
	id = held.ID()
	e.Advance(2 * 60_000)
	r, err := reconcile.New(e.s, reconcile.WithClock(e.clk), reconcile.WithNamespaces(e.ns))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.Once(e.ctx); n != 1 || err != nil {
		t.Fatalf("reconciler pass = %d, %v; want 1 lease ended", n, err)
	}
	_, err = b.ResumeLease(e.ctx, id)
	wantEnded(t, "resume an expired lease", err, model.EndedExpired)
	wantEnded(t, "commit an expired lease", held.Commit(e.ctx), model.EndedExpired)
	e.wantAvailable(a, "k", "api", "slots", 3, limits)

	// An id never granted is not found, not ended.
	unknown := model.IdempotentLeaseID("never-used")
	if _, err := b.ResumeLease(e.ctx, unknown); !errors.Is(err, tollgate.ErrLeaseNotFound) || errors.Is(err, tollgate.ErrLeaseClosed) {
		t.Errorf("ResumeLease of an unknown id: %v, want ErrLeaseNotFound only", err)
	}

	// AcquireAndCommit's key, remembered for TombstoneKeep on any replica.
	rph := tollgate.WithLimits(tollgate.PerDay("rpd", 100)) // refills under a token in the time
	once := tollgate.WithIdempotencyKey("commit-1")
	if g, err := a.AcquireAndCommit(e.ctx, "j", "api", tollgate.Consume{"rpd": 1}, rph, once); err != nil || g.Replayed {
		t.Fatalf("AcquireAndCommit with a key: %+v, %v", g, err)
	}
	e.Advance((model.TombstoneKeep - time.Millisecond).Milliseconds())
	if g, err := b.AcquireAndCommit(e.ctx, "j", "api", tollgate.Consume{"rpd": 1}, rph, once); err != nil || !g.Replayed || g.Consumed["rpd"] != 1 {
		t.Errorf("AcquireAndCommit again on B %v later: %+v, %v; want the grant replayed", model.TombstoneKeep-time.Millisecond, g, err)
	}
	e.wantAvailable(b, "j", "api", "rpd", 99, rph)
}

// wantEnded requires err to be a *LeaseEndedError saying how, and returns
// it.
func wantEnded(t *testing.T, step string, err error, how string) *tollgate.LeaseEndedError {
	t.Helper()
	var ended *tollgate.LeaseEndedError
	if !errors.As(err, &ended) || ended.How != how || !errors.Is(err, tollgate.ErrLeaseClosed) ||
		errors.Is(err, tollgate.ErrLeaseExpired) != (how == model.EndedExpired) || !strings.Contains(err.Error(), how) {
		t.Errorf("%s: %v, want a *LeaseEndedError saying %s", step, err, how)
		return nil
	}
	return ended
}
