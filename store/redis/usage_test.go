package redis_test

import (
	"testing"

	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/storetest"
)

func TestUsage(t *testing.T) {
	storetest.RunUsage(t, func(t *testing.T) store.UsageStore { return newStore(t) })
}

// The same suite on the Cluster: a namespace's snapshots and indexes are
// one hash slot, so each AddUsage is one script on one node.
func TestUsageCluster(t *testing.T) {
	storetest.RunUsage(t, func(t *testing.T) store.UsageStore { return newClusterStore(t) })
}
