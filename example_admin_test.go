package tollgate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// A service acquires through a Limiter (New), the data plane; an operator
// or a tool changes what it enforces through an Admin (NewAdmin), the
// control plane. One option list makes both, and a change watch they
// share puts each change of the admin in force in the limiter at its next
// call, even over a store that other processes share.
func ExampleAdmin() {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	st := memory.New()
	w, _ := tollgate.NewChangeWatch(st, tollgate.DefaultRefreshInterval)
	opts := []tollgate.Option{tollgate.WithClock(clk), tollgate.WithChangeWatch(w)}
	lim, _ := tollgate.New(st, opts...)
	adm, _ := tollgate.NewAdmin(st, opts...)

	rpm := func(n int64) tollgate.Config {
		return tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", n)}}
	}
	adm.SetLimits(ctx, tollgate.ResourceScope("search"), rpm(2), tollgate.WithPrincipal("ops"))
	for i := 1; i <= 3; i++ {
		_, err := lim.AcquireAndCommit(ctx, "key-1", "search", tollgate.Consume{"rpm": 1})
		fmt.Printf("call %d: denied %v\n", i, errors.Is(err, tollgate.ErrRateLimited))
	}

	adm.SetLimits(ctx, tollgate.ResourceScope("search"), rpm(10), tollgate.WithPrincipal("ops"))
	sts, _ := lim.Available(ctx, "key-1", "search")
	fmt.Println("capacity now:", sts[0].Capacity)

	evs, _ := adm.AuditEvents(ctx, "", "", 10)
	for _, ev := range evs {
		fmt.Println(ev.Action, ev.Resource, ev.Details["limits"], "by", ev.Principal)
	}
	// Output:
	// call 1: denied false
	// call 2: denied false
	// call 3: denied true
	// capacity now: 10
	// config.set search rpm:2/min by ops
	// config.set search rpm:10/min by ops
}

// A platform gives each tenant a namespace of a shared store: an Admin
// registers it, a Limiter works in it, and a soft delete makes it refuse
// work until it is recovered or purged.
func ExampleAdmin_RegisterNamespace() {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	st := memory.New()
	w, _ := tollgate.NewChangeWatch(st, tollgate.DefaultRefreshInterval)
	opts := []tollgate.Option{tollgate.WithNamespace("tenant-a"), tollgate.WithClock(clk), tollgate.WithChangeWatch(w)}
	adm, _ := tollgate.NewAdmin(st, opts...)

	if _, err := adm.RegisterNamespace(ctx, "tenant-a"); err != nil {
		fmt.Println(err)
		return
	}
	_, err := adm.RegisterNamespace(ctx, "tenant-a")
	fmt.Println("twice:", errors.Is(err, tollgate.ErrNamespaceExists))

	lim, _ := tollgate.New(st, opts...)
	limits := tollgate.WithLimits(tollgate.PerMinute("rpm", 100))
	acquire := func() error {
		_, err := lim.AcquireAndCommit(ctx, "key-1", "search", tollgate.Consume{"rpm": 1}, limits)
		return err
	}
	fmt.Println("acquire:", acquire())

	// The limiter follows the admin's change watch: it sees each change
	// at its next call.
	_ = adm.DeleteNamespace(ctx, "tenant-a")
	fmt.Println("deleted:", errors.Is(acquire(), tollgate.ErrNamespaceDeleted))

	_ = adm.RecoverNamespace(ctx, "tenant-a")
	fmt.Println("recovered:", acquire())

	ns, _ := adm.ListNamespaces(ctx)
	for _, n := range ns {
		fmt.Println(n.Name, n.CreatedAt.Format(time.Kitchen), n.Deleted())
	}
	// Output:
	// twice: true
	// acquire: <nil>
	// deleted: true
	// recovered: <nil>
	// tenant-a 9:00AM false
}

// An API key of a server is created in the admin's namespace; its secret
// is shown once, and the store keeps only its hash, by which a server
// finds it.
func ExampleAdmin_CreateKey() {
	ctx := context.Background()
	adm, _ := tollgate.NewAdmin(memory.New())

	secret, k, err := adm.CreateKey(ctx, tollgate.KeySpec{Name: "checkout", Role: tollgate.RoleAcquire, Entity: "org-1"},
		tollgate.WithPrincipal("ops"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("secret:", strings.HasPrefix(secret, model.KeyPrefix), "key:", k.Name, k.Namespace, k.Role)

	found, _ := adm.LookupKey(ctx, model.HashKey(secret))
	fmt.Println("found by its hash:", found.Name, found.Entity)

	_ = adm.RevokeKey(ctx, "checkout", tollgate.WithPrincipal("ops"))
	_, err = adm.LookupKey(ctx, model.HashKey(secret))
	fmt.Println("revoked:", errors.Is(err, tollgate.ErrKeyNotFound))
	keys, _ := adm.Keys(ctx, "", 10)
	fmt.Println("keys left:", len(keys))
	// Output:
	// secret: true key: checkout default acquire
	// found by its hash: checkout org-1
	// revoked: true
	// keys left: 0
}
