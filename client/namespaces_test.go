package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/client"
)

func TestNamespaces(t *testing.T) {
	e := newEnv(t)
	admin := e.client(t)
	ctx := context.Background()

	for _, name := range []string{"tenant-a", "tenant-b"} {
		n, err := admin.RegisterNamespace(ctx, name)
		must(t, "RegisterNamespace "+name, err)
		if n.Name != name || n.ID == "" || !n.CreatedAt.Equal(epoch) || n.Deleted() {
			t.Errorf("RegisterNamespace = %+v, want %s with an id, created at %v", n, name, epoch)
		}
	}
	_, err := admin.RegisterNamespace(ctx, "tenant-a")
	wantErr(t, "RegisterNamespace twice", err, tollgate.ErrNamespaceExists)

	list, err := admin.ListNamespaces(ctx)
	must(t, "ListNamespaces", err)
	names := make([]string, len(list))
	for i, n := range list {
		names[i] = n.Name
	}
	if !slices.Contains(names, "tenant-a") || !slices.Contains(names, "tenant-b") || !slices.IsSorted(names) {
		t.Errorf("ListNamespaces = %v, want tenant-a and tenant-b, sorted", names)
	}

	a := e.client(t, client.WithNamespace("tenant-a"))
	b := e.client(t, client.WithNamespace("tenant-b"))
	_, err = a.CreateEntity(ctx, tollgate.Entity{ID: "org-1", Name: "in a"})
	must(t, "CreateEntity in a", err)
	_, err = b.GetEntity(ctx, "org-1")
	wantErr(t, "GetEntity from b of a's entity", err, tollgate.ErrEntityNotFound)
	_, err = admin.GetEntity(ctx, "org-1")
	wantErr(t, "GetEntity from default of a's entity", err, tollgate.ErrEntityNotFound)

	must(t, "DeleteNamespace", admin.DeleteNamespace(ctx, "tenant-a"))
	n, err := admin.GetNamespace(ctx, "tenant-a")
	must(t, "GetNamespace", err)
	if !n.Deleted() {
		t.Errorf("GetNamespace after delete = %+v, want deleted", n)
	}
	_, err = a.GetEntity(ctx, "org-1")
	wantErr(t, "GetEntity in a deleted namespace", err, tollgate.ErrNamespaceDeleted)

	must(t, "RecoverNamespace", admin.RecoverNamespace(ctx, "tenant-a"))
	got, err := a.GetEntity(ctx, "org-1")
	must(t, "GetEntity after recover", err)
	if got.Name != "in a" {
		t.Errorf("GetEntity after recover = %+v, want the entity back", got)
	}

	err = admin.PurgeNamespace(ctx, "tenant-a", nil)
	wantErr(t, "PurgeNamespace of a live namespace", err, tollgate.ErrInvalid)
	must(t, "DeleteNamespace", admin.DeleteNamespace(ctx, "tenant-a"))
	deleted := 0
	must(t, "PurgeNamespace", admin.PurgeNamespace(ctx, "tenant-a", func(n int) { deleted = n }))
	if deleted < 1 {
		t.Errorf("PurgeNamespace deleted %d items, want at least the entity", deleted)
	}
	_, err = admin.GetNamespace(ctx, "tenant-a")
	wantErr(t, "GetNamespace after purge", err, tollgate.ErrNamespaceNotFound)
	_, err = a.GetEntity(ctx, "org-1")
	wantErr(t, "GetEntity in a purged namespace", err, tollgate.ErrNamespaceNotFound)
	wantErr(t, "DeleteNamespace of a purged namespace", admin.DeleteNamespace(ctx, "tenant-a"), tollgate.ErrNamespaceNotFound)
}

func TestUnregisteredNamespace(t *testing.T) {
	c := newEnv(t).client(t, client.WithNamespace("never-registered"))
	_, err := c.Acquire(context.Background(), "key-1", "gpt", tollgate.Consume{"rpm": 1}, client.WithLimits(tollgate.PerMinute("rpm", 1)))
	wantErr(t, "Acquire in an unregistered namespace", err, tollgate.ErrNamespaceNotFound)
}

func TestNewRejectsBadNamespace(t *testing.T) {
	_, err := client.New("http://localhost:1", client.WithNamespace("bad name"))
	var ve *tollgate.ValidationError
	if !errors.As(err, &ve) || ve.Field != "namespace" {
		t.Fatalf("New with a bad namespace: err = %v, want a *ValidationError on namespace", err)
	}
}
