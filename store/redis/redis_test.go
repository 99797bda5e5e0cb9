package redis_test

import (
	"context"
	"os"
	"testing"

	"github.com/tollgate-rl/tollgate/internal/redislocal"
	"github.com/tollgate-rl/tollgate/limitertest"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/redis"
	"github.com/tollgate-rl/tollgate/store/storetest"
)

// serverURL and clusterURL are the redis-server and the three-master
// Cluster of this test binary (TestMain).
var serverURL, clusterURL string

func TestMain(m *testing.M) {
	if os.Getenv(mpWorkerEnv) != "" {
		os.Exit(runWorker())
	}
	os.Exit(redislocal.MainCluster(m, &serverURL, &clusterURL))
}

// newStore returns a Store over the test binary's server, closed when t
// ends.
func newStore(t testing.TB, opts ...redis.Option) *redis.Store {
	t.Helper()
	return openStore(t, serverURL, opts...)
}

// newClusterStore returns a Store over the test binary's Cluster.
func newClusterStore(t testing.TB, opts ...redis.Option) *redis.Store {
	t.Helper()
	return openStore(t, clusterURL, opts...)
}

func openStore(t testing.TB, url string, opts ...redis.Option) *redis.Store {
	t.Helper()
	if url == "" {
		t.Skip(redislocal.Help)
	}
	s, err := redis.Open(context.Background(), url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// groups are the conformance groups TOLLGATE_REDIS_GROUPS names, to run
// only those while working on them.
var groups = storetest.Groups(os.Getenv("TOLLGATE_REDIS_GROUPS"))

func TestConformance(t *testing.T) {
	s := newStore(t)
	storetest.Run(t, func(t *testing.T) store.Store { return s }, groupOpts()...)
}

// The same suite on a three-master Cluster: every namespace is one hash
// slot, so every script runs on one node.
func TestConformanceCluster(t *testing.T) {
	s := newClusterStore(t)
	storetest.Run(t, func(t *testing.T) store.Store { return s }, groupOpts()...)
}

func groupOpts() []storetest.Option {
	if os.Getenv("TOLLGATE_REDIS_GROUPS") != "" {
		return []storetest.Option{groups}
	}
	return nil
}

func TestBucketLister(t *testing.T) {
	storetest.RunBucketLister(t, func(t *testing.T) storetest.ListerStore { return newStore(t) })
}

// The limiter's suite over a shared server, and over the Cluster.
func TestLimiterConformance(t *testing.T) {
	s := newStore(t)
	limitertest.Run(t, func(t *testing.T) store.Store { return s })
}

func TestLimiterConformanceCluster(t *testing.T) {
	s := newClusterStore(t)
	limitertest.Run(t, func(t *testing.T) store.Store { return s }, limitertest.Groups("Cascade", "Concurrency"))
}
