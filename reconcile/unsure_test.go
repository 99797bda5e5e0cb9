package reconcile_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/reconcile"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

var errNoAnswer = errors.New("no answer within the call timeout")

// lossyStore is the memory store whose lease endings can lose their
// answer: applied (or not), then failed without saying which, as a store
// that did not answer in time does; and whose audit reads can fail.
type lossyStore struct {
	*memory.Store

	mu          sync.Mutex
	lose        int  // endings to lose the answer of
	apply       bool // whether those are applied
	auditDown   int  // audit reads to fail
	auditReads  int
	endingCalls int
}

func (s *lossyStore) EndLease(ctx context.Context, ns string, e store.LeaseEnding) error {
	s.mu.Lock()
	s.endingCalls++
	lose, apply := s.lose > 0, s.apply
	if lose {
		s.lose--
	}
	s.mu.Unlock()
	if !lose {
		return s.Store.EndLease(ctx, ns, e)
	}
	if apply {
		if err := s.Store.EndLease(ctx, ns, e); err != nil {
			return err
		}
	}
	return errNoAnswer
}

func (s *lossyStore) ListAudit(ctx context.Context, ns, entity, after string, limit int) ([]model.AuditEvent, error) {
	s.mu.Lock()
	s.auditReads++
	down := s.auditDown > 0
	if down {
		s.auditDown--
	}
	s.mu.Unlock()
	if down {
		return nil, errNoAnswer
	}
	return s.Store.ListAudit(ctx, ns, entity, after, limit)
}

// TestEndingsOfUnknownOutcome: an ending whose answer was lost is counted
// reclaimed (Stats, OnReclaim) once if and only if it was applied: read
// back from its audit event at once (then it is no failure), or in a later
// pass when the store could not tell at once (then its pass counted and
// returned the failure). One not applied is a failure, and is ended by a
// later pass, counted then.
func TestEndingsOfUnknownOutcome(t *testing.T) {
	for _, tc := range []struct {
		name      string
		apply     bool
		auditDown int // audit reads that fail
		failed    uint64
		// after the first pass, and after the second
		reclaimed1, reclaimed2 uint64
		passed1, passed2       int // what Once returns
	}{
		{"applied, read back at once", true, 0, 0, 2, 2, 2, 0},
		{"applied, read back a pass later", true, 1, 1, 1, 2, 1, 0},
		{"applied, read back two passes later", true, 2, 1, 1, 1, 1, 0},
		{"not applied, ended by the next pass", false, 0, 1, 1, 2, 1, 1},
		{"not applied, the store cannot tell at once", false, 1, 1, 1, 2, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "default")
			e.lease("default", "lost", time.Second)
			e.lease("default", "fine", time.Second)
			ls := &lossyStore{Store: e.s, lose: 1, apply: tc.apply, auditDown: tc.auditDown}
			var seen []string
			r, err := reconcile.New(ls, reconcile.WithClock(e.clk),
				reconcile.WithOnReclaim(func(rc reconcile.Reclaimed) { seen = append(seen, rc.Lease.ID) }))
			if err != nil {
				t.Fatal(err)
			}
			e.clk.Advance(time.Second)
			n, err := r.Once(e.ctx)
			if errors.Is(err, errNoAnswer) != (tc.failed == 1) || n != tc.passed1 {
				t.Errorf("first pass = %d, %v; want %d, and the lost answer if it failed", n, err, tc.passed1)
			}
			if st := r.Stats(); st.Reclaimed != tc.reclaimed1 || st.Failed != tc.failed {
				t.Errorf("after the first pass: %+v, want %d reclaimed, %d failed", st, tc.reclaimed1, tc.failed)
			}
			if n, err := r.Once(e.ctx); err != nil || n != tc.passed2 {
				t.Errorf("second pass = %d, %v; want %d", n, err, tc.passed2)
			}
			if st := r.Stats(); st.Reclaimed != tc.reclaimed2 {
				t.Errorf("after the second pass: %+v, want %d reclaimed", st, tc.reclaimed2)
			}
			_, _ = r.Once(e.ctx)
			if st := r.Stats(); st.Reclaimed != 2 || st.Failed != tc.failed || len(seen) != 2 {
				t.Errorf("in the end: %+v, OnReclaim saw %v; want both leases reclaimed once, %d failed", st, seen, tc.failed)
			}
			if got := e.free("default"); got != 10_000 {
				t.Errorf("free slots = %d millitokens, want every one back", got)
			}
			evs, err := e.s.ListAudit(e.ctx, "id-default", "job", "", 10)
			if err != nil || len(evs) != 2 {
				t.Errorf("audit: %d events, %v; want 2 lease.expired", len(evs), err)
			}
		})
	}
}
