package client_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/client"
)

func TestEntities(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	ctx := context.Background()

	org := tollgate.Entity{ID: "org-acme", Name: "Acme", Metadata: map[string]string{"plan": "gold"}}
	created, err := c.CreateEntity(ctx, org)
	must(t, "CreateEntity org", err)
	if !created.CreatedAt.Equal(epoch) {
		t.Errorf("CreatedAt = %v, want %v (the server's clock)", created.CreatedAt, epoch)
	}
	got, err := c.GetEntity(ctx, "org-acme")
	must(t, "GetEntity", err)
	if got.ID != org.ID || got.Name != org.Name || !reflect.DeepEqual(got.Metadata, org.Metadata) || !got.CreatedAt.Equal(epoch) {
		t.Errorf("GetEntity = %+v, want %+v created at %v", got, org, epoch)
	}
	_, err = c.CreateEntity(ctx, org)
	wantErr(t, "CreateEntity twice", err, tollgate.ErrEntityExists)

	for _, id := range []string{"key-2", "key-1"} {
		_, err := c.CreateEntity(ctx, tollgate.Entity{ID: id, ParentID: "org-acme", Cascade: true})
		must(t, "CreateEntity "+id, err)
	}
	_, err = c.CreateEntity(ctx, tollgate.Entity{ID: "orphan", ParentID: "no-such-org"})
	wantErr(t, "CreateEntity with a missing parent", err, tollgate.ErrEntityNotFound)
	_, err = c.CreateEntity(ctx, tollgate.Entity{ID: "bad id!"})
	var ve *tollgate.ValidationError
	if !errors.As(err, &ve) || ve.Field == "" || ve.Reason == "" {
		t.Errorf("CreateEntity with a bad id: err = %v (%T), want a *ValidationError naming field and reason", err, err)
	}

	kids, err := c.Children(ctx, "org-acme")
	must(t, "Children", err)
	if ids := entityIDs(kids); !reflect.DeepEqual(ids, []string{"key-1", "key-2"}) {
		t.Errorf("Children = %v, want [key-1 key-2]", ids)
	}
	if !kids[0].Cascade || kids[0].ParentID != "org-acme" {
		t.Errorf("child = %+v, want cascade to org-acme", kids[0])
	}

	must(t, "DeleteEntity", c.DeleteEntity(ctx, "key-2"))
	_, err = c.GetEntity(ctx, "key-2")
	wantErr(t, "GetEntity after delete", err, tollgate.ErrEntityNotFound)
	wantErr(t, "DeleteEntity twice", c.DeleteEntity(ctx, "key-2"), tollgate.ErrEntityNotFound)
	kids, err = c.Children(ctx, "org-acme")
	must(t, "Children", err)
	if ids := entityIDs(kids); !reflect.DeepEqual(ids, []string{"key-1"}) {
		t.Errorf("Children after delete = %v, want [key-1]", ids)
	}
}

func entityIDs(es []tollgate.Entity) []string {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	return ids
}

func TestConfigRoundTrip(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	ctx := context.Background()
	_, err := c.CreateEntity(ctx, tollgate.Entity{ID: "org-1"})
	must(t, "CreateEntity", err)

	limits := func(texts ...string) []tollgate.Limit {
		ls, err := tollgate.ParseLimits(texts)
		must(t, "ParseLimits", err)
		return ls
	}
	tests := []struct {
		name  string
		scope tollgate.Scope
		cfg   tollgate.Config
	}{
		{"system", tollgate.SystemScope(), tollgate.Config{Limits: limits("rpm:1000"), OnUnavailable: tollgate.Allow}},
		{"resource with a slash", tollgate.ResourceScope("openai/gpt-4o"), tollgate.Config{Limits: limits("rpm:100", "tpm:10000:15000"), AlertAt: []float64{0.8, 1}}},
		{"entity default", tollgate.EntityScope("org-1", ""), tollgate.Config{Limits: limits("tpm:50000/hour")}},
		{"entity and resource", tollgate.EntityScope("org-1", "openai/gpt-4o"), tollgate.Config{Limits: limits("rps:5/sec", "inflight:3/concurrent")}},
	}
	for i, tt := range tests {
		must(t, "SetLimits "+tt.name, c.SetLimits(ctx, tt.scope, tt.cfg))
		tests[i].cfg.Version = 1 // each is read back at its first version
	}
	// Read back after every write, so that scopes that collided would show.
	for _, tt := range tests {
		got, err := c.GetLimits(ctx, tt.scope)
		must(t, "GetLimits "+tt.name, err)
		if !reflect.DeepEqual(got, tt.cfg) {
			t.Errorf("%s: GetLimits = %+v, want %+v", tt.name, got, tt.cfg)
		}
	}
	// The entity default has three spellings.
	for _, s := range []tollgate.Scope{{Entity: "org-1"}, tollgate.EntityScope("org-1", tollgate.DefaultResource)} {
		got, err := c.GetLimits(ctx, s)
		must(t, "GetLimits entity default", err)
		if !reflect.DeepEqual(got, tests[2].cfg) {
			t.Errorf("GetLimits(%+v) = %+v, want the entity default %+v", s, got, tests[2].cfg)
		}
	}
	// The stored entity+resource limits are the ones an acquire uses.
	sts, err := c.Available(ctx, "org-1", "openai/gpt-4o")
	must(t, "Available", err)
	if len(sts) != 2 || sts[0].Limit != "inflight" && sts[0].Limit != "rps" {
		t.Errorf("Available with stored limits = %+v, want rps and inflight", sts)
	}

	for _, tt := range tests {
		must(t, "DeleteLimits "+tt.name, c.DeleteLimits(ctx, tt.scope))
		_, err := c.GetLimits(ctx, tt.scope)
		wantErr(t, "GetLimits after delete, "+tt.name, err, tollgate.ErrNotFound)
		wantErr(t, "DeleteLimits twice, "+tt.name, c.DeleteLimits(ctx, tt.scope), tollgate.ErrNotFound)
	}
}

func TestSetLimitsOfMissingEntity(t *testing.T) {
	c := newEnv(t).client(t)
	err := c.SetLimits(context.Background(), tollgate.EntityScope("ghost", ""), tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 1)}})
	wantErr(t, "SetLimits of a missing entity", err, tollgate.ErrEntityNotFound)
}

func TestAuditEventsCarryThePrincipal(t *testing.T) {
	e := newEnv(t)
	alice := e.client(t, client.WithPrincipal("alice"))
	ctx := context.Background()
	_, err := alice.CreateEntity(ctx, tollgate.Entity{ID: "org-1"})
	must(t, "CreateEntity", err)
	must(t, "SetLimits", alice.SetLimits(ctx, tollgate.EntityScope("org-1", ""), tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 5)}}))
	must(t, "SetLimits system", alice.SetLimits(ctx, tollgate.SystemScope(), tollgate.Config{Limits: []tollgate.Limit{tollgate.PerMinute("rpm", 50)}}))

	evs, err := alice.AuditEvents(ctx, "org-1", "", 0)
	must(t, "AuditEvents", err)
	if len(evs) != 2 {
		t.Fatalf("AuditEvents(org-1) = %+v, want 2 events", evs)
	}
	for _, ev := range evs {
		if ev.Principal != "alice" || ev.Entity != "org-1" || ev.Action == "" || !ev.Time.Equal(epoch) {
			t.Errorf("event = %+v, want principal alice, entity org-1, an action, time %v", ev, epoch)
		}
	}
	sys, err := alice.AuditEvents(ctx, "", "", 0)
	must(t, "AuditEvents system", err)
	if len(sys) != 1 || sys[0].Principal != "alice" {
		t.Errorf("system AuditEvents = %+v, want one by alice", sys)
	}

	// Paging: one at a time, following the cursor.
	first, err := alice.AuditEvents(ctx, "org-1", "", 1)
	must(t, "AuditEvents page 1", err)
	second, err := alice.AuditEvents(ctx, "org-1", first[0].ID, 1)
	must(t, "AuditEvents page 2", err)
	if len(first) != 1 || len(second) != 1 || first[0].ID != evs[0].ID || second[0].ID != evs[1].ID {
		t.Errorf("pages %+v then %+v, want %+v", first, second, evs)
	}
	_, err = alice.AuditEvents(ctx, "org-1", "", tollgate.MaxAuditPage+1)
	wantErr(t, "AuditEvents over the page bound", err, tollgate.ErrInvalid)
}

func TestListAndUpdateEntities(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	ctx := context.Background()
	for _, ent := range []tollgate.Entity{
		{ID: "org-a"}, {ID: "org-b"},
		{ID: "key", ParentID: "org-a", Cascade: true, Name: "k", Metadata: map[string]string{"team": "x"}},
	} {
		_, err := c.CreateEntity(ctx, ent)
		must(t, "CreateEntity "+ent.ID, err)
	}
	var ids []string
	after := ""
	for {
		page, err := c.ListEntities(ctx, after, 2)
		must(t, "ListEntities", err)
		ids = append(ids, entityIDs(page)...)
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].ID
	}
	if !reflect.DeepEqual(ids, []string{"key", "org-a", "org-b"}) {
		t.Errorf("ListEntities pages = %v", ids)
	}
	_, err := c.ListEntities(ctx, "", tollgate.MaxEntityPage+1)
	wantErr(t, "ListEntities with too big a limit", err, tollgate.ErrInvalid)

	// UpdateEntity replaces every field, as the library's does.
	got, err := c.UpdateEntity(ctx, tollgate.Entity{ID: "key", ParentID: "org-b"})
	must(t, "UpdateEntity", err)
	if got.ParentID != "org-b" || got.Cascade || got.Name != "" || got.Metadata != nil || !got.CreatedAt.Equal(epoch) {
		t.Errorf("UpdateEntity = %+v, want a plain child of org-b created at %v", got, epoch)
	}
	kids, err := c.Children(ctx, "org-b")
	must(t, "Children", err)
	if !reflect.DeepEqual(entityIDs(kids), []string{"key"}) {
		t.Errorf("Children(org-b) = %v, want [key]", entityIDs(kids))
	}
	cases := []struct {
		name string
		e    tollgate.Entity
		want error
	}{
		{"missing", tollgate.Entity{ID: "ghost"}, tollgate.ErrEntityNotFound},
		{"missing parent", tollgate.Entity{ID: "key", ParentID: "ghost"}, tollgate.ErrEntityNotFound},
		{"cycle", tollgate.Entity{ID: "org-b", ParentID: "key"}, tollgate.ErrInvalid},
		{"bad id", tollgate.Entity{ID: ""}, tollgate.ErrInvalid},
	}
	for _, tc := range cases {
		_, err := c.UpdateEntity(ctx, tc.e)
		wantErr(t, "UpdateEntity "+tc.name, err, tc.want)
	}
}
