package tollgate_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// Two operators read the same stored limits and both change them: with
// IfVersion the second change, made on a version that is no longer the
// stored one, is refused instead of silently replacing the first.
func ExampleIfVersion() {
	ctx := context.Background()
	adm, _ := tollgate.NewAdmin(memory.New())
	scope := tollgate.ResourceScope("search")
	adm.SetLimits(ctx, scope, tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 10)}})

	alice, _ := adm.GetLimits(ctx, scope)
	bob, _ := adm.GetLimits(ctx, scope)
	fmt.Println("both read version", alice.Version, bob.Version)

	err := adm.SetLimits(ctx, scope, tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 20)}}, tollgate.IfVersion(alice.Version))
	fmt.Println("alice:", err)
	err = adm.SetLimits(ctx, scope, tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 5)}}, tollgate.IfVersion(bob.Version))
	fmt.Println("bob refused:", errors.Is(err, tollgate.ErrPreconditionFailed))

	now, _ := adm.GetLimits(ctx, scope)
	fmt.Println(now.Limits[0], "at version", now.Version)
	// Output:
	// both read version 1 1
	// alice: <nil>
	// bob refused: true
	// rpm:20/min at version 2
}
