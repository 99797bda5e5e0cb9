package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/server"
)

// The keys of TestAPIKeys: each is its own name.
const (
	keyOps         = "ops"          // * admin
	keyService     = "checkout-svc" // default acquire
	keyAuditor     = "auditor"      // default read
	keyTenantAdmin = "tenant-admin" // tenant-x admin
	keyStored      = "stored-only"  // default acquire, without allow_limits
)

func newKeys(t *testing.T) *server.Keys {
	t.Helper()
	var b strings.Builder
	for _, k := range []struct{ key, ns, role, opts string }{
		{keyOps, "*", "admin", ""}, {keyService, "default", "acquire", "allow_limits"},
		{keyAuditor, "default", "read", "allow_limits"}, {keyTenantAdmin, "tenant-x", "admin", ""},
		{keyStored, "default", "acquire", ""},
	} {
		fmt.Fprintf(&b, "%s %s %s %s %s\n", server.HashKey(k.key), k.ns, k.role, k.key, k.opts)
	}
	keys, err := server.LoadKeys(strings.NewReader(b.String()))
	must(t, "LoadKeys", err)
	return keys
}

func TestAPIKeys(t *testing.T) {
	e := newEnv(t, server.WithKeys(newKeys(t)))
	ctx := context.Background()
	limits := client.WithLimits(tollgate.PerMinute("rpm", 100))
	ops := e.client(t, client.WithAPIKey(keyOps), client.WithPrincipal("mallory"))
	service := e.client(t, client.WithAPIKey(keyService))
	auditor := e.client(t, client.WithAPIKey(keyAuditor))
	_, err := ops.RegisterNamespace(ctx, "tenant-x")
	must(t, "RegisterNamespace with the * admin key", err)
	_, err = ops.CreateEntity(ctx, tollgate.Entity{ID: "org-1"})
	must(t, "CreateEntity with the admin key", err)

	t.Run("unauthenticated", func(t *testing.T) {
		for name, c := range map[string]*client.Client{
			"no key":      e.client(t),
			"unknown key": e.client(t, client.WithAPIKey("not-a-key")),
		} {
			_, err := c.GetEntity(ctx, "org-1")
			wantErr(t, name, err, api.ErrUnauthenticated)
			must(t, name+": Healthy needs no key", c.Healthy(ctx))
		}
	})
	t.Run("role", func(t *testing.T) {
		le, err := service.Acquire(ctx, "org-1", "gpt", tollgate.Consume{"rpm": 1}, limits)
		must(t, "Acquire with the acquire key", err)
		must(t, "Commit with the acquire key", le.Commit(ctx))
		// Without allow_limits the stored limits are authoritative: a
		// typed error names the field.
		_, err = e.client(t, client.WithAPIKey(keyStored)).Acquire(ctx, "org-1", "gpt", tollgate.Consume{"rpm": 1}, limits)
		var pe *api.PermissionError
		if !errors.As(err, &pe) || pe.Field != "limits" || !errors.Is(err, api.ErrPermissionDenied) {
			t.Errorf("Acquire with limits, without allow_limits: %v, want a *api.PermissionError of field limits", err)
		}
		_, err = service.CreateEntity(ctx, tollgate.Entity{ID: "org-2"})
		wantErr(t, "CreateEntity with the acquire key", err, api.ErrPermissionDenied)
		_, err = service.GetEntity(ctx, "org-1")
		wantErr(t, "GetEntity with the acquire key", err, api.ErrPermissionDenied)

		_, err = auditor.GetEntity(ctx, "org-1")
		must(t, "GetEntity with the read key", err)
		_, err = auditor.Available(ctx, "org-1", "gpt", limits)
		must(t, "Available with the read key", err)
		_, err = auditor.Acquire(ctx, "org-1", "gpt", tollgate.Consume{"rpm": 1}, limits)
		wantErr(t, "Acquire with the read key", err, api.ErrPermissionDenied)
		err = auditor.SetLimits(ctx, tollgate.SystemScope(), tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 1)}})
		wantErr(t, "SetLimits with the read key", err, api.ErrPermissionDenied)
	})
	t.Run("namespace", func(t *testing.T) {
		elsewhere := e.client(t, client.WithAPIKey(keyService), client.WithNamespace("tenant-x"))
		_, err := elsewhere.Acquire(ctx, "org-1", "gpt", tollgate.Consume{"rpm": 1}, limits)
		wantErr(t, "Acquire in another namespace than the key's", err, api.ErrPermissionDenied)

		tenantAdmin := e.client(t, client.WithAPIKey(keyTenantAdmin))
		_, err = tenantAdmin.CreateEntity(ctx, tollgate.Entity{ID: "org-x"})
		must(t, "CreateEntity with the tenant key, in its namespace by default", err)
		_, err = e.client(t, client.WithAPIKey(keyOps), client.WithNamespace("tenant-x")).GetEntity(ctx, "org-x")
		must(t, "GetEntity in tenant-x with the * key", err)
		_, err = tenantAdmin.ListNamespaces(ctx)
		wantErr(t, "ListNamespaces with a one-namespace admin key", err, api.ErrPermissionDenied)
	})
	t.Run("principal is the key name", func(t *testing.T) {
		evs, err := auditor.AuditEvents(ctx, "org-1", "", 0)
		must(t, "AuditEvents", err)
		if len(evs) != 1 || evs[0].Principal != keyOps {
			t.Errorf("events = %+v, want one by %q (the key's name, not the header)", evs, keyOps)
		}
	})
}
