package tollgate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// A key is created with a secret shown once and a hash kept; it is found
// by that hash, listed by name without either, revoked, and each change
// is audited without the secret.
func TestKeysCreateLookupListRevoke(t *testing.T) {
	ctx := context.Background()
	adm, _ := newAdmin(t, memory.New())
	secret, k, err := adm.CreateKey(ctx, tollgate.KeySpec{Name: "checkout", Role: model.RoleAcquire,
		Entity: "org-1", ExpiresIn: time.Hour}, tollgate.WithPrincipal("ops"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, model.KeyPrefix) || k.Hash != model.HashKey(secret) || strings.Contains(k.Hash, secret) {
		t.Fatalf("secret %q, hash %q", secret, k.Hash)
	}
	if k.ExpiresAt.Sub(k.CreatedAt) != time.Hour || k.Namespace != "default" || k.Entity != "org-1" {
		t.Errorf("key = %+v", k)
	}
	got, err := adm.LookupKey(ctx, model.HashKey(secret))
	if err != nil || got.Name != "checkout" || got.Role != model.RoleAcquire || got.Entity != "org-1" || !got.ExpiresAt.Equal(k.ExpiresAt) {
		t.Fatalf("LookupKey = %+v, %v", got, err)
	}
	if _, _, err := adm.CreateKey(ctx, tollgate.KeySpec{Name: "checkout", Role: model.RoleRead}); !errors.Is(err, tollgate.ErrKeyExists) {
		t.Errorf("second key of the same name: %v, want ErrKeyExists", err)
	}
	if _, _, err := adm.CreateKey(ctx, tollgate.KeySpec{Name: "reader", Role: model.RoleRead}); err != nil {
		t.Fatal(err)
	}
	ks, err := adm.Keys(ctx, "", 10)
	if err != nil || len(ks) != 2 || ks[0].Name != "checkout" || ks[1].Name != "reader" {
		t.Fatalf("Keys = %+v, %v", ks, err)
	}
	if err := adm.RevokeKey(ctx, "checkout", tollgate.WithPrincipal("ops")); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.LookupKey(ctx, model.HashKey(secret)); !errors.Is(err, tollgate.ErrKeyNotFound) {
		t.Errorf("LookupKey after revocation: %v, want ErrKeyNotFound", err)
	}
	if err := adm.RevokeKey(ctx, "checkout"); !errors.Is(err, tollgate.ErrKeyNotFound) {
		t.Errorf("second revocation: %v, want ErrKeyNotFound", err)
	}
	evs, err := adm.AuditEvents(ctx, "", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, ev := range evs {
		actions = append(actions, ev.Action+"/"+ev.Details["name"]+"/"+ev.Principal)
		for _, v := range ev.Details {
			if strings.Contains(v, secret) || strings.Contains(v, k.Hash) {
				t.Errorf("event %+v holds the secret or its hash", ev)
			}
		}
	}
	want := "key.create/checkout/ops key.create/reader/ key.revoke/checkout/ops"
	if got := strings.Join(actions, " "); got != want {
		t.Errorf("audit = %s, want %s", got, want)
	}
}

func TestKeysValidation(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	adm, _ := newAdmin(t, s)
	cases := []struct {
		name  string
		spec  tollgate.KeySpec
		field string
	}{
		{"no name", tollgate.KeySpec{Role: model.RoleRead}, "name"},
		{"bad name", tollgate.KeySpec{Name: "a b", Role: model.RoleRead}, "name"},
		{"bad role", tollgate.KeySpec{Name: "a", Role: "root"}, "role"},
		{"bad entity", tollgate.KeySpec{Name: "a", Role: model.RoleRead, Entity: "a b"}, "entity"},
		{"negative expiry", tollgate.KeySpec{Name: "a", Role: model.RoleRead, ExpiresIn: -time.Second}, "expires_in"},
		{"expiry too far", tollgate.KeySpec{Name: "a", Role: model.RoleRead, ExpiresIn: model.MaxKeyExpiry + time.Hour}, "expires_in"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := adm.CreateKey(ctx, c.spec)
			wantValidation(t, err, c.field)
		})
	}
	// The namespace is the admin's: a bad one is refused when it is made
	// (TestNewAdminOptions), an unregistered one when it is used.
	unregistered, _ := newAdmin(t, s, tollgate.WithNamespace("unregistered"))
	if _, _, err := unregistered.CreateKey(ctx, tollgate.KeySpec{Name: "a", Role: model.RoleRead}); !errors.Is(err, tollgate.ErrNamespaceNotFound) {
		t.Errorf("key in an unregistered namespace: %v, want ErrNamespaceNotFound", err)
	}
	if _, err := adm.Keys(ctx, "", 0); err == nil {
		t.Error("Keys with limit 0: no error")
	}
	wantValidation(t, func() error { _, err := adm.LookupKey(ctx, "md5:abc"); return err }(), "hash")
}

// Within follows parents: an entity is within itself and its ancestors,
// not within its siblings or descendants; an unknown entity is within
// nothing but itself.
func TestWithin(t *testing.T) {
	ctx := context.Background()
	lim, adm, _ := newPair(t, memory.New())
	for _, e := range []tollgate.Entity{{ID: "org"}, {ID: "proj", ParentID: "org"}, {ID: "key", ParentID: "proj"}, {ID: "other", ParentID: "org"}} {
		if _, err := adm.CreateEntity(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		entity, root string
		want         bool
	}{
		{"key", "key", true}, {"key", "proj", true}, {"key", "org", true},
		{"proj", "key", false}, {"other", "proj", false}, {"unknown", "org", false}, {"unknown", "unknown", true},
	}
	for _, c := range cases {
		if got, err := lim.Within(ctx, c.entity, c.root); err != nil || got != c.want {
			t.Errorf("Within(%s, %s) = %v, %v; want %v", c.entity, c.root, got, err, c.want)
		}
	}
	// A move is seen at once: the cache is dropped with the change.
	if _, err := adm.UpdateEntity(ctx, tollgate.Entity{ID: "proj"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := lim.Within(ctx, "key", "org"); got {
		t.Error("key still within org after its project left it")
	}
}
