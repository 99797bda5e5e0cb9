package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/internal/measure"
	"github.com/tollgate-rl/tollgate/limitertest"
)

// The reservation scenario (issue 14, item 4): mpProcesses processes of
// mpReservers goroutines each reserve one distinct id, all at once, against
// a capacity of mpReserveBound, through one tollgate.Limiter per process.
const (
	mpReservers    = 32
	mpReserveBound = 10
)

// mpClusters is the stored limit the reservations contend for.
var mpClusters = tollgate.ReservedLimit("clusters", mpReserveBound)

// reserveWork is a worker of the "reserve" scenario: its goroutines reserve
// ids named after the worker (mpEntityEnv) and report those granted.
func reserveWork(ctx context.Context, s *Store) mpResult {
	lim, err := tollgate.New(s, tollgate.WithHolder("mp-"+os.Getenv(mpEntityEnv)))
	if err != nil {
		return mpResult{Tally: measure.Failed(err)}
	}
	// Warm up (namespace, configuration, connections) without reserving.
	if _, err := lim.Available(ctx, "team", "emr"); err != nil {
		return mpResult{Tally: measure.Failed(err)}
	}
	start, _ := strconv.ParseInt(os.Getenv(mpStartEnv), 10, 64)
	time.Sleep(time.Until(time.UnixMilli(start)))
	var mu sync.Mutex
	var res mpResult
	var errs atomic.Int64
	var wg sync.WaitGroup
	for g := range mpReservers {
		wg.Go(func() {
			id := fmt.Sprintf("%s-j%02d", os.Getenv(mpEntityEnv), g)
			_, err := lim.Acquire(ctx, "team", "emr", tollgate.Consume{"clusters": 1}, tollgate.WithReservation(id))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				res.Grants++
				res.Reserved = append(res.Reserved, id)
			case errors.Is(err, tollgate.ErrRateLimited):
				res.Denied++
			default:
				if errs.Add(1) == 1 {
					res.Error = err.Error()
				}
			}
		})
	}
	wg.Wait()
	res.Errors = errs.Load()
	return res
}

// 3 processes x 32 goroutines reserve distinct ids against a capacity of
// 10 on one table: exactly 10 granted, none twice, and the reservations
// the store lists at the end are exactly the ids the workers were granted.
func TestMultiProcessReservations(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test skipped in -short mode")
	}
	ctx := context.Background()
	s := newTable(t)
	lim, admin := limitertest.Planes(t, s, time.Second)
	if err := admin.SetLimits(ctx, tollgate.ResourceScope("emr"), tollgate.Config{Limits: []tollgate.Limit{mpClusters}}); err != nil {
		t.Fatal(err)
	}
	results := runWorkers(t, s, "reserve", []string{"p0", "p1", "p2"})
	var granted []string
	var denied int64
	for _, r := range results {
		granted = append(granted, r.Reserved...)
		denied += r.Denied
	}
	slices.Sort(granted)
	t.Logf("%d processes x %d goroutines, %s: %d granted, %d denied", mpProcesses, mpReservers, mpClusters, len(granted), denied)
	if len(granted) != mpReserveBound || denied != mpProcesses*mpReservers-mpReserveBound {
		t.Errorf("%d granted, %d denied; want %d and %d", len(granted), denied, mpReserveBound, mpProcesses*mpReservers-mpReserveBound)
	}
	if d := slices.Compact(slices.Clone(granted)); len(d) != len(granted) {
		t.Errorf("an id granted twice: %v", granted)
	}
	var listed []string
	for after := ""; ; {
		rs, next, err := admin.Reservations(ctx, "team", "emr", after, 4)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			listed = append(listed, r.ID)
		}
		if after = next; after == "" {
			break
		}
	}
	if !slices.Equal(listed, granted) {
		t.Errorf("listed %v, want the granted %v", listed, granted)
	}
	for _, id := range granted {
		if r, err := admin.Reservation(ctx, id); err != nil || r.Entity != "team" || r.Holder != "mp-"+id[:2] {
			t.Errorf("Reservation(%s) = %+v, %v", id, r, err)
		}
	}
	sts, err := lim.Available(ctx, "team", "emr")
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != 1 || sts[0].Available != 0 || sts[0].Kind != tollgate.Reserved {
		t.Errorf("after the reservations: %+v, want clusters reserved, 0 available", sts)
	}
	// Every release gives its cluster back, once.
	for _, id := range granted {
		if err := lim.Release(ctx, id); err != nil {
			t.Errorf("Release(%s): %v", id, err)
		}
		if err := lim.Release(ctx, id); !errors.Is(err, tollgate.ErrLeaseNotFound) {
			t.Errorf("second Release(%s): %v, want ErrLeaseNotFound", id, err)
		}
	}
	if sts, err := lim.Available(ctx, "team", "emr"); err != nil || sts[0].Available != mpReserveBound {
		t.Errorf("after the releases: %+v, %v; want %d available", sts, err, mpReserveBound)
	}
}
