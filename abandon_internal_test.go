package tollgate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// gatedStore is a memory store that writes every durable acquire and
// loses its answer, and whose GetLease waits for gate to close: an
// abandonment holds its slot (Limiter.abandoning.slots) until then.
type gatedStore struct {
	*memory.Store
	gate chan struct{}
}

var errNoAnswer = errors.New("gated store: no answer")

func (s *gatedStore) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	granted, err := s.Store.Consume(ctx, ns, req)
	if req.Lease != nil && err == nil {
		return false, errNoAnswer
	}
	return granted, err
}

func (s *gatedStore) GetLease(ctx context.Context, ns, id string) (store.LeaseRecord, error) {
	select {
	case <-s.gate:
	case <-ctx.Done():
		return store.LeaseRecord{}, ctx.Err()
	}
	return s.Store.GetLease(ctx, ns, id)
}

func newGated(t *testing.T) (*Limiter, *gatedStore, chan Abandoned) {
	t.Helper()
	s := &gatedStore{Store: memory.New(), gate: make(chan struct{})}
	abandoned := make(chan Abandoned, 2*MaxAbandoning)
	lim, err := New(s, WithOnAbandon(func(a Abandoned) { abandoned <- a }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-s.gate:
		default:
			close(s.gate)
		}
	})
	return lim, s, abandoned
}

// An acquire with an idempotency key is not abandoned: its caller retries
// under the same key, and the retry must find the lease the first call
// wrote. The limiter starts looking for a keyless one before Acquire
// returns.
func TestAbandonOnlyRandomIDs(t *testing.T) {
	ctx := context.Background()
	lim, s, _ := newGated(t)
	slots := WithLimits(ConcurrencyLimit("conns", 4))
	if _, err := lim.Acquire(ctx, "k", "db", Consume{"conns": 1}, slots, WithIdempotencyKey("job-1")); err == nil {
		t.Fatal("Acquire answered no error")
	}
	if n := lim.abandoning.looks.Busy(); n != 0 {
		t.Fatalf("%d abandonments started for an acquire with an idempotency key", n)
	}
	if _, err := lim.Acquire(ctx, "k", "db", Consume{"conns": 1}, slots); err == nil {
		t.Fatal("Acquire answered no error")
	}
	if n := lim.abandoning.looks.Busy(); n != 1 {
		t.Fatalf("%d abandonments started for a keyless acquire, want 1", n)
	}
	close(s.gate)
	le, err := lim.Acquire(ctx, "k", "db", Consume{"conns": 1}, slots, WithIdempotencyKey("job-1"))
	if err != nil || !le.Replayed() {
		t.Fatalf("the retry: %v, want the first call's lease replayed", err)
	}
}

// At most MaxAbandoning abandonments look at once; one more is dropped
// (reported and counted at once), and the others end when the store
// answers.
func TestAbandonBounded(t *testing.T) {
	ctx := context.Background()
	lim, s, abandoned := newGated(t)
	slots := WithLimits(ConcurrencyLimit("conns", 2*MaxAbandoning))
	for range MaxAbandoning + 1 {
		if _, err := lim.Acquire(ctx, "k", "db", Consume{"conns": 1}, slots); err == nil {
			t.Fatal("Acquire answered no error")
		}
	}
	next := func() Abandoned {
		select {
		case a := <-abandoned:
			return a
		case <-time.After(10 * time.Second):
			t.Fatal("no abandonment reported within 10 s")
			return Abandoned{}
		}
	}
	if a := next(); a.Outcome != AbandonDropped {
		t.Fatalf("first reported %+v, want dropped", a)
	}
	close(s.gate)
	for range MaxAbandoning {
		if a := next(); a.Outcome != AbandonEnded {
			t.Fatalf("reported %+v, want ended", a)
		}
	}
	if st := lim.Stats().Abandoned; st != (AbandonStats{Ended: MaxAbandoning, Dropped: 1}) {
		t.Fatalf("Stats().Abandoned = %+v", st)
	}
	avail, err := lim.Available(ctx, "k", "db", slots)
	if err != nil || avail[0].Available != 2*MaxAbandoning-1 {
		t.Fatalf("Available: %+v, %v: want every slot back but the dropped one's", avail, err)
	}
}
