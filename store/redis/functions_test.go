package redis_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/redis"
	"github.com/tollgate-rl/tollgate/store/storetest"
)

// acquireOnce acquires and commits one request of a fresh entity on s.
func acquireOnce(t *testing.T, s *redis.Store, entity string) {
	t.Helper()
	ctx := context.Background()
	lim, err := tollgate.New(s)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := lim.Acquire(ctx, entity, "api", tollgate.Consume{"rpm": 1}, tollgate.WithLimits(tollgate.PerMinute("rpm", 10)))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := lease.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// A server whose functions were flushed (a restart without persistence,
// FUNCTION FLUSH) gets the library again on the next call, which succeeds.
func TestFunctionsReloaded(t *testing.T) {
	c := rawClient(t, serverURL)
	s := newStore(t)
	ctx := context.Background()
	acquireOnce(t, s, "reload-1")
	if !redis.UsesFunctions(s) {
		t.Fatal("the store does not use functions on a server that has them")
	}
	if err := c.Do(ctx, c.B().FunctionFlush().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	acquireOnce(t, s, "reload-2")
	libs, err := c.Do(ctx, c.B().FunctionList().Libraryname(redis.LibraryName).Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) != 1 || !redis.UsesFunctions(s) {
		t.Errorf("after a flush: %d libraries named %s, functions used: %v; want 1, true", len(libs), redis.LibraryName, redis.UsesFunctions(s))
	}
}

// A user who may not load or call functions gets the same scripts by
// EVALSHA: the whole contract holds.
func TestConformanceWithoutFunctions(t *testing.T) {
	c := rawClient(t, serverURL)
	ctx := context.Background()
	const user, password = "tg_nofunctions", "tg-test-password"
	acl := c.B().AclSetuser().Username(user).Rule("reset", "on", ">"+password, "~*", "&*", "+@all", "-function", "-fcall", "-fcall_ro").Build()
	if err := c.Do(ctx, acl).Error(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Do(context.Background(), c.B().AclDeluser().Username(user).Build()) })
	url := strings.Replace(serverURL, "redis://", "redis://"+user+":"+password+"@", 1)
	s := openStore(t, url)
	acquireOnce(t, s, "eval-1")
	if redis.UsesFunctions(s) {
		t.Fatal("the store uses functions for a user refused them")
	}
	storetest.Run(t, func(t *testing.T) store.Store { return s }, storetest.Groups("Buckets", "Cascade", "Concurrency", "Leases", "Penalties", "Resets"))
}
