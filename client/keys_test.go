package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/server"
)

// An admin creates a key confined to an entity through the client; the
// secret works at once, within its scope only, and stops at once when
// revoked.
func TestStoredKeysThroughTheClient(t *testing.T) {
	e := newEnv(t, server.WithKeys(newKeys(t)))
	ctx := context.Background()
	ops := e.client(t, client.WithAPIKey(keyOps), client.WithPrincipal("ops"))
	for _, ent := range []tollgate.Entity{{ID: "org-1"}, {ID: "key-1", ParentID: "org-1"}, {ID: "org-2"}} {
		_, err := ops.CreateEntity(ctx, ent)
		must(t, "CreateEntity", err)
	}
	must(t, "SetLimits", ops.SetLimits(ctx, tollgate.ResourceScope("gpt"), tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 5)}}))

	secret, k, err := ops.CreateKey(ctx, model.KeySpec{Name: "org-1-gw", Role: model.RoleAcquire, Entity: "org-1", ExpiresIn: 1500 * time.Millisecond})
	must(t, "CreateKey", err)
	if k.Name != "org-1-gw" || k.Entity != "org-1" || k.Namespace != "default" || k.ExpiresAt.Sub(k.CreatedAt) != 2*time.Second {
		t.Errorf("created key = %+v (expiry rounded up to whole seconds)", k)
	}
	_, _, err = ops.CreateKey(ctx, model.KeySpec{Name: "org-1-gw", Role: model.RoleRead})
	wantErr(t, "CreateKey of a taken name", err, model.ErrKeyExists)

	gw := e.client(t, client.WithAPIKey(secret))
	_, err = gw.AcquireAndCommit(ctx, "key-1", "gpt", tollgate.Consume{"rpm": 1})
	must(t, "acquire for a descendant", err)
	_, err = gw.AcquireAndCommit(ctx, "org-2", "gpt", tollgate.Consume{"rpm": 1})
	var pe *api.PermissionError
	if !errors.As(err, &pe) || pe.Field != "entity" {
		t.Errorf("acquire beyond the scope: %v, want a *api.PermissionError of field entity", err)
	}

	ks, err := ops.Keys(ctx, "", 0)
	must(t, "Keys", err)
	if len(ks) != 1 || ks[0].Name != "org-1-gw" || ks[0].Hash != "" {
		t.Errorf("Keys = %+v, want the one key without its hash", ks)
	}
	must(t, "RevokeKey", ops.RevokeKey(ctx, "org-1-gw"))
	_, err = gw.AcquireAndCommit(ctx, "key-1", "gpt", tollgate.Consume{"rpm": 1})
	wantErr(t, "acquire with a revoked key", err, api.ErrUnauthenticated)
	wantErr(t, "RevokeKey again", ops.RevokeKey(ctx, "org-1-gw"), model.ErrKeyNotFound)

	// A reset refills what the acquire took, for the admin only.
	must(t, "Reset", ops.Reset(ctx, "key-1", "gpt", "test", nil))
	sts, err := ops.Available(ctx, "key-1", "gpt")
	must(t, "Available", err)
	if sts[0].Available != 5 {
		t.Errorf("after the reset: %+v, want 5 available", sts)
	}
	wantErr(t, "Reset with an acquire key", e.client(t, client.WithAPIKey(keyService)).Reset(ctx, "key-1", "gpt", "", nil), api.ErrPermissionDenied)
}

// An expired key is refused.
func TestExpiredStoredKey(t *testing.T) {
	e := newEnv(t, server.WithKeys(newKeys(t)))
	ctx := context.Background()
	ops := e.client(t, client.WithAPIKey(keyOps))
	secret, _, err := ops.CreateKey(ctx, model.KeySpec{Name: "short", Role: model.RoleRead, ExpiresIn: time.Minute})
	must(t, "CreateKey", err)
	reader := e.client(t, client.WithAPIKey(secret))
	_, err = reader.ListEntities(ctx, "", 0)
	must(t, "read with a fresh key", err)
	e.clk.Advance(time.Minute)
	_, err = reader.ListEntities(ctx, "", 0)
	wantErr(t, "read with an expired key", err, api.ErrUnauthenticated)
}
