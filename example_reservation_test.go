package tollgate_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// A team may run 2 EMR clusters at once. Each cluster is reserved by its
// id when it is launched, and released by that id alone when it
// terminates, by whichever process hears of it.
func ExampleLimiter_Release() {
	ctx := context.Background()
	st := memory.New()
	lim, _ := tollgate.New(st)
	adm, _ := tollgate.NewAdmin(st)
	adm.SetLimits(ctx, tollgate.ResourceScope("emr"), tollgate.Config{Limits: []tollgate.Limit{
		tollgate.ReservedLimit("clusters", 2), tollgate.PerMinute("launches", 10),
	}})
	launch := tollgate.Consume{"clusters": 1, "launches": 1}

	for _, id := range []string{"j-2AXXXXXXGAPLF", "j-3BYYYYYYQ7R2M", "j-4CZZZZZZK9T1N"} {
		_, err := lim.Acquire(ctx, "team-a", "emr", launch, tollgate.WithReservation(id))
		fmt.Printf("reserve %s: denied %v\n", id, errors.Is(err, tollgate.ErrRateLimited))
	}
	rs, _, _ := adm.Reservations(ctx, "team-a", "emr", "", 10)
	for _, r := range rs {
		fmt.Println("held:", r.ID)
	}

	// The first cluster terminated: release it by its id.
	fmt.Println("release:", lim.Release(ctx, "j-2AXXXXXXGAPLF"))
	_, err := lim.Acquire(ctx, "team-a", "emr", launch, tollgate.WithReservation("j-4CZZZZZZK9T1N"))
	fmt.Println("reserve j-4CZZZZZZK9T1N again:", err)
	err = lim.Release(ctx, "j-2AXXXXXXGAPLF") // the event came twice
	fmt.Println("release again, not found:", errors.Is(err, tollgate.ErrLeaseNotFound))
	// Output:
	// reserve j-2AXXXXXXGAPLF: denied false
	// reserve j-3BYYYYYYQ7R2M: denied false
	// reserve j-4CZZZZZZK9T1N: denied true
	// held: j-2AXXXXXXGAPLF
	// held: j-3BYYYYYYQ7R2M
	// release: <nil>
	// reserve j-4CZZZZZZK9T1N again: <nil>
	// release again, not found: true
}

// Reserve takes a token of every reserved limit in effect when it is told
// to take none, and reports the reservation as stored; the same id asked
// again by its holder is the same reservation.
func ExampleLimiter_Reserve() {
	ctx := context.Background()
	st := memory.New()
	adm, _ := tollgate.NewAdmin(st)
	lim, _ := tollgate.New(st, tollgate.WithHolder("launcher-1"))
	adm.SetLimits(ctx, tollgate.ResourceScope("emr"), tollgate.Config{Limits: []tollgate.Limit{
		tollgate.ReservedLimit("clusters", 2), tollgate.PerMinute("launches", 10),
	}})

	g, err := lim.Reserve(ctx, "team-a", "emr", "j-2AXXXXXXGAPLF", nil,
		tollgate.WithAudit(tollgate.WithPrincipal("scheduler")))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("new:", g.New, "consumed:", g.Consumed, "holder:", g.Holder)
	g, _ = lim.Reserve(ctx, "team-a", "emr", "j-2AXXXXXXGAPLF", nil)
	fmt.Println("again, new:", g.New)
	_, err = lim.Reserve(ctx, "team-b", "emr", "j-2AXXXXXXGAPLF", nil)
	fmt.Println("by team-b:", errors.Is(err, tollgate.ErrReservationConflict))

	r, _ := adm.Reservation(ctx, "j-2AXXXXXXGAPLF")
	fmt.Println("held by", r.Entity, "on", r.Holder)
	// Output:
	// new: true consumed: map[clusters:1] holder: launcher-1
	// again, new: false
	// by team-b: true
	// held by team-a on launcher-1
}
