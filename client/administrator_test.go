package client_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/client"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/server"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// administer is code written once against tollgate.Administrator, run
// below on an Admin (in process) and on a Client (through a server): the
// same names, arguments, write options and typed errors. principal is who
// the audit log says made the changes: the calls' WithPrincipal, or the
// name of the server's API key.
func administer(t *testing.T, a tollgate.Administrator, principal string) {
	t.Helper()
	ctx := context.Background()
	who := tollgate.WithPrincipal("alice")

	// Namespaces, by name.
	n, err := a.RegisterNamespace(ctx, "tenant-x")
	if err != nil || n.Name != "tenant-x" || n.ID == "" || n.Deleted() {
		t.Fatalf("RegisterNamespace = %+v, %v", n, err)
	}
	_, err = a.RegisterNamespace(ctx, "tenant-x")
	wantErr(t, "RegisterNamespace again", err, tollgate.ErrNamespaceExists)
	if got, err := a.GetNamespace(ctx, "tenant-x"); err != nil || got.ID != n.ID {
		t.Errorf("GetNamespace = %+v, %v; want id %s", got, err, n.ID)
	}
	nss, err := a.ListNamespaces(ctx)
	must(t, "ListNamespaces", err)
	if !slices.ContainsFunc(nss, func(x tollgate.Namespace) bool { return x.Name == "tenant-x" }) {
		t.Errorf("ListNamespaces = %+v, want tenant-x", nss)
	}
	must(t, "DeleteNamespace", a.DeleteNamespace(ctx, "tenant-x"))
	if got, err := a.GetNamespace(ctx, "tenant-x"); err != nil || !got.Deleted() {
		t.Errorf("GetNamespace after delete = %+v, %v; want it deleted", got, err)
	}
	must(t, "RecoverNamespace", a.RecoverNamespace(ctx, "tenant-x"))
	wantErr(t, "PurgeNamespace of a live namespace", a.PurgeNamespace(ctx, "tenant-x", nil), tollgate.ErrInvalid)
	must(t, "DeleteNamespace", a.DeleteNamespace(ctx, "tenant-x"))
	told := false
	must(t, "PurgeNamespace", a.PurgeNamespace(ctx, "tenant-x", func(int) { told = true }))
	if !told {
		t.Error("PurgeNamespace never called progress")
	}
	_, err = a.GetNamespace(ctx, "tenant-x")
	wantErr(t, "GetNamespace after purge", err, tollgate.ErrNamespaceNotFound)

	// Entities.
	org, err := a.CreateEntity(ctx, tollgate.Entity{ID: "org-1", Name: "Acme"}, who)
	if err != nil || org.CreatedAt.IsZero() {
		t.Fatalf("CreateEntity = %+v, %v; want a creation time", org, err)
	}
	_, err = a.CreateEntity(ctx, tollgate.Entity{ID: "key-1", ParentID: "org-1", Cascade: true}, who)
	must(t, "CreateEntity key-1", err)
	_, err = a.CreateEntity(ctx, tollgate.Entity{ID: "org-1"}, who)
	wantErr(t, "CreateEntity of a taken id", err, tollgate.ErrEntityExists)
	_, err = a.CreateEntity(ctx, tollgate.Entity{ID: "orphan", ParentID: "nobody"}, who)
	wantErr(t, "CreateEntity under a missing parent", err, tollgate.ErrEntityNotFound)
	var ve *tollgate.ValidationError
	if _, err := a.CreateEntity(ctx, tollgate.Entity{ID: "bad id!"}, who); !errors.As(err, &ve) || ve.Field != "entity" {
		t.Errorf("CreateEntity of a bad id = %v, want a ValidationError on entity", err)
	}
	if e, err := a.GetEntity(ctx, "key-1"); err != nil || e.ParentID != "org-1" || !e.Cascade {
		t.Errorf("GetEntity = %+v, %v", e, err)
	}
	if kids, err := a.Children(ctx, "org-1"); err != nil || len(kids) != 1 || kids[0].ID != "key-1" {
		t.Errorf("Children = %+v, %v; want key-1", kids, err)
	}
	if es, err := a.ListEntities(ctx, "", 10); err != nil || len(es) != 2 || es[0].ID != "key-1" || es[1].ID != "org-1" {
		t.Errorf("ListEntities = %+v, %v; want key-1, org-1", es, err)
	}
	if e, err := a.UpdateEntity(ctx, tollgate.Entity{ID: "key-1", Name: "checkout", ParentID: "org-1"}, who); err != nil || e.Name != "checkout" || e.Cascade {
		t.Errorf("UpdateEntity = %+v, %v; want the new name, cascade off", e, err)
	}

	// Stored limits.
	rpm := tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 100)}}
	must(t, "SetLimits resource", a.SetLimits(ctx, tollgate.ResourceScope("api"), rpm, who))
	must(t, "SetLimits entity", a.SetLimits(ctx, tollgate.EntityScope("org-1", "api"), tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 10)}}, who))
	if cfg, err := a.GetLimits(ctx, tollgate.ResourceScope("api")); err != nil || len(cfg.Limits) != 1 || cfg.Limits[0] != rpm.Limits[0] {
		t.Errorf("GetLimits = %+v, %v; want %+v", cfg, err, rpm)
	}
	if cfgs, err := a.ListLimits(ctx, nil, 10); err != nil || len(cfgs) != 2 || cfgs[0].Scope != tollgate.ResourceScope("api") {
		t.Errorf("ListLimits = %+v, %v; want the resource's, then the entity's", cfgs, err)
	}
	must(t, "DeleteLimits", a.DeleteLimits(ctx, tollgate.EntityScope("org-1", "api"), who))
	_, err = a.GetLimits(ctx, tollgate.EntityScope("org-1", "api"))
	wantErr(t, "GetLimits after delete", err, tollgate.ErrNotFound)

	// Who did it.
	evs, err := a.AuditEvents(ctx, "org-1", "", 10)
	must(t, "AuditEvents", err)
	if len(evs) < 3 || evs[0].Action != model.ActionEntityCreate || evs[0].Principal != principal {
		t.Errorf("AuditEvents = %+v, want org-1's creation first, by %s", evs, principal)
	}
	// The whole log by time, every entity's and the system's, paged.
	all, err := a.AuditLog(ctx, tollgate.AuditQuery{Limit: 1000})
	must(t, "AuditLog", err)
	if len(all) <= len(evs) || !slices.IsSortedFunc(all, func(x, y tollgate.AuditEvent) int { return strings.Compare(x.ID, y.ID) }) {
		t.Errorf("AuditLog = %d events, want more than org-1's %d, in id order", len(all), len(evs))
	}
	var paged []tollgate.AuditEvent
	for q := (tollgate.AuditQuery{Limit: 2}); len(paged) <= len(all); {
		page, err := a.AuditLog(ctx, q)
		must(t, "AuditLog page", err)
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		q.After = page[len(page)-1].ID
	}
	if len(paged) != len(all) || paged[len(paged)-1].ID != all[len(all)-1].ID {
		t.Errorf("AuditLog paged by 2 = %d events, want %d", len(paged), len(all))
	}
	_, err = a.AuditLog(ctx, tollgate.AuditQuery{After: "not-an-id"})
	wantErr(t, "AuditLog with a bad cursor", err, tollgate.ErrInvalid)
	wantErr(t, "SetAuditRetention of 1m", a.SetAuditRetention(ctx, "default", time.Minute), tollgate.ErrInvalid)
	wantErr(t, "SetAuditRetention of a missing namespace", a.SetAuditRetention(ctx, "nope", time.Hour), tollgate.ErrNamespaceNotFound)
	must(t, "SetAuditRetention", a.SetAuditRetention(ctx, "default", 48*time.Hour))
	if n, err := a.GetNamespace(ctx, "default"); err != nil || n.AuditRetention != 48*time.Hour {
		t.Errorf("GetNamespace after SetAuditRetention = %+v, %v", n, err)
	}
	must(t, "SetAuditRetention forever", a.SetAuditRetention(ctx, "default", 0))

	// Keys of the namespace.
	secret, k, err := a.CreateKey(ctx, tollgate.KeySpec{Name: "svc", Role: model.RoleAcquire}, who)
	if err != nil || secret == "" || k.Name != "svc" || k.Role != model.RoleAcquire {
		t.Fatalf("CreateKey = %q, %+v, %v", secret, k, err)
	}
	if ks, err := a.Keys(ctx, "", 10); err != nil || !slices.ContainsFunc(ks, func(k tollgate.Key) bool { return k.Name == "svc" }) {
		t.Errorf("Keys = %+v, %v; want svc", ks, err)
	}
	must(t, "RevokeKey", a.RevokeKey(ctx, "svc", who))
	wantErr(t, "RevokeKey again", a.RevokeKey(ctx, "svc", who), tollgate.ErrKeyNotFound)

	// What limits hold: nothing yet.
	if ls, next, err := a.Leases(ctx, "", "", "", 10); err != nil || len(ls) != 0 || next != "" {
		t.Errorf("Leases = %+v, %q, %v; want none", ls, next, err)
	}
	if rs, next, err := a.Reservations(ctx, "org-1", "", "", 10); err != nil || len(rs) != 0 || next != "" {
		t.Errorf("Reservations = %+v, %q, %v; want none", rs, next, err)
	}
	_, err = a.Reservation(ctx, "j-1")
	wantErr(t, "Reservation of an id never reserved", err, tollgate.ErrLeaseNotFound)
	if c, err := a.Capacity(ctx, "api"); err != nil || c.Resource != "api" || c.Entities != 0 {
		t.Errorf("Capacity = %+v, %v; want no bucket yet", c, err)
	}
	must(t, "Reset of a bucket that does not exist", a.Reset(ctx, "org-1", "api", "undo", nil, who))

	must(t, "DeleteEntity", a.DeleteEntity(ctx, "key-1", who))
	_, err = a.GetEntity(ctx, "key-1")
	wantErr(t, "GetEntity after delete", err, tollgate.ErrEntityNotFound)
}

// TestOneControlPlaneOnLibraryAndClient runs administer on both sides.
func TestOneControlPlaneOnLibraryAndClient(t *testing.T) {
	t.Run("library", func(t *testing.T) {
		adm, err := tollgate.NewAdmin(memory.New(), tollgate.WithClock(clock.NewFake(epoch)))
		must(t, "NewAdmin", err)
		administer(t, adm, "alice")
	})
	t.Run("client", func(t *testing.T) {
		// An admin key of every namespace: a key stored by CreateKey
		// turns authentication on, which a keyless client would not pass.
		e := newEnv(t, server.WithKeys(newKeys(t)))
		administer(t, e.client(t, client.WithAPIKey(keyOps)), keyOps)
	})
}

// TestClientWriteOptions: a call's principal replaces the client's, as
// the library records a call's; an event trigger, which the HTTP API
// records on releases only, is refused elsewhere rather than dropped.
func TestClientWriteOptions(t *testing.T) {
	ctx := context.Background()
	c := newEnv(t).client(t, client.WithPrincipal("bob"))
	_, err := c.CreateEntity(ctx, tollgate.Entity{ID: "org-1"}, tollgate.WithPrincipal("alice"))
	must(t, "CreateEntity", err)
	_, err = c.CreateEntity(ctx, tollgate.Entity{ID: "org-2"})
	must(t, "CreateEntity", err)
	for id, want := range map[string]string{"org-1": "alice", "org-2": "bob"} {
		evs, err := c.AuditEvents(ctx, id, "", 10)
		if err != nil || len(evs) != 1 || evs[0].Principal != want {
			t.Errorf("%s: AuditEvents = %+v, %v; want one by %s", id, evs, err, want)
		}
	}
	var ve *tollgate.ValidationError
	err = c.SetLimits(ctx, tollgate.SystemScope(), tollgate.Config{}, tollgate.WithTrigger(tollgate.EventTrigger{Rule: "r"}))
	if !errors.As(err, &ve) || ve.Field != "trigger" {
		t.Errorf("SetLimits with a trigger = %v, want a ValidationError on trigger", err)
	}
	long := tollgate.WithPrincipal(string(make([]byte, model.MaxPrincipalLen+1)))
	if err := c.DeleteEntity(ctx, "org-2", long); !errors.As(err, &ve) || ve.Field != "principal" {
		t.Errorf("DeleteEntity with a principal too long = %v, want a ValidationError on principal", err)
	}
	if _, err := c.GetEntity(ctx, "org-2"); err != nil {
		t.Errorf("the refused delete deleted: %v", err)
	}
}
