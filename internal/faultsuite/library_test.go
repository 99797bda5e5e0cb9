package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/internal/faultproxy"
)

// libraryAcquirer acquires and commits through a tollgate.Limiter.
type libraryAcquirer struct{ lim *tollgate.Limiter }

func (a libraryAcquirer) acquire(ctx context.Context, k bucketKey, mode tollgate.OnUnavailable) (outcome, error) {
	opts := []tollgate.AcquireOption{tollgate.WithLimits(k.limit)}
	if mode != "" {
		opts = append(opts, tollgate.WithOnUnavailable(mode))
	}
	le, err := a.lim.Acquire(ctx, k.entity, resource, tollgate.Consume{k.limit.Name: 1}, opts...)
	switch {
	case err == nil:
		out := granted
		if le.Degraded() {
			out = degraded
		}
		// A commit of rate limits alone writes nothing.
		if err := le.Commit(ctx); err != nil {
			return failed, fmt.Errorf("commit: %w", err)
		}
		return out, nil
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// The caller's context never ends: the store's deadline must not
		// look like it.
		return failed, err
	case errors.Is(err, tollgate.ErrRateLimited):
		return denied, nil
	case errors.Is(err, tollgate.ErrUnavailable):
		var ue *tollgate.UnavailableError
		if !errors.As(err, &ue) {
			return failed, err
		}
		return unavailable, nil
	}
	return failed, err
}

// libraryFaults, with serverFaults, are every fault the proxy makes. A
// failing fault lasts long enough for answers that take the call timeout
// (the SDK backs off its retries of a reset, a throttled or a failed call
// up to it, unless its retry quota is spent) to be given during it.
var libraryFaults = []fault{
	{faultproxy.Hang, true, hangWindow},
	{faultproxy.Delay(2 * callTimeout), true, slowWindow},
	{faultproxy.Delay(100 * time.Millisecond), false, 0},
	{faultproxy.Drop, true, slowWindow},
	{faultproxy.Throttle, true, slowWindow},
	{faultproxy.ProvisionedThroughput, true, slowWindow},
	{faultproxy.InternalError, true, slowWindow},
}

// TestLibraryFaults: a tollgate.Limiter over store/dynamodb, under load,
// through every fault.
func TestLibraryFaults(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	lim, err := tollgate.New(s.store)
	if err != nil {
		t.Fatal(err)
	}
	all, runs, l := runFaults(t, s.proxy, libraryAcquirer{lim}, libraryFaults, probes{})
	check(t, "library", all, runs, l, s.available(t))
	t.Logf("library: %d degraded leases (Limiter.Stats)", lim.Stats().Degraded)
}
