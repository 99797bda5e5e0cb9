package tollgate_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// reservationBound is the capacity the concurrency tests contend for.
const reservationBound = 10

// newBoundedReservations returns a limiter and an admin whose resource
// "emr" allows reservationBound clusters.
func newBoundedReservations(t *testing.T) (*tollgate.Limiter, *tollgate.Admin) {
	t.Helper()
	lim, adm, _ := newPair(t, memory.New())
	cfg := tollgate.Config{Limits: []tollgate.Limit{tollgate.ReservedLimit("clusters", reservationBound)}}
	if err := adm.SetLimits(context.Background(), tollgate.ResourceScope("emr"), cfg); err != nil {
		t.Fatal(err)
	}
	return lim, adm
}

// 32 goroutines reserve distinct ids against a capacity of 10 and nobody
// releases: exactly 10 are granted, and the 10 listed are those.
func TestReservationsConcurrentBound(t *testing.T) {
	const workers = 32
	ctx := context.Background()
	lim, adm := newBoundedReservations(t)
	var mu sync.Mutex
	var granted []string
	var denied atomic.Int64
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			id := fmt.Sprintf("j-%02d", i)
			_, err := lim.Acquire(ctx, "team-a", "emr", tollgate.Consume{"clusters": 1}, tollgate.WithReservation(id))
			switch {
			case err == nil:
				mu.Lock()
				granted = append(granted, id)
				mu.Unlock()
			case errors.Is(err, tollgate.ErrRateLimited):
				denied.Add(1)
			default:
				t.Errorf("reserve %s: %v", id, err)
			}
		})
	}
	wg.Wait()
	if len(granted) != reservationBound || denied.Load() != workers-reservationBound {
		t.Fatalf("%d granted, %d denied; want %d and %d", len(granted), denied.Load(), reservationBound, workers-reservationBound)
	}
	slices.Sort(granted)
	if listed := reservedIDs(t, adm, "team-a", "emr", 3); !slices.Equal(listed, granted) {
		t.Errorf("listed %v, want the granted %v", listed, granted)
	}
}

// 32 goroutines reserve and release distinct ids, round after round: the
// reservations held, counted from grant to release, never exceed 10, and
// every cluster is back at the end.
func TestReservationsConcurrentChurn(t *testing.T) {
	const workers, rounds = 32, 25
	ctx := context.Background()
	lim, adm := newBoundedReservations(t)
	var held, most, grants atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				id := fmt.Sprintf("w%02d-r%02d", w, r)
				_, err := lim.Acquire(ctx, "team-a", "emr", tollgate.Consume{"clusters": 1}, tollgate.WithReservation(id))
				if errors.Is(err, tollgate.ErrRateLimited) {
					continue
				}
				if err != nil {
					t.Errorf("reserve %s: %v", id, err)
					return
				}
				grants.Add(1)
				// Counted after the grant and uncounted before the
				// release: never more than the store holds.
				n := held.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				// Hold it a while, as a store call's time: others contend.
				if res, err := adm.Reservation(ctx, id); err != nil || res.Entity != "team-a" {
					t.Errorf("Reservation(%s) while held = %+v, %v", id, res, err)
				}
				runtime.Gosched()
				held.Add(-1)
				if err := lim.Release(ctx, id); err != nil {
					t.Errorf("release %s: %v", id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if most.Load() > reservationBound {
		t.Errorf("%d reservations held at once, bound %d", most.Load(), reservationBound)
	}
	if grants.Load() == 0 {
		t.Error("nothing was granted")
	}
	if got := availableOf(t, lim, "team-a", "emr", "clusters"); got != reservationBound {
		t.Errorf("%d clusters free at the end, want %d", got, reservationBound)
	}
	if listed := reservedIDs(t, adm, "team-a", "emr", 10); len(listed) != 0 {
		t.Errorf("reservations left: %v", listed)
	}
	t.Logf("%d grants, at most %d held", grants.Load(), most.Load())
}

// One id reserved at once by many goroutines: of one entity, all get the
// one reservation and one cluster is taken; of several entities, one wins
// and the others conflict.
func TestReservationsConcurrentSameID(t *testing.T) {
	const workers = 16
	cases := []struct {
		name     string
		entity   func(i int) string
		winners  int
		conflict int
	}{
		{"one entity", func(int) string { return "team-a" }, workers, 0},
		{"every goroutine its entity", func(i int) string { return fmt.Sprintf("team-%02d", i) }, 1, workers - 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			lim, _ := newBoundedReservations(t)
			var ok, conflict atomic.Int64
			var winner atomic.Value
			var wg sync.WaitGroup
			for i := range workers {
				wg.Go(func() {
					le, err := lim.Acquire(ctx, c.entity(i), "emr", tollgate.Consume{"clusters": 1}, tollgate.WithReservation("j-shared"))
					switch {
					case err == nil:
						ok.Add(1)
						winner.Store(le.Entity())
						if le.ID() != "r:j-shared" {
							t.Errorf("lease ID %q", le.ID())
						}
					case errors.Is(err, tollgate.ErrReservationConflict):
						conflict.Add(1)
					default:
						t.Errorf("reserve: %v", err)
					}
				})
			}
			wg.Wait()
			if ok.Load() != int64(c.winners) || conflict.Load() != int64(c.conflict) {
				t.Fatalf("%d granted, %d conflicts; want %d and %d", ok.Load(), conflict.Load(), c.winners, c.conflict)
			}
			e := winner.Load().(string)
			if got := availableOf(t, lim, e, "emr", "clusters"); got != reservationBound-1 {
				t.Errorf("%s has %d clusters free, want %d: one reservation", e, got, reservationBound-1)
			}
		})
	}
}
