package client_test

import (
	"context"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// lockOptimistically is optimistic locking written once against
// tollgate.Administrator: versions read back, a change on a stale version
// refused with ErrPreconditionFailed and nothing changed, a change on the
// version read made. It runs on an Admin and on a Client alike.
func lockOptimistically(t *testing.T, a tollgate.Administrator) {
	t.Helper()
	ctx := context.Background()
	org, err := a.CreateEntity(ctx, tollgate.Entity{ID: "org-1"})
	if err != nil || org.Version != 1 {
		t.Fatalf("CreateEntity = %+v, %v; want version 1", org, err)
	}
	up, err := a.UpdateEntity(ctx, tollgate.Entity{ID: "org-1", Name: "one"}, tollgate.IfVersion(1))
	if err != nil || up.Version != 2 {
		t.Fatalf("UpdateEntity on version 1 = %+v, %v; want version 2", up, err)
	}
	_, err = a.UpdateEntity(ctx, tollgate.Entity{ID: "org-1", Name: "stale"}, tollgate.IfVersion(1))
	wantErr(t, "UpdateEntity on a stale version", err, tollgate.ErrPreconditionFailed)
	wantErr(t, "DeleteEntity on a stale version", a.DeleteEntity(ctx, "org-1", tollgate.IfVersion(1)), tollgate.ErrPreconditionFailed)
	if got, err := a.GetEntity(ctx, "org-1"); err != nil || got.Name != "one" || got.Version != 2 {
		t.Errorf("GetEntity after refused changes = %+v, %v; want name one at version 2", got, err)
	}

	sc := tollgate.ResourceScope("api")
	cfg := tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 10)}}
	must(t, "SetLimits where none is", a.SetLimits(ctx, sc, cfg, tollgate.IfAbsent()))
	wantErr(t, "SetLimits IfAbsent again", a.SetLimits(ctx, sc, cfg, tollgate.IfAbsent()), tollgate.ErrPreconditionFailed)
	got, err := a.GetLimits(ctx, sc)
	if err != nil || got.Version != 1 {
		t.Fatalf("GetLimits = %+v, %v; want version 1", got, err)
	}
	must(t, "SetLimits on version 1", a.SetLimits(ctx, sc, cfg, tollgate.IfVersion(got.Version)))
	wantErr(t, "SetLimits on a stale version", a.SetLimits(ctx, sc, tollgate.Config{}, tollgate.IfVersion(1)), tollgate.ErrPreconditionFailed)
	wantErr(t, "DeleteLimits on a stale version", a.DeleteLimits(ctx, sc, tollgate.IfVersion(1)), tollgate.ErrPreconditionFailed)
	if got, err := a.GetLimits(ctx, sc); err != nil || got.Version != 2 || len(got.Limits) != 1 {
		t.Errorf("GetLimits after refused changes = %+v, %v; want rpm at version 2", got, err)
	}
	if cfgs, err := a.ListLimits(ctx, nil, 10); err != nil || len(cfgs) != 1 || cfgs[0].Config.Version != 2 {
		t.Errorf("ListLimits = %+v, %v; want version 2", cfgs, err)
	}
	must(t, "DeleteLimits on version 2", a.DeleteLimits(ctx, sc, tollgate.IfVersion(2)))
	must(t, "DeleteEntity on version 2", a.DeleteEntity(ctx, "org-1", tollgate.IfVersion(2)))
}

func TestOptimisticLockingOnLibraryAndClient(t *testing.T) {
	t.Run("library", func(t *testing.T) {
		adm, err := tollgate.NewAdmin(memory.New(), tollgate.WithClock(clock.NewFake(epoch)))
		must(t, "NewAdmin", err)
		lockOptimistically(t, adm)
	})
	t.Run("client", func(t *testing.T) {
		lockOptimistically(t, newEnv(t).client(t))
	})
}
