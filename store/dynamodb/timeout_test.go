package dynamodb

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// The call timeout (timeout.go): a DynamoDB that stops answering costs a
// caller the call timeout, not the HTTP client's timeout times the SDK's
// attempts, and the failure is the store's (ErrTimeout, an
// *UnavailableError from the limiter, the fail mode decides), not a
// context error.

// hungTimeout is the call timeout of these tests, and hungAttempt the HTTP
// client's timeout of one attempt: far longer, so that only the call
// timeout can end a hung request in time.
const (
	hungTimeout = 300 * time.Millisecond
	hungAttempt = 25 * time.Second
)

// hungBound is the most a call may take with the store hung: the call
// timeout, and a second and a half for a loaded 2-core machine (these
// tests run in parallel with the rest of the package, under the race
// detector, beside other test binaries).
const hungBound = hungTimeout + 1500*time.Millisecond

func TestWithCallTimeoutOption(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want time.Duration
		ok   bool
	}{
		{-time.Millisecond, 0, false},
		{0, 0, true},
		{2 * time.Second, 2 * time.Second, true},
	} {
		s, err := New(localConfig(), "t", []Option{WithCallTimeout(tc.d)})
		if tc.ok != (err == nil) {
			t.Errorf("WithCallTimeout(%v): err %v", tc.d, err)
			continue
		}
		if err == nil && s.CallTimeout() != tc.want {
			t.Errorf("WithCallTimeout(%v): CallTimeout() = %v", tc.d, s.CallTimeout())
		}
		var ve *model.ValidationError
		if err != nil && (!errors.As(err, &ve) || ve.Field != "dynamodb option WithCallTimeout") {
			t.Errorf("WithCallTimeout(%v): err %v, want a ValidationError naming the option", tc.d, err)
		}
	}
	if s, err := New(localConfig(), "t", nil); err != nil || s.CallTimeout() != DefaultCallTimeout {
		t.Errorf("default call timeout %v (err %v), want %v", s.CallTimeout(), err, DefaultCallTimeout)
	}
}

// TestCallTimeoutHungWrite: the acquire's write hangs. Block mode is an
// *UnavailableError wrapping ErrTimeout, Allow mode a degraded lease, both
// within the call timeout; nothing is debited; once the store answers
// again, the next acquire is granted.
func TestCallTimeoutHungWrite(t *testing.T) {
	tt := newTestTable(t)
	ctx := context.Background()
	for _, p := range faultPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			p.opts = append(p.opts, WithCallTimeout(hungTimeout))
			s := newFaultScene(t, tt, p, hungAttempt, "hung."+p.name)
			s.c.net.fail(faultRule{op: p.op, times: -1, kind: faultTimeout})

			block := s.target()
			start := time.Now()
			le, err := s.lim.Acquire(ctx, block, faultResource, tollgate.Consume{"rpm": 1}, s.limits, tollgate.WithOnUnavailable(tollgate.Block))
			elapsed := time.Since(start)
			var ue *tollgate.UnavailableError
			if le != nil || !errors.As(err, &ue) || !errors.Is(err, ErrTimeout) {
				t.Fatalf("Block mode: lease %v, err %v; want an *UnavailableError wrapping ErrTimeout", le, err)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Block mode: err %v is context.DeadlineExceeded, which callers take for their own deadline", err)
			}
			if elapsed < hungTimeout || elapsed > hungBound {
				t.Errorf("Block mode took %v, want %v to %v", elapsed, hungTimeout, hungBound)
			}

			allow := s.target()
			start = time.Now()
			le, err = s.lim.Acquire(ctx, allow, faultResource, tollgate.Consume{"rpm": 1}, s.limits, tollgate.WithOnUnavailable(tollgate.Allow))
			elapsed = time.Since(start)
			if err != nil || le == nil || !le.Degraded() || !errors.Is(le.Cause(), ErrTimeout) {
				t.Fatalf("Allow mode: lease %v, err %v; want a degraded lease caused by ErrTimeout", le, err)
			}
			if elapsed > hungBound {
				t.Errorf("Allow mode took %v, bound %v", elapsed, hungBound)
			}

			// The hung requests never reached the table.
			s.c.net.heal()
			s.expectRPM(t, "after the hang", s.entity, 99)
			s.expectRPM(t, "after the hang", block, s.baseline(block))
			if err := s.acquire(t, block, faultResource, tollgate.Consume{"rpm": 1}, s.limits).Commit(ctx); err != nil {
				t.Fatal(err)
			}
			s.expectRPM(t, "after healing", block, s.baseline(block)-1)
		})
	}
}

// TestCallTimeoutLane: many goroutines acquire one bucket while its writes
// hang. One writes, the others wait in the item's lane behind it; each
// waits no longer than the call timeout from its own start, whoever
// writes, and is told ErrTimeout. Once the store answers, every goroutine
// is granted again and the balance is exactly what was granted before
// and after: nothing of the hung writes reached the table.
func TestCallTimeoutLane(t *testing.T) {
	tt := newTestTable(t)
	ctx := context.Background()
	p := faultPaths[0]
	p.opts = append(p.opts, WithCallTimeout(hungTimeout))
	p.rpm = 1000
	s := newFaultScene(t, tt, p, hungAttempt, "hung.lane")
	s.c.net.fail(faultRule{op: p.op, times: -1, kind: faultTimeout})

	const goroutines, rounds = 16, 3
	type result struct {
		took time.Duration
		err  error
	}
	results := make([]result, goroutines*rounds)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for r := range rounds {
				start := time.Now()
				le, err := s.lim.Acquire(ctx, s.entity, faultResource, tollgate.Consume{"rpm": 1}, s.limits, tollgate.WithOnUnavailable(tollgate.Block))
				if le != nil {
					err = errors.New("granted while the store hangs")
				}
				results[g*rounds+r] = result{time.Since(start), err}
			}
		})
	}
	wg.Wait()
	var worst time.Duration
	for i, r := range results {
		worst = max(worst, r.took)
		if !errors.Is(r.err, tollgate.ErrUnavailable) || !errors.Is(r.err, ErrTimeout) {
			t.Errorf("acquire %d: %v, want ErrUnavailable wrapping ErrTimeout", i, r.err)
		}
		if r.took > hungBound {
			t.Errorf("acquire %d took %v, bound %v", i, r.took, hungBound)
		}
	}
	t.Logf("%d acquires of one bucket while its writes hang: the slowest answered in %v (call timeout %v)", len(results), worst, hungTimeout)

	// The lane's last batch may still be under way, unanswered until its
	// call timeout: wait for it to give up before the store answers again,
	// so that nothing hung lands.
	id := itemID{mustNamespaceID(t, s.c.Store, tollgate.DefaultNamespace), store.BucketKey{Entity: s.entity, Resource: faultResource}, 0}
	deadline := time.Now().Add(hungBound)
	for laneBusy(s.c.Store, id) {
		if time.Now().After(deadline) {
			t.Fatalf("the lane is still writing %v after the last acquire answered", hungBound)
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.c.net.heal()
	for range goroutines {
		if err := s.acquire(t, s.entity, faultResource, tollgate.Consume{"rpm": 1}, s.limits).Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s.expectRPM(t, "after the hang", s.entity, 999-goroutines)
}

// TestCallTimeoutCommit: a rollback whose write hangs fails within the
// call timeout with ErrTimeout, and is not applied.
func TestCallTimeoutCommit(t *testing.T) {
	tt := newTestTable(t)
	ctx := context.Background()
	p := faultPath{name: "rollback", opts: []Option{WithCallTimeout(hungTimeout)}}
	s := newFaultScene(t, tt, p, hungAttempt, "hung.rollback")
	le := s.acquire(t, s.entity, faultResource, tollgate.Consume{"rpm": 1}, s.limits)
	s.c.net.fail(faultRule{op: "UpdateItem", times: -1, kind: faultTimeout})
	start := time.Now()
	err := le.Rollback(ctx)
	elapsed := time.Since(start)
	if !errors.Is(err, tollgate.ErrUnavailable) || !errors.Is(err, ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Rollback: %v, want ErrUnavailable wrapping ErrTimeout", err)
	}
	if elapsed > hungBound {
		t.Errorf("Rollback took %v, bound %v", elapsed, hungBound)
	}
	s.c.net.heal()
	s.expectRPM(t, "after the hung rollback", s.entity, 98)
}

// TestCallTimeoutOff: WithCallTimeout(0) leaves a hung call to the HTTP
// client's timeout, as before the call timeout existed: the acquire takes
// every attempt's timeout.
func TestCallTimeoutOff(t *testing.T) {
	tt := newTestTable(t)
	const attempt = 200 * time.Millisecond
	p := faultPaths[0]
	p.opts = append(p.opts, WithCallTimeout(0))
	s := newFaultScene(t, tt, p, attempt, "hung.off")
	s.c.net.fail(faultRule{op: p.op, times: -1, kind: faultTimeout})
	start := time.Now()
	_, err := s.lim.Acquire(context.Background(), s.entity, faultResource, tollgate.Consume{"rpm": 1}, s.limits, tollgate.WithOnUnavailable(tollgate.Block))
	elapsed := time.Since(start)
	if !errors.Is(err, tollgate.ErrUnavailable) || errors.Is(err, ErrTimeout) {
		t.Errorf("Acquire: %v, want ErrUnavailable, not ErrTimeout", err)
	}
	if elapsed < sdkAttempts*attempt {
		t.Errorf("took %v: less than %d attempts of %v", elapsed, sdkAttempts, attempt)
	}
}

// laneBusy reports whether a write to item id is under way or queued.
func laneBusy(s *Store, id itemID) bool {
	l := s.eng().lanes.lookup(id)
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.running || len(l.queue) > 0
}

// TestCallTimeoutSparesTableManagement: the table's management, an
// operator's, is not bounded by the call timeout (DynamoDB, and DynamoDB
// Local when cold, can take seconds over a new table's first writes); an
// item read through the same store is.
func TestCallTimeoutSparesTableManagement(t *testing.T) {
	if endpoint == "" {
		t.Skip("no DynamoDB Local")
	}
	ctx := context.Background()
	s := mustNew(t, localConfig(), "tollgate-test-"+randomHex(6), []Option{WithoutStreams(), WithCallTimeout(time.Nanosecond)}, atLocal)
	if err := s.Admin().CreateTable(ctx); err != nil {
		t.Fatalf("CreateTable under a call timeout of 1 ns: %v", err)
	}
	t.Cleanup(func() { _ = s.Admin().DeleteTable(context.Background()) })
	if err := s.Admin().CheckTable(ctx); err != nil {
		t.Errorf("CheckTable: %v", err)
	}
	if _, err := s.Admin().DescribeTable(ctx); err != nil {
		t.Errorf("DescribeTable: %v", err)
	}
	if _, err := s.GetNamespace(ctx, model.DefaultNamespace); !errors.Is(err, ErrTimeout) {
		t.Errorf("GetNamespace under a call timeout of 1 ns: %v, want ErrTimeout", err)
	}
	if err := s.Admin().DeleteTable(ctx); err != nil {
		t.Errorf("DeleteTable: %v", err)
	}
}
