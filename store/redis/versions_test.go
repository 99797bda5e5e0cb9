package redis_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// An entity or a config stored before versions were kept (JSON without
// "version") reads as version 1, and a change on version 1 replaces it
// at version 2, once: the same precondition then fails.
func TestLegacyRecordsAtVersionOne(t *testing.T) {
	s, raw, ns, ctx := newStore(t), rawClient(t, serverURL), randomID(t), context.Background()
	sc := model.ResourceScope("api")
	ev := func(action string) model.AuditEvent {
		return model.AuditEvent{ID: randomID(t), Action: action, Entity: "org"}
	}
	if err := s.CreateEntity(ctx, ns, model.Entity{ID: "org"}, ev(model.ActionEntityCreate)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutConfig(ctx, ns, sc, model.Config{}, ev(model.ActionConfigSet)); err != nil {
		t.Fatal(err)
	}
	// Take the versions out, as an older tollgate wrote them.
	for _, pattern := range []string{"tg:{" + ns + "}:e:org", "tg:{" + ns + "}:c:*api"} {
		keys := keysMatching(t, raw, pattern)
		if len(keys) != 1 {
			t.Fatalf("keys %s: %v", pattern, keys)
		}
		js, err := raw.Do(ctx, raw.B().Get().Key(keys[0]).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		old := strings.NewReplacer(`"version":1,`, "", `,"version":1`, "").Replace(js)
		if old == js {
			t.Fatalf("%s has no version: %s", keys[0], js)
		}
		if err := raw.Do(ctx, raw.B().Set().Key(keys[0]).Value(old).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if e, err := s.GetEntity(ctx, ns, "org"); err != nil || e.Version != 1 {
		t.Fatalf("legacy entity: %+v, %v; want version 1", e, err)
	}
	for i, want := range []error{nil, model.ErrPreconditionFailed} {
		err := s.UpdateEntity(ctx, ns, model.Entity{ID: "org", Name: "n"}, ev(model.ActionEntityUpdate), store.IfVersion(1))
		if !errors.Is(err, want) {
			t.Errorf("update %d of a legacy entity on version 1: %v, want %v", i, err, want)
		}
		err = s.PutConfig(ctx, ns, sc, model.Config{}, ev(model.ActionConfigSet), store.IfVersion(1))
		if !errors.Is(err, want) {
			t.Errorf("put %d of a legacy config on version 1: %v, want %v", i, err, want)
		}
	}
	if cfgs, err := s.GetConfigs(ctx, ns, []model.Scope{sc}); err != nil || cfgs[0] == nil || cfgs[0].Version != 2 {
		t.Errorf("replaced legacy config: %v, %v; want version 2", cfgs, err)
	}
}
