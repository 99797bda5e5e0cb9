package server

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// stalledStore is the memory store as other processes share it (its
// change generation is polled), whose listing of namespaces — the check of
// whether any key is stored — can stall and then fail, as a store that
// does not answer within its call timeout does.
type stalledStore struct {
	*memory.Store
	stall    atomic.Int64 // a duration; 0: answer
	listings atomic.Int64
}

var errStalled = errors.New("no answer within the call timeout")

func (s *stalledStore) LocalGeneration() bool { return false }

func (s *stalledStore) ListNamespaces(ctx context.Context) ([]model.Namespace, error) {
	s.listings.Add(1)
	if d := time.Duration(s.stall.Load()); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return nil, errStalled
	}
	return s.Store.ListNamespaces(ctx)
}

// TestAuthCheckOfAStalledStore: whether to authenticate is checked again
// once the change generation moves; a store that stalls on that check is
// asked once, not by every request in turn, each waiting for all those
// before it; the last answer stands meanwhile, and for a second after.
func TestAuthCheckOfAStalledStore(t *testing.T) {
	ss := &stalledStore{Store: memory.New()}
	e := newEnvOver(t, ss, WithRefreshInterval(time.Millisecond))
	e.want(http.StatusOK, "POST", "/v1/acquire", acquireBody("rpm:100/min"), nil) // checks: no key stored
	moveGeneration := func() {
		t.Helper()
		before, _ := ss.Store.Generation(context.Background())
		if err := ss.Store.CreateEntity(context.Background(), mustNamespace(t, ss), model.Entity{ID: "e-" + time.Now().Format("150405.000000000")}, model.AuditEvent{}); err != nil {
			t.Fatal(err)
		}
		if after, _ := ss.Store.Generation(context.Background()); after == before {
			t.Fatal("the generation did not move")
		}
		// Let the watch's interval pass, so that the next request reads it.
		time.Sleep(2 * time.Millisecond)
	}

	moveGeneration()
	const stall = 300 * time.Millisecond
	ss.stall.Store(int64(stall))
	ss.listings.Store(0)
	const requests = 8
	took := make([]time.Duration, requests)
	codes := make([]int, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			start := time.Now()
			codes[i], _ = e.do("POST", "/v1/acquire", acquireBody("rpm:100/min"), nil)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	// The first check takes the stall; the requests that waited for it
	// answer right after. A second of margin for a loaded machine: asked
	// by each in turn, the last waited requests x stall = 2.4 s.
	for i := range requests {
		if codes[i] != http.StatusOK || took[i] > stall+time.Second {
			t.Errorf("request %d: %d in %v, want 200 (no key stored, as last checked) within %v", i, codes[i], took[i], stall+time.Second)
		}
	}
	if n := ss.listings.Load(); n != 1 {
		t.Errorf("%d checks of the stored keys by %d requests while the store stalls, want 1", n, requests)
	}

	// Within a second of the failed check, no request asks again.
	ss.listings.Store(0)
	e.want(http.StatusOK, "POST", "/v1/acquire", acquireBody("rpm:100/min"), nil)
	if n := ss.listings.Load(); n != 0 {
		t.Errorf("%d checks of the stored keys right after a failed one, want 0", n)
	}

	// The store answers again: the next check, once the retry delay has
	// passed (moved into the past here), is made, and stands.
	ss.stall.Store(0)
	e.srv.auth.mu.Lock()
	e.srv.auth.failedAt = time.Now().Add(-time.Hour)
	e.srv.auth.mu.Unlock()
	e.want(http.StatusOK, "POST", "/v1/acquire", acquireBody("rpm:100/min"), nil)
	if n := ss.listings.Load(); n != 1 {
		t.Errorf("%d checks once the store answers, want 1", n)
	}
}

// mustNamespace returns the id of the default namespace of s.
func mustNamespace(t *testing.T, s *stalledStore) string {
	t.Helper()
	n, err := s.Store.GetNamespace(context.Background(), model.DefaultNamespace)
	if err != nil {
		t.Fatal(err)
	}
	return n.ID
}
