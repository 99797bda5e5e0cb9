package dynamodb

// Faults on the paths of sharded buckets (see faults_test.go for the
// transport): the gathering transaction (gather) and the cascade through a
// sharded bucket (consumeEach). Each test checks that the acquire ends
// with ErrUnavailable (or is granted once the fault is transient), that the
// retries stay within one budget (counted requests and recorded backoffs,
// not wall time), and that the balances are exact afterwards: nothing lost,
// nothing applied twice.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store"
)

// shardFaultAttempts is WithMaxAttempts in these tests.
const shardFaultAttempts = 4

// shardScene is a limiter over an instrumented store whose sleeps are
// recorded, with org split into 4 shards (rpm 400/min: 100 tokens a shard)
// and key cascading to it, both warm.
type shardScene struct {
	*limiterEnv
	sleeps   *sleepRecorder
	org, key string
	limits   tollgate.AcquireOption
}

func newShardScene(t *testing.T, tt *testTable, prefix string, attemptTimeout time.Duration) *shardScene {
	t.Helper()
	rec := &sleepRecorder{}
	c := tt.client(t, attemptTimeout, WithWritePressureLimit(2), WithMaxShards(4),
		WithMaxAttempts(shardFaultAttempts), withSleep(rec.sleep))
	s := &shardScene{limiterEnv: newLimiterEnv(t, c), sleeps: rec, org: prefix + ".org", key: prefix + ".key",
		limits: tollgate.WithLimits(tollgate.PerMinute("rpm", 400))}
	s.cascadePair(t, s.org, s.key)
	id := bucketID{mustNamespaceID(t, s.c.Store, s.lim.Namespace()), store.BucketKey{Entity: s.org, Resource: faultResource}}
	ctx := context.Background()
	for i := 0; c.eng().shardsOf(id) < 4; i++ {
		if i == 100 {
			t.Fatalf("%s did not split to 4 shards", s.org)
		}
		if err := s.acquire(t, s.org, faultResource, tollgate.Consume{"rpm": 1}, s.limits).Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.acquire(t, s.key, faultResource, tollgate.Consume{"rpm": 1}, s.limits).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	c.calls.take()
	c.net.take()
	rec.take()
	return s
}

// balances returns the rpm available to key and org.
func (s *shardScene) balances(t *testing.T) map[string]int64 {
	t.Helper()
	return s.available(t, s.key, faultResource, s.limits)
}

// before returns the balances before a fault, and starts counting requests
// afresh.
func (s *shardScene) before(t *testing.T) map[string]int64 {
	t.Helper()
	b := s.balances(t)
	s.c.net.take()
	return b
}

// blocked acquires amount for entity in mode Block and checks that it fails
// with ErrUnavailable (wrapping ErrContention if contention is true) within
// the latency bound of kind.
func (s *shardScene) blocked(t *testing.T, entity string, amount int64, kind faultKind, contention bool) {
	t.Helper()
	start := time.Now()
	le, err := s.lim.Acquire(context.Background(), entity, faultResource, tollgate.Consume{"rpm": amount}, s.limits,
		tollgate.WithOnUnavailable(tollgate.Block))
	elapsed := time.Since(start)
	if le != nil || !errors.Is(err, tollgate.ErrUnavailable) || errors.Is(err, ErrContention) != contention {
		t.Fatalf("Acquire: lease %v, err %v; want ErrUnavailable (contention %v)", le, err, contention)
	}
	if elapsed > latencyBound(kind) {
		t.Errorf("took %v, bound %v", elapsed, latencyBound(kind))
	}
}

// The gathering transaction (150 tokens from shards of 100) is cancelled:
// conflicts and throttled items back off and retry within the budget;
// persistently, the acquire gives up after WithMaxAttempts transactions,
// each after a fresh read, and nothing is debited.
func TestFaultShardGather(t *testing.T) {
	tt := newTestTable(t)
	for _, kind := range []faultKind{faultTxConflict, faultTxThrottled} {
		t.Run("persistent "+string(kind), func(t *testing.T) {
			t.Parallel()
			s := newShardScene(t, tt, "gp."+string(kind), 5*time.Second)
			before := s.before(t)
			s.c.net.fail(faultRule{op: "TransactWriteItems", times: -1, kind: kind})
			s.blocked(t, s.org, 150, kind, true)
			req, _ := s.c.net.take()
			if req["TransactWriteItems"] != shardFaultAttempts || req["BatchGetItem"] != shardFaultAttempts {
				t.Errorf("%d transactions after %d reads, want %d of each (WithMaxAttempts)",
					req["TransactWriteItems"], req["BatchGetItem"], shardFaultAttempts)
			}
			expectBackoffs(t, s.sleeps, shardFaultAttempts-1, shardFaultAttempts)
			s.c.net.heal()
			expectAvailable(t, "after giving up", s.balances(t), before)
		})

		t.Run("transient "+string(kind), func(t *testing.T) {
			t.Parallel()
			s := newShardScene(t, tt, "gt."+string(kind), 5*time.Second)
			before := s.before(t)
			s.c.net.fail(faultRule{op: "TransactWriteItems", times: shardFaultAttempts - 1, kind: kind})
			if err := s.acquire(t, s.org, faultResource, tollgate.Consume{"rpm": 150}, s.limits).Commit(context.Background()); err != nil {
				t.Fatal(err)
			}
			if req, _ := s.c.net.take(); req["TransactWriteItems"] != shardFaultAttempts {
				t.Errorf("%d transactions, want %d", req["TransactWriteItems"], shardFaultAttempts)
			}
			expectBackoffs(t, s.sleeps, shardFaultAttempts-1, shardFaultAttempts)
			s.c.net.heal()
			before[s.org+"/rpm"] -= 150
			expectAvailable(t, "after a retried gather", s.balances(t), before)
		})
	}

	// The shards cannot be read: the SDK's attempts, then unavailable; no
	// retry of the backend's own, nothing written.
	t.Run("read throttled", func(t *testing.T) {
		t.Parallel()
		s := newShardScene(t, tt, "gr", 5*time.Second)
		before := s.before(t)
		s.c.net.fail(faultRule{op: "BatchGetItem", times: -1, kind: faultThrottle})
		s.blocked(t, s.org, 150, faultThrottle, false)
		if req, _ := s.c.net.take(); req["BatchGetItem"] != sdkAttempts || req["TransactWriteItems"] != 0 {
			t.Errorf("requests %v, want %d BatchGetItem and no transaction", req, sdkAttempts)
		}
		expectBackoffs(t, s.sleeps, 0, shardFaultAttempts)
		s.c.net.heal()
		expectAvailable(t, "after a failed read", s.balances(t), before)
	})
}

// A cascade through the sharded org (consumeEach): the org's write fails
// for good, the key's succeeds and is given back; the acquire is
// unavailable and both balances are as before.
func TestFaultShardCascade(t *testing.T) {
	tt := newTestTable(t)
	for _, kind := range persistentKinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			s := newShardScene(t, tt, "sc."+string(kind), attemptTimeoutFor(kind))
			before := s.before(t)
			s.c.net.fail(faultRule{op: "UpdateItem", match: "BUCKET#" + s.org + "#", times: -1, kind: kind})
			s.blocked(t, s.key, 1, kind, false)
			req, inj := s.c.net.take()
			// The org: one shard, every SDK attempt; the key: its
			// speculative write and the compensation.
			if inj["UpdateItem"] != sdkAttempts || req["UpdateItem"] != sdkAttempts+2 {
				t.Errorf("UpdateItem requests %d (faulted %d), want %d (faulted %d)",
					req["UpdateItem"], inj["UpdateItem"], sdkAttempts+2, sdkAttempts)
			}
			expectBackoffs(t, s.sleeps, 0, shardFaultAttempts)
			s.c.net.heal()
			expectAvailable(t, "after a compensated cascade", s.balances(t), before)
		})
	}

	// The org gathers (150 tokens) and its transaction keeps conflicting:
	// the key's and the org's paths share one budget, so the whole cascade
	// makes WithMaxAttempts transactions, not more.
	t.Run("gather conflict", func(t *testing.T) {
		t.Parallel()
		s := newShardScene(t, tt, "sc.gather", 5*time.Second)
		before := s.before(t)
		s.c.net.fail(faultRule{op: "TransactWriteItems", times: -1, kind: faultTxConflict})
		s.blocked(t, s.key, 150, faultTxConflict, true)
		if req, _ := s.c.net.take(); req["TransactWriteItems"] != shardFaultAttempts {
			t.Errorf("%d transactions, want %d (one budget for the cascade)", req["TransactWriteItems"], shardFaultAttempts)
		}
		expectBackoffs(t, s.sleeps, shardFaultAttempts-1, shardFaultAttempts)
		s.c.net.heal()
		expectAvailable(t, "after a compensated cascade", s.balances(t), before)
	})
}
