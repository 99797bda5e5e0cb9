package limitertest

import (
	"errors"
	"testing"

	"github.com/tollgate-rl/tollgate"
)

// Two operators read the same stored limits and entity, and both write
// them back on the version they read: the first change is in force at the
// limiter's next acquire, the second is refused with ErrPreconditionFailed
// and changes nothing the limiter enforces (nor the entity's cascade).
func testLimiterVersions(t *testing.T, e *env) {
	adm, lim := e.admin(), e.limiter()
	sc := tollgate.ResourceScope("api")
	if err := adm.SetLimits(e.ctx, sc, tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 2)}}); err != nil {
		t.Fatalf("SetLimits: %v", err)
	}
	read, err := adm.GetLimits(e.ctx, sc)
	if err != nil || read.Version != 1 {
		t.Fatalf("GetLimits = %+v, %v; want version 1", read, err)
	}
	e.wantAvailable(lim, "k", "api", "rpm", 2)
	first := tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 5)}}
	if err := adm.SetLimits(e.ctx, sc, first, tollgate.IfVersion(read.Version)); err != nil {
		t.Fatalf("SetLimits on the version read: %v", err)
	}
	second := tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 50)}}
	if err := adm.SetLimits(e.ctx, sc, second, tollgate.IfVersion(read.Version)); !errors.Is(err, tollgate.ErrPreconditionFailed) {
		t.Fatalf("SetLimits on a stale version = %v, want ErrPreconditionFailed", err)
	}
	if err := adm.DeleteLimits(e.ctx, sc, tollgate.IfVersion(read.Version)); !errors.Is(err, tollgate.ErrPreconditionFailed) {
		t.Fatalf("DeleteLimits on a stale version = %v, want ErrPreconditionFailed", err)
	}
	e.wantAvailable(lim, "k", "api", "rpm", 5)

	// An entity: the stale update would have cut the cascade.
	if _, err := adm.CreateEntity(e.ctx, tollgate.Entity{ID: "org"}); err != nil {
		t.Fatal(err)
	}
	key, err := adm.CreateEntity(e.ctx, tollgate.Entity{ID: "key", ParentID: "org", Cascade: true})
	if err != nil || key.Version != 1 {
		t.Fatalf("CreateEntity = %+v, %v; want version 1", key, err)
	}
	named, err := adm.UpdateEntity(e.ctx, tollgate.Entity{ID: "key", ParentID: "org", Cascade: true, Name: "checkout"}, tollgate.IfVersion(1))
	if err != nil || named.Version != 2 {
		t.Fatalf("UpdateEntity on version 1 = %+v, %v; want version 2", named, err)
	}
	_, err = adm.UpdateEntity(e.ctx, tollgate.Entity{ID: "key"}, tollgate.IfVersion(1))
	if !errors.Is(err, tollgate.ErrPreconditionFailed) {
		t.Fatalf("UpdateEntity on a stale version = %v, want ErrPreconditionFailed", err)
	}
	le := e.acquire(lim, "key", "api", tollgate.Consume{"rpm": 1})
	if s := status(t, le.Statuses(), "org", "rpm"); s.Available != 4 {
		t.Errorf("the parent's rpm after a cascading acquire: %+v, want 4 left (the cascade kept)", s)
	}
	e.commit(le)
}
